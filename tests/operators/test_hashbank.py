"""Hash banks (operators/hashbank.py): the band index finds every phash within the distance and
none beyond, entries apply in ts order, duplicates are no-ops, and the persisted form restores."""

from __future__ import annotations

import json
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from operators.hashbank import PHASH_MAX_DISTANCE, HashBanks, state_key
from operators.policy import PolicyError, load_policy
from schemas import parse
from tests.conftest import T0, bank_entry
from tests.operators.policy_builders import global_document

PHASHES = st.integers(min_value=0, max_value=2**64 - 1)


def entry(**overrides: object) -> object:
    return parse("hash.bank", json.dumps(bank_entry(**overrides)))


def phash_entry(value: int, bank: str = "known_bad", at: int = T0, op: str = "add") -> object:
    return entry(
        event_id=f"hb-{value:016x}-{bank}-{at}-{op}",
        hash_type="phash",
        hash=f"{value:016x}",
        bank=bank,
        ts=at,
        op=op,
    )


def flip(value: int, bits: list[int]) -> int:
    for bit in bits:
        value ^= 1 << bit
    return value


@settings(max_examples=60, deadline=None)
@given(
    query=PHASHES,
    flips=st.lists(st.lists(st.integers(0, 63), max_size=12, unique=True), max_size=20),
    noise=st.lists(PHASHES, max_size=20),
    distance=st.integers(0, PHASH_MAX_DISTANCE),
)
def test_band_index_finds_exactly_the_phashes_within_the_distance(
    query: int, flips: list[list[int]], noise: list[int], distance: int
) -> None:
    """Whatever the bank, the index's answer equals a full scan's (none missed, none extra)."""
    banked = {flip(query, bits) for bits in flips} | set(noise)
    banks = HashBanks()
    for value in banked:
        banks.apply(phash_entry(value))
    expected = {value for value in banked if (value ^ query).bit_count() <= distance}
    assert banks.phash_candidates(query, distance) == expected
    matched = banks.matches(None, f"{query:016x}", T0, distance)
    assert matched == (frozenset({"known_bad"}) if expected else frozenset())


def test_a_phash_seven_bits_away_in_seven_bands_still_matches() -> None:
    """The pigeonhole case: one differing bit in each of 7 bands leaves one band exact."""
    query = random.Random(7).getrandbits(64)
    far = flip(query, [band * 8 for band in range(7)])
    banks = HashBanks()
    banks.apply(phash_entry(far))
    assert banks.matches(None, f"{query:016x}", T0, 7) == {"known_bad"}
    assert banks.matches(None, f"{query:016x}", T0, 6) == frozenset()
    eight_away = flip(query, [band * 8 for band in range(8)])
    banks.apply(phash_entry(eight_away, bank="other"))
    assert "other" not in banks.matches(None, f"{query:016x}", T0, 7)


def test_sha256_adds_and_removes_apply_from_their_ts_in_order() -> None:
    banks = HashBanks()
    assert banks.apply(entry(event_id="a", ts=T0 + 10))
    assert banks.apply(entry(event_id="r", op="remove", ts=T0 + 20))
    assert banks.apply(entry(event_id="a2", ts=T0 + 30))
    sha = "A" * 64  # upper case matches too
    assert [banks.matches(sha, None, at, 0) for at in (T0, T0 + 10, T0 + 25, T0 + 30)] == [
        frozenset(),
        {"known_bad"},
        frozenset(),
        {"known_bad"},
    ]


def test_equal_ts_entries_keep_their_arrival_order() -> None:
    banks = HashBanks()
    banks.apply(entry(event_id="a", ts=T0))
    banks.apply(entry(event_id="r", op="remove", ts=T0))
    assert banks.matches("a" * 64, None, T0, 0) == frozenset()
    other = HashBanks()
    other.apply(entry(event_id="r", op="remove", ts=T0))
    other.apply(entry(event_id="a", ts=T0))
    assert other.matches("a" * 64, None, T0, 0) == {"known_bad"}


def test_an_identical_entry_is_a_no_op_whatever_its_event_id() -> None:
    banks = HashBanks()
    assert banks.apply(entry(event_id="a"))
    assert not banks.apply(entry(event_id="a"))
    assert not banks.apply(entry(event_id="redelivered-with-new-id"))
    assert banks.apply(entry(event_id="b", bank="other"))
    assert len(banks) == 2


def test_the_persisted_form_restores_the_same_banks() -> None:
    banks = HashBanks()
    values = [random.Random(seed).getrandbits(64) for seed in range(50)]
    for value in values:
        banks.apply(phash_entry(value))
    banks.apply(entry(event_id="a", ts=T0 + 5))
    banks.apply(entry(event_id="r", op="remove", ts=T0 + 9))
    state = {
        state_key("phash", f"{v:016x}"): banks.state_entries("phash", f"{v:016x}") for v in values
    }
    state[state_key("sha256", "a" * 64)] = banks.state_entries("sha256", "a" * 64)
    state["revision"] = "3"  # other broadcast keys are skipped
    restored = HashBanks.from_state(state.items())
    assert len(restored) == len(banks) == 52
    for value in values[:5]:
        query = f"{value ^ 0b101:016x}"
        assert restored.matches(None, query, T0, 2) == banks.matches(None, query, T0, 2)
    assert restored.matches("a" * 64, None, T0 + 6, 0) == {"known_bad"}
    assert restored.matches("a" * 64, None, T0 + 9, 0) == frozenset()


def test_a_distance_beyond_the_index_is_refused() -> None:
    with pytest.raises(ValueError, match="beyond the band index"):
        HashBanks().matches(None, "0" * 16, T0, PHASH_MAX_DISTANCE + 1)
    with pytest.raises(PolicyError, match="phash_max_distance 8 is above 7"):
        load_policy(global_document(1, phash_max_distance=8))
    assert load_policy(global_document(1, phash_max_distance=7)) is not None
