"""Bank retroaction (modstream/moderation/rules/retro.py and the `moderation.retro` branch of the
moderation step): a bank addition re-decides versions uploaded before it, whichever arrives
first."""

from __future__ import annotations

import json
from typing import Any

from modstream.moderation.rules import retro
from modstream.moderation.step import RETRO, STATE_TTL_MS
from modstream.testing.records import T0, bank_entry
from modstream.testing.versions import Version, context, image, image_evidence

SHA = "ab" * 32
PHASH = 0x0123456789ABCDEF
BANK_TS = T0 + 60_000


def upload_of(content_id: str = "c-1", at: int = T0, **hashes: Any) -> dict[str, Any]:
    return {
        "content_id": content_id,
        "content_version": 1,
        "ts": at,
        "sha256": hashes.get("sha256", SHA),
        "phash": hashes.get("phash"),
    }


def bank_of(at: int = BANK_TS, **overrides: Any) -> dict[str, Any]:
    return bank_entry(hash=SHA, ts=at, **overrides)


def phash_bank(value: int, at: int = BANK_TS) -> dict[str, Any]:
    return bank_entry(event_id=f"hb-{value:x}", hash_type="phash", hash=f"{value:016x}", ts=at)


class HashKeys:
    """Drives the hash-keyed join like Flink: one state per hash key, every input fanned out."""

    def __init__(self) -> None:
        self.states: dict[str, Any] = {}
        self.timers: dict[str, set[int]] = {}
        self.outputs: list[dict[str, Any]] = []

    def _take(self, key: str, result: retro.RetroResult) -> None:
        state = json.loads(json.dumps(result.state)) if result.state is not None else None
        if state is None:
            self.states.pop(key, None)
        else:
            self.states[key] = state
        self.timers.setdefault(key, set()).update(result.timers)
        self.outputs += result.outputs

    def upload(self, record: dict[str, Any]) -> None:
        for key in retro.registration_keys(record["sha256"], record["phash"]):
            self._take(key, retro.on_registration(self.states.get(key), key, record))

    def bank(self, record: dict[str, Any]) -> None:
        for key in retro.bank_keys(record["hash_type"], record["hash"]):
            self._take(key, retro.on_bank(self.states.get(key), key, record))

    def fire_until(self, ts: int) -> None:
        while due := sorted((t, k) for k, ts_ in self.timers.items() for t in ts_ if t <= ts):
            timer, key = due[0]
            self.timers[key].discard(timer)
            self._take(key, retro.on_timer(self.states.get(key), timer))


def test_an_addition_after_the_upload_re_decides_it_in_either_arrival_order() -> None:
    upload_first, bank_first = HashKeys(), HashKeys()
    upload_first.upload(upload_of())
    upload_first.bank(bank_of())
    bank_first.bank(bank_of())
    bank_first.upload(upload_of())
    assert upload_first.outputs == bank_first.outputs
    [record] = upload_first.outputs
    assert record["ts"] == BANK_TS and record["bank"] == "known_bad"
    assert (record["content_id"], record["content_version"]) == ("c-1", 1)
    assert retro.version_key(record) == "c-1\x1f1"
    assert record["event_id"].startswith("retro-")


def test_an_upload_at_or_after_the_addition_is_not_re_decided() -> None:
    """The upload itself sees the bank at its own ts (HashBanks), so no retro record."""
    for upload_first in (True, False):
        keys = HashKeys()
        if upload_first:
            keys.upload(upload_of(at=BANK_TS))
        keys.bank(bank_of())
        if not upload_first:
            keys.upload(upload_of(at=BANK_TS))
        keys.upload(upload_of("c-2", at=BANK_TS + 1))
        assert keys.outputs == [], upload_first


def test_a_removal_ends_the_addition_for_registrations_that_come_after_it() -> None:
    keys = HashKeys()
    keys.bank(bank_of())
    keys.bank(bank_of(event_id="hb-r", op="remove", at=BANK_TS + 10))
    assert keys.states == {}  # nothing left to hold: the key is cleared
    keys.upload(upload_of())
    assert keys.outputs == []


def test_a_duplicate_addition_or_registration_emits_nothing_more() -> None:
    keys = HashKeys()
    keys.upload(upload_of())
    keys.bank(bank_of())
    keys.bank(bank_of())
    keys.upload(upload_of())
    assert len(keys.outputs) == 1


def test_a_phash_pair_is_emitted_once_and_only_within_the_index_bound() -> None:
    near = PHASH ^ 0b1011  # 3 bits away, all in band 0: shares the 7 other bands
    far = PHASH ^ ((1 << 8) - 1) ^ (0xFF << 8)  # 16 bits away
    keys = HashKeys()
    keys.upload(upload_of("near", phash=f"{near:016x}", sha256=None))
    keys.upload(upload_of("far", phash=f"{far:016x}", sha256=None))
    keys.bank(phash_bank(PHASH))
    assert [record["content_id"] for record in keys.outputs] == ["near"]
    assert keys.outputs[0]["hash_type"] == "phash"


def test_additions_wait_until_event_time_passes_them_and_registrations_until_retention() -> None:
    keys = HashKeys()
    keys.bank(bank_of())
    keys.fire_until(BANK_TS)
    assert keys.states == {}  # every registration uploaded before BANK_TS has arrived
    keys.upload(upload_of())
    keys.fire_until(T0 + STATE_TTL_MS)
    assert keys.states != {}
    keys.fire_until(T0 + STATE_TTL_MS + 1)
    assert keys.states == {}  # retained as long as the version's state, then cleared


def test_registrations_per_key_are_bounded_to_the_newest() -> None:
    state = None
    key = f"sha256:{SHA}"
    for n in range(retro.MAX_VERSIONS_PER_KEY + 5):
        state = retro.on_registration(state, key, upload_of(f"c-{n}", at=T0 + n)).state
    assert state is not None and len(state["versions"]) == retro.MAX_VERSIONS_PER_KEY
    assert state["versions"][0][1] == "c-5"


def _allowed() -> Version:
    version = Version(context())
    version.upload(**image(surface="comment", sha256=SHA))
    for record in image_evidence("c-1", T0 + 1):
        version.send("detector.results", record)
    assert version.last["outcome"] == "ALLOW"
    return version


def _retro_record() -> retro.RetroRecord:
    keys = HashKeys()
    keys.upload(upload_of())
    keys.bank(bank_of())
    [record] = keys.outputs
    return retro.RetroRecord.from_dict(record)


def test_the_step_blocks_an_allowed_version_at_the_bank_ts_with_policy_change() -> None:
    version = _allowed()
    version.ctx = context(banks=["known_bad"])
    record = _retro_record()
    version._take(retro_step(version, record))
    decision = version.last
    assert (decision["outcome"], decision["trigger"], decision["ts"]) == (
        "BLOCK",
        "policy_change",
        BANK_TS,
    )
    assert version.of("moderation.actions")[-1]["visibility"] == "hidden"
    before = len(version.outputs)
    version._take(retro_step(version, record))  # the same event id again: a no-op
    assert len(version.outputs) == before


def test_the_step_leaves_a_version_that_does_not_match_at_the_bank_ts_alone() -> None:
    version = _allowed()
    before = len(version.outputs)
    version._take(retro_step(version, _retro_record()))  # ctx: no bank matches
    assert len(version.outputs) == before


def test_the_step_creates_nothing_for_a_version_it_does_not_hold() -> None:
    from modstream.moderation.step import step

    result = step(None, RETRO, _retro_record(), BANK_TS, context(banks=["known_bad"]))
    assert result.state is None and result.outputs == []


def retro_step(version: Version, record: retro.RetroRecord) -> Any:
    from modstream.moderation.step import step

    return step(version.state, RETRO, record, record.ts, version.ctx)
