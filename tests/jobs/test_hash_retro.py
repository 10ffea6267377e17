"""Bank retroaction through the adapters, no JVM: the bank in broadcast state one key per entry
(Moderate), the fan-out and hash-keyed join (modstream/jobs/moderation/hash_retro.py), and a
`moderation.retro` row re-deciding an allowed version at the bank's ts."""

from __future__ import annotations

import json
from typing import Any

import yaml
from pyflink.common import Row

from modstream.jobs.moderation.config import ModerationConfig
from modstream.jobs.moderation.hash_retro import RetroJoin, fan_out
from modstream.moderation.step import RETRO
from modstream.testing.flink import (
    FakeContext,
    FakeMapState,
    FakeRuntimeContext,
    FakeTimers,
    decoded,
    moderate,
)
from modstream.testing.policies import GLOBAL_YAML
from modstream.testing.records import T0, bank_entry, evidence, upload
from modstream.trust.hashbank import entry_state

SHA = "ab" * 32  # the sha256 of tests.conftest.upload
BANK_TS = T0 + 60_000


def bank_row(**overrides: Any) -> Row:
    record = bank_entry(hash=SHA, ts=BANK_TS, **overrides)
    return Row("broadcast", "hash.bank", "hash.bank", json.dumps(record), record["ts"], 0, "")


def test_bank_records_are_stored_one_key_per_entry_and_rebuilt_once_after_restore() -> None:
    config = ModerationConfig(trusted_policy=yaml.safe_load(GLOBAL_YAML.read_text()))
    adapter, _, ctx = moderate(config)
    assert list(adapter.process_broadcast_element(bank_row(), ctx)) == []
    list(adapter.process_broadcast_element(bank_row(), ctx))  # redelivered: a no-op
    key, value = entry_state("sha256", SHA, (BANK_TS, 0, "add", "known_bad"))
    assert dict(ctx.broadcast) == {key: value}  # no policy revision moved, no whole-bank value
    assert list(adapter.process_broadcast_element(bank_row(event_id="b", bank="other"), ctx)) == []
    assert len(ctx.broadcast) == 2 and ctx.broadcast[key] == value  # the first entry untouched
    restored, _, _ = moderate(config)
    _, banks = restored._load(ctx.broadcast)
    assert banks.matches(SHA, None, BANK_TS, 0) == {"known_bad", "other"}
    assert banks.matches(SHA, None, BANK_TS - 1, 0) == frozenset()


def test_the_join_turns_an_upload_and_a_later_addition_into_one_retro_row() -> None:
    rows = [
        *fan_out(decoded("content.versions", upload(surface="comment"))),
        *fan_out(bank_row()),
        *fan_out(decoded("detector.results", evidence())),  # not an upload: nothing
    ]
    assert [row[0] for row in rows] == [f"sha256:{SHA}", f"sha256:{SHA}"]
    join, runtime_context = RetroJoin(), FakeRuntimeContext()
    join.open(runtime_context)  # type: ignore[arg-type]
    ctx = FakeContext(FakeMapState(), FakeTimers())
    out = [emitted for row in rows for emitted in join.process_element(row, ctx)]
    assert len(out) == 1
    kind, key, topic, raw, ts, _, lane = out[0]
    assert (kind, key, topic, ts, lane) == ("keyed", "c-1\x1f1", RETRO, BANK_TS, "")
    assert json.loads(raw)["bank_event_id"] == "hb-1"
    assert runtime_context.version.value() is not None and ctx.timers.registered


def test_a_retro_row_blocks_an_allowed_version_at_the_bank_ts() -> None:
    config = ModerationConfig(trusted_policy=yaml.safe_load(GLOBAL_YAML.read_text()))
    adapter, _, ctx = moderate(config)
    adapter.process_element(decoded("content.versions", upload(surface="comment")), ctx)
    list(adapter.on_timer(T0, ctx))
    adapter.process_element(decoded("detector.results", evidence(at=T0 + 10)), ctx)
    allowed = [json.loads(o[2]) for o in adapter.on_timer(T0 + 10, ctx)]
    assert allowed[0]["outcome"] == "ALLOW"
    list(adapter.process_broadcast_element(bank_row(), ctx))
    join = RetroJoin()
    join.open(FakeRuntimeContext())  # type: ignore[arg-type]
    join_ctx = FakeContext(FakeMapState(), FakeTimers())
    rows = [*fan_out(decoded("content.versions", upload(surface="comment"))), *fan_out(bank_row())]
    [retro_row] = [out for row in rows for out in join.process_element(row, join_ctx)]
    adapter.process_element(retro_row, ctx)
    outputs = list(adapter.on_timer(BANK_TS, ctx))
    decisions = [json.loads(o[2]) for o in outputs if o[0] == "moderation.decisions"]
    actions = [json.loads(o[2]) for o in outputs if o[0] == "moderation.actions"]
    assert [(d["outcome"], d["trigger"], d["ts"]) for d in decisions] == [
        ("BLOCK", "policy_change", BANK_TS)
    ]
    assert actions[0]["visibility"] == "hidden"
