"""The retro join's batched Python side (modstream/jobs/moderation/retro_batch.py) against the
PyFlink adapter `RetroJoin` it replaces: the same `moderation.retro` rows, stored state and timers,
one call per watermark instead of one per hash key and record; and decode's hash-key rows (its
fan-out), emitted with the batched engine only. No JVM (`JavaKeyed`, modstream/testing/flink.py)."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from pyflink.common import Row

from modstream.contract.signals import hash_bank_key
from modstream.jobs.moderation.config import HASH_ROUTE, ModerationConfig
from modstream.jobs.moderation.decode import Decode
from modstream.jobs.moderation.decode import decoded as decode_rows
from modstream.jobs.moderation.hash_retro import RetroJoin, fan_out
from modstream.jobs.moderation.retro_batch import SEQS, BatchedRetro
from modstream.moderation import state_schema
from modstream.moderation.rules import retro
from modstream.moderation.step import RETRO
from modstream.testing.flink import FlinkKeyed, JavaKeyed, decoded
from modstream.testing.records import NOTHING_REQUIRED, T0, bank_entry, upload

SHA = "cd" * 32
PHASH = 0x0F1E2D3C4B5A6978
BANK_TS = T0 + 60_000


def _bank(event_id: str, ts: int, **overrides: Any) -> Row:
    record = bank_entry(event_id=event_id, hash=SHA, ts=ts, **overrides)
    return Row("broadcast", "hash.bank", "hash.bank", json.dumps(record), ts, 0, "")


def _phash_bank(event_id: str, ts: int, phash: int) -> Row:
    record = bank_entry(event_id=event_id, hash_type="phash", hash=f"{phash:016x}", ts=ts)
    return Row("broadcast", "hash.bank", "hash.bank", json.dumps(record), ts, 0, "")


def _upload(content_id: str, at: int, **hashes: Any) -> Row:
    return decoded("content.versions", upload(content_id, at=at, **hashes))


def _hash_rows(row: Row) -> list[Row]:
    """Decode's rows for the batched retro join: Row(HASH_ROUTE, key, kind, payload, ts, seq)."""
    return [Row(HASH_ROUTE, k, kind, p, ts, seq, "") for k, kind, p, ts, seq in fan_out(row)]


def _both(arrivals: list[Row | int]) -> tuple[FlinkKeyed, JavaKeyed, list[Any], list[Any]]:
    """`arrivals`: decoded rows and watermarks, in arrival order, to both sides; a row's seq
    is its place in that order, as replay numbers its lines."""
    flink = FlinkKeyed(RetroJoin, key_of=lambda row: row[0])
    java = JavaKeyed(BatchedRetro, ModerationConfig())
    stepwise: list[Any] = []
    batched: list[Any] = []
    for line, item in enumerate(arrivals, start=1):
        if isinstance(item, int):
            stepwise += flink.watermark(item)
            batched += java.watermark(item)
            continue
        item = Row(*item[:5], line, item[6])
        for hashed in fan_out(item):
            stepwise += flink.element(hashed)
        for hashed in _hash_rows(item):
            java.element(hashed)
    return flink, java, stepwise, batched


def _same_state(flink: FlinkKeyed, java: JavaKeyed) -> None:
    """The same join state per hash key (the batched side keeps its pairs' seqs besides)."""
    batched = {key: state_schema.load(value, "retro") for key, value in java.values.items()}
    for document in batched.values():
        assert document is not None
        document.pop(SEQS)
    assert {key: state_schema.load(v, "retro") for key, v in flink.stored().items()} == batched
    assert flink.timers() == java.timers


def _bank_retro_arrivals() -> list[Row | int]:
    near, far = PHASH ^ 0b111, PHASH ^ 0x3FF
    return [
        _upload("by-sha", T0, sha256=SHA),
        _upload("other", T0, sha256="ef" * 32),
        _upload("near", T0, phash=f"{near:016x}"),
        _upload("far", T0, phash=f"{far:016x}"),
        T0 + 10,
        _bank("hb-sha", BANK_TS),
        _phash_bank("hb-ph", BANK_TS, PHASH),
        _upload("late", BANK_TS + 1000, sha256=SHA),
        BANK_TS + 1000,
        _upload("tick", BANK_TS + 60_000),
        BANK_TS + 60_000,
    ]


def test_the_bank_retro_scenario_gives_the_same_rows_state_and_timers() -> None:
    """tests/integration/test_bank_retro.py's input: the sha256 and phash additions re-decide
    by-sha and near at the bank's ts; nothing for other, far (10 bits away) or late."""
    flink, java, stepwise, batched = _both(_bank_retro_arrivals())
    assert sorted(batched) == sorted(stepwise)
    assert {(row[1].split("\x1f")[0], row[4]) for row in batched} == {
        ("by-sha", BANK_TS),
        ("near", BANK_TS),
    }
    assert all(row[0] == "keyed" and row[2] == RETRO and row[6] == "" for row in batched)
    _same_state(flink, java)
    assert java.calls == 3 < flink.calls
    assert java.values  # registrations kept for additions still to come


def test_an_upload_read_after_the_addition_but_before_its_ts_passed_still_meets_it() -> None:
    """Arrival order bank, then upload (ts before the bank's): `RetroJoin` meets them on the
    upload's arrival, the batched side in ts order at the watermark; the same row."""
    arrivals: list[Row | int] = [
        _bank("hb-1", BANK_TS),
        _upload("c-1", T0, sha256=SHA),
        BANK_TS,
    ]
    flink, java, stepwise, batched = _both(arrivals)
    assert len(stepwise) == 1 and batched == stepwise
    assert json.loads(batched[0][3])["bank_event_id"] == "hb-1"
    assert batched[0][5] == 2  # the upload's: the pair's second to arrive, as `RetroJoin`
    _same_state(flink, java)


def test_an_upload_after_the_watermark_passed_the_addition_meets_it_on_neither_side() -> None:
    arrivals: list[Row | int] = [_bank("hb-1", BANK_TS), BANK_TS, _upload("c-1", T0, sha256=SHA)]
    arrivals.append(BANK_TS + 1)
    flink, java, stepwise, batched = _both(arrivals)
    assert stepwise == batched == []
    _same_state(flink, java)


def test_a_removal_and_retention_leave_no_state_behind() -> None:
    """An addition removed before its ts re-decides nothing; once the registration ages out,
    no key keeps state or a timer on either side."""
    arrivals: list[Row | int] = [
        _upload("c-1", T0, sha256=SHA),
        _bank("hb-1", BANK_TS),
        _bank("hb-2", BANK_TS, op="remove"),
        BANK_TS,
        T0 + retro.RETENTION_MS + 2,
    ]
    flink, java, stepwise, batched = _both(arrivals)
    assert stepwise == batched
    _same_state(flink, java)
    assert java.values == {} and java.timers == set()


def test_a_state_too_new_is_left_as_it_is() -> None:
    java = JavaKeyed(BatchedRetro, ModerationConfig())
    key = f"sha256:{SHA}"
    too_new = json.dumps({**retro.new_state(), state_schema.SCHEMA_FIELD: 10**6}).encode()
    java.values[key] = too_new
    for row in _hash_rows(_bank("hb-1", BANK_TS)):
        java.element(row)
    assert java.watermark(BANK_TS) == []
    assert java.values == {key: too_new}


def test_decode_follows_uploads_and_bank_records_with_their_hash_rows_in_the_batched_engine() -> (
    None
):
    record = upload("c-1", at=T0, sha256=SHA, phash=f"{PHASH:016x}")
    bank = bank_entry(event_id="hb-1", hash=SHA, ts=BANK_TS)
    records = [
        ("content.versions", "c-1", json.dumps(record), T0, "content.versions#0@1", 5),
        ("hash.bank", hash_bank_key("known_bad", "sha256", SHA), json.dumps(bank), BANK_TS, "", 6),
    ]
    config = ModerationConfig(keyring=NOTHING_REQUIRED)
    plain = decode_rows(Decode(dataclasses.replace(config, engine="pyflink")), records)
    batched = decode_rows(Decode(config), records)  # the default engine
    assert [row[0] for row in plain] == ["keyed", "broadcast"]
    routes, keys, kinds, _, stamps, seqs, lanes = (list(c) for c in zip(*batched, strict=True))
    assert routes == ["keyed", *[HASH_ROUTE] * 9, "broadcast", HASH_ROUTE]
    assert keys[1:10] == retro.registration_keys(SHA, f"{PHASH:016x}")
    assert kinds[1:10] == ["upload"] * 9 and kinds[11] == "bank"
    assert (stamps[1], seqs[1], lanes[1]) == (T0, 5, "")  # never moves event time
    assert (stamps[11], seqs[11], keys[11]) == (BANK_TS, 6, f"sha256:{SHA}")
    assert [row for row in batched if row[0] != HASH_ROUTE] == plain
