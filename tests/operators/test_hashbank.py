"""Hash banks (modstream/trust/hashbank.py): the band index finds every phash within the distance
and none beyond, entries apply in ts order, duplicates are no-ops, and the persisted form
restores."""

from __future__ import annotations

import json
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from modstream.contract import parse
from modstream.contract.records import contract_key
from modstream.contract.signals import HashBankEntry, hash_bank_key_problem
from modstream.policy.evaluate import PolicyError, load_policy
from modstream.testing.policies import global_document
from modstream.testing.records import T0, bank_entry
from modstream.trust.hashbank import PHASH_MAX_DISTANCE, BankFull, HashBanks, entry_state, state_key

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
    held = [(f"{v:016x}", banks.apply(phash_entry(v))) for v in values]
    held.append(("a" * 64, banks.apply(entry(event_id="a", ts=T0 + 5))))
    held.append(("a" * 64, banks.apply(entry(event_id="r", op="remove", ts=T0 + 9))))
    state = dict(
        entry_state("phash" if len(h) == 16 else "sha256", h, e) for h, e in held if e is not None
    )
    state["revision"] = "3"  # other broadcast keys are skipped
    restored = HashBanks.from_state(reversed(state.items()))  # any order
    assert len(restored) == len(banks) == 52
    for value in values[:5]:
        query = f"{value ^ 0b101:016x}"
        assert restored.matches(None, query, T0, 2) == banks.matches(None, query, T0, 2)
    assert restored.matches("a" * 64, None, T0 + 6, 0) == {"known_bad"}
    assert restored.matches("a" * 64, None, T0 + 9, 0) == frozenset()


def test_the_layout_before_issue_27_is_still_read_and_added_to() -> None:
    """A checkpoint of one key per hash (its whole entry list) restores, and entries added
    after it keep their order behind the restored ones."""
    legacy = json.dumps([[T0, 0, "add", "known_bad"], [T0 + 20, 1, "remove", "known_bad"]])
    restored = HashBanks.from_state([(state_key("sha256", "a" * 64), legacy)])
    assert restored.matches("a" * 64, None, T0 + 10, 0) == {"known_bad"}
    added = restored.apply(entry(event_id="a2", ts=T0 + 20))  # equal ts: after the remove
    assert added == (T0 + 20, 2, "add", "known_bad")
    assert restored.matches("a" * 64, None, T0 + 20, 0) == {"known_bad"}
    key, value = entry_state("sha256", "a" * 64, added)
    again = HashBanks.from_state([(state_key("sha256", "a" * 64), legacy), (key, value)])
    assert again.matches("a" * 64, None, T0 + 20, 0) == {"known_bad"}
    assert len(again) == 3


def test_a_distance_beyond_the_index_is_refused() -> None:
    with pytest.raises(ValueError, match="beyond the band index"):
        HashBanks().matches(None, "0" * 16, T0, PHASH_MAX_DISTANCE + 1)
    with pytest.raises(PolicyError, match="phash_max_distance 8 is above 7"):
        load_policy(global_document(1, phash_max_distance=8))
    assert load_policy(global_document(1, phash_max_distance=7)) is not None


def compacted(records: list[dict[str, object]]) -> list[dict[str, object]]:
    """What a compacted hash.bank keeps of `records` produced in order: the last per key."""
    last: dict[object, dict[str, object]] = {}
    for record in records:
        last.pop(contract_key("hash.bank", record), None)
        last[contract_key("hash.bank", record)] = record
    return list(last.values())


def test_membership_in_several_banks_survives_compaction() -> None:
    """Issue 27: a hash in two banks, and an add then a remove in one of them, read back from
    the compacted topic (a start without a checkpoint) answer as the live banks do."""
    sha = "b" * 64
    records = [
        bank_entry(event_id="a1", bank="known_bad", hash=sha, ts=T0),
        bank_entry(event_id="a2", bank="partner_feed", hash=sha, ts=T0 + 5),
        bank_entry(event_id="a3", bank="spam_kit", hash=sha, ts=T0 + 6),
        bank_entry(event_id="r3", bank="spam_kit", hash=sha, op="remove", ts=T0 + 9),
    ]
    live, restarted = HashBanks(), HashBanks()
    for record in records:
        live.apply(parse("hash.bank", json.dumps(record)))
    for record in compacted(records):
        restarted.apply(parse("hash.bank", json.dumps(record)))
    assert len(compacted(records)) == 3
    for banks in (live, restarted):
        assert banks.matches(sha, None, T0 + 9, 0) == {"known_bad", "partner_feed"}
        assert banks.matches(sha.upper(), None, T0 + 60_000, 0) == {"known_bad", "partner_feed"}


@pytest.mark.parametrize(
    ("key", "problem"),
    [
        ("known_bad:sha256:" + "a" * 64, False),
        ("a" * 64, False),  # the bare hash: the contract's key, still read
        ("A" * 64, False),
        ("partner_feed:sha256:" + "a" * 64, True),  # another bank's record
        ("known_bad:phash:" + "a" * 64, True),
        ("known_bad:sha256:" + "b" * 64, True),  # another hash
        ("b" * 64, True),
        (None, True),
        ("", True),
    ],
)
def test_a_key_that_does_not_name_the_body_is_a_problem(key: str | None, problem: bool) -> None:
    record = entry()
    assert isinstance(record, HashBankEntry)
    found = hash_bank_key_problem(key, record)
    assert (found is not None) == problem
    if found is not None:
        assert "does not match" in found and "a" * 64 not in found  # names fields, not values


def test_a_bank_at_its_bound_refuses_adds_and_changes_nothing() -> None:
    banks = HashBanks(max_entries_per_bank=2)
    banks.apply(entry(event_id="1", hash="1" * 64))
    banks.apply(entry(event_id="2", hash="2" * 64))
    with pytest.raises(BankFull, match="'known_bad' holds 2 entries"):
        banks.apply(entry(event_id="3", hash="3" * 64))
    with pytest.raises(BankFull):
        banks.apply(entry(event_id="4", hash="1" * 64, ts=T0 + 1))  # a held hash, a new entry
    assert banks.apply(entry(event_id="o", bank="other")) is not None  # its own bound
    assert banks.apply(entry(event_id="1", hash="1" * 64)) is None  # a duplicate stays a no-op
    assert (len(banks), banks.held("known_bad")) == (3, 2)
    assert banks.matches("3" * 64, None, T0 + 9, 0) == frozenset()


def test_a_full_bank_can_still_take_a_held_hash_out_once() -> None:
    """A wrongly banked public file must be removable from a full bank; a remove beyond that
    (of a hash never added, or a second one) is refused, so the bank stays bounded."""
    banks = HashBanks(max_entries_per_bank=2)
    banks.apply(entry(event_id="1", hash="1" * 64))
    banks.apply(entry(event_id="2", hash="2" * 64))
    removal = entry(event_id="r", hash="1" * 64, op="remove", ts=T0 + 5)
    assert banks.apply(removal) == (T0 + 5, 1, "remove", "known_bad")
    assert banks.matches("1" * 64, None, T0 + 5, 0) == frozenset()
    for refused in (
        entry(event_id="r2", hash="1" * 64, op="remove", ts=T0 + 6),  # its newest is a remove
        entry(event_id="r3", hash="3" * 64, op="remove", ts=T0 + 6),  # never added
        entry(event_id="r4", hash="2" * 64, op="remove", ts=T0 - 1),  # older than its add
    ):
        with pytest.raises(BankFull):
            banks.apply(refused)
    assert banks.held("known_bad") == 3


OPS = st.lists(
    st.tuples(
        st.sampled_from(["1" * 64, "2" * 64]),
        st.sampled_from(["known_bad", "partner_feed", "spam_kit"]),
        st.sampled_from(["add", "remove"]),
    ),
    max_size=24,
)


@settings(max_examples=60, deadline=None)
@given(ops=OPS, order=st.randoms(use_true_random=False))
def test_entries_of_distinct_ts_answer_alike_in_any_order_and_after_restore(
    ops: list[tuple[str, str, str]], order: random.Random
) -> None:
    """Each (bank, hash) keeps its own history: arrival order and a restore from the persisted
    form change no answer."""
    records = [
        entry(event_id=f"e{n}", hash=sha, bank=bank, op=op, ts=T0 + 10 * n)
        for n, (sha, bank, op) in enumerate(ops)
    ]
    ordered, shuffled = HashBanks(), HashBanks()
    persisted = {}
    for record in records:
        ordered.apply(record)
    for record in order.sample(records, len(records)):
        held = shuffled.apply(record)
        assert held is not None
        persisted.update([entry_state(record.hash_type, record.hash, held)])  # type: ignore[attr-defined]
    restored = HashBanks.from_state(persisted.items())
    for sha in ("1" * 64, "2" * 64):
        for at in range(T0 - 1, T0 + 10 * len(ops) + 1, 5):
            expected = ordered.matches(sha, None, at, 0)
            assert shuffled.matches(sha, None, at, 0) == expected
            assert restored.matches(sha, None, at, 0) == expected
