"""The moderation job's keyed state read and write points (modstream/moderation/state_schema.py)
through its adapters, with the small fakes of tests/jobs/test_moderation_adapter.py: no JVM."""

from __future__ import annotations

import json
from typing import Any

import msgspec
import yaml
from pyflink.common import Row

from modstream.core import jsonio
from modstream.jobs.moderation.config import ModerationConfig
from modstream.jobs.moderation.hash_retro import RetroJoin, fan_out
from modstream.jobs.moderation.moderate import stored, storing
from modstream.jobs.moderation.reports import ReportGate
from modstream.jobs.moderation.sanctions import Sanctions
from modstream.moderation import state_schema
from modstream.moderation.state import VersionState, event_digest
from modstream.moderation.state_schema import SCHEMA_FIELD, STATE_SCHEMA
from modstream.testing.flink import (
    FakeContext,
    FakeMapState,
    FakeRuntimeContext,
    FakeTimers,
    decoded,
    moderate,
    sanction_entry,
)
from modstream.testing.policies import GLOBAL_YAML
from modstream.testing.records import T0, bank_entry, evidence, report_record, upload
from modstream.testing.stored_states import (
    IMAGE,
    PRE_ISSUE_12_IMAGE,
    PRE_ISSUE_12_IMAGE_NOW,
    as_schema_4,
)

GATE_FAILED = evidence(
    detector="media_check", model_version="mc-1", status="error", scores=None, at=T0 + 1000
)


def config() -> ModerationConfig:
    return ModerationConfig(trusted_policy=yaml.safe_load(GLOBAL_YAML.read_text()))


def gate_failed(stored: str | bytes | None) -> tuple[list[Any], bytes | None]:
    """The outputs of the failed gate's timer on a version holding `stored` (JSON text: as a
    job before state schema 3 stored it; bytes: packed), and what is then stored (with no
    state: after the upload's own timer). The JSON text is gone once read and rewritten."""
    adapter, runtime_context, ctx = moderate(config())
    ctx.key = "c-1\x1f1"
    if stored is None:
        adapter.process_element(decoded("content.versions", upload(**IMAGE)), ctx)
        list(adapter.on_timer(T0, ctx))
    elif isinstance(stored, bytes):
        runtime_context.packed.current = stored
    else:
        runtime_context.version.current = stored
    adapter.process_element(decoded("detector.results", GATE_FAILED), ctx)
    outputs = [
        (topic, key, json.loads(value)) for topic, key, value in adapter.on_timer(T0 + 1000, ctx)
    ]
    assert runtime_context.version.value() is None or runtime_context.packed.value() is None
    return outputs, runtime_context.packed.value()


def stored_document(value: bytes | None) -> VersionState | None:
    return state_schema.load_version(stored(value)[1])


def test_a_restored_pre_issue_12_state_is_migrated_on_read_and_stored_versioned() -> None:
    expected, _ = gate_failed(None)
    outputs, packed = gate_failed(json.dumps(PRE_ISSUE_12_IMAGE_NOW))
    assert [o for o in outputs if o[0] == "moderation.decisions"] == [
        o for o in expected if o[0] == "moderation.decisions"
    ]
    assert outputs == expected
    document = stored_document(packed)
    assert document is not None and document.schema == STATE_SCHEMA
    assert stored(packed)[1][:1] == b"\xdc"  # stored as today's array


def test_a_state_stored_by_the_schema_2_job_decides_as_if_never_stopped() -> None:
    """Today's job before schema 3 stored its value as JSON text: timers, a newline, the
    state's JSON (`jsonio`). The new job reads it, decides the same, and stores it packed."""
    adapter, runtime_context, ctx = moderate(config())
    ctx.key = "c-1\x1f1"
    adapter.process_element(decoded("content.versions", upload(**IMAGE)), ctx)
    list(adapter.on_timer(T0, ctx))
    due, state = stored(runtime_context.packed.value())
    document = state_schema.load_version(state)
    assert document is not None and due is not None
    schema_2 = {**as_schema_4(document), SCHEMA_FIELD: 2}
    del schema_2["human_ids"]  # schema 4's
    text = json.dumps(sorted(due), separators=(",", ":")) + "\n" + jsonio.dumps(schema_2)
    expected, packed_after = gate_failed(runtime_context.packed.value())
    outputs, packed = gate_failed(text)
    assert outputs == expected and any(o[0] == "moderation.decisions" for o in outputs)
    assert stored(packed)[0] == stored(packed_after)[0]
    restored, went_on = stored_document(packed), stored_document(packed_after)
    assert restored is not None and went_on is not None
    # The digests stood for the event ids in the schema 2 document: digested again.
    events = {event_digest(digest): 1 for digest in document.events}
    assert set(restored.events) == set(went_on.events) - set(document.events) | set(events)
    assert msgspec.structs.replace(restored, events={}) == msgspec.structs.replace(
        went_on, events={}
    )


def test_a_newer_schema_goes_to_the_dlq_and_the_stored_state_is_untouched() -> None:
    future = {**PRE_ISSUE_12_IMAGE, SCHEMA_FIELD: STATE_SCHEMA + 1, "future": [1]}
    newer = storing([], msgspec.msgpack.encode(future))
    outputs, stored_value = gate_failed(newer)
    assert stored_value == newer  # not read, not rewritten
    assert [(topic, key) for topic, key, _ in outputs] == [("moderation.dlq", "c-1")]
    letter = outputs[0][2]
    assert (letter["error_class"], letter["source_topic"]) == ("permanent", "detector.results")
    assert f"schema {STATE_SCHEMA + 1}" in letter["message"]
    assert f"schema {STATE_SCHEMA} " in letter["message"]
    assert "restore with the code that wrote it" in letter["message"]
    # The job goes on: the next key's input decides as usual on the same operator.
    fresh, _ = gate_failed(None)
    assert any(topic == "moderation.decisions" for topic, _, _ in fresh)


def test_a_reporter_state_of_a_newer_schema_refuses_the_report_and_stays() -> None:
    adapter = ReportGate(config())
    runtime_context = FakeRuntimeContext()
    adapter.open(runtime_context)  # type: ignore[arg-type]
    ctx = FakeContext(FakeMapState(), FakeTimers(), key="u-1")
    newer = json.dumps({"first": T0, "recent": [], "last": T0, SCHEMA_FIELD: STATE_SCHEMA + 1})
    runtime_context.version.current = newer
    adapter.process_element(decoded("moderation.reports", report_record(at=T0 + 5)), ctx)
    outputs = list(adapter.on_timer(T0 + 5, ctx))
    assert [(o[0], o[1]) for o in outputs] == [("moderation.dlq", "c-1")]
    assert json.loads(outputs[0][2])["error_class"] == "permanent"
    assert runtime_context.version.value() == newer and runtime_context.buffer == {}


def test_an_account_state_of_a_newer_schema_refuses_the_decision_and_stays() -> None:
    adapter = Sanctions(ModerationConfig())
    runtime_context = FakeRuntimeContext()
    adapter.open(runtime_context)  # type: ignore[arg-type]
    ctx = FakeContext(FakeMapState(), FakeTimers(), key="author-1")
    newer = json.dumps({"strikes": [], SCHEMA_FIELD: STATE_SCHEMA + 1})
    runtime_context.version.current = newer
    adapter.process_element(Row("_sanctions", "author-1", sanction_entry("c-7", T0, T0 + 5)), ctx)
    outputs = list(adapter.on_timer(T0 + 5, ctx))
    assert [(o[0], o[1]) for o in outputs] == [("moderation.dlq", "c-7")]
    assert runtime_context.version.value() == newer and runtime_context.buffer == {}


def test_the_account_and_reporter_states_are_stored_with_the_schema() -> None:
    adapter = Sanctions(ModerationConfig())
    runtime_context = FakeRuntimeContext()
    adapter.open(runtime_context)  # type: ignore[arg-type]
    ctx = FakeContext(FakeMapState(), FakeTimers(), key="author-1")
    adapter.process_element(Row("_sanctions", "author-1", sanction_entry("c-7", T0, T0 + 5)), ctx)
    list(adapter.on_timer(T0 + 5, ctx))
    stored = runtime_context.version.value()
    assert stored is not None and json.loads(stored)[SCHEMA_FIELD] == STATE_SCHEMA
    gate = ReportGate(config())
    reporter_context = FakeRuntimeContext()
    gate.open(reporter_context)  # type: ignore[arg-type]
    reporter_ctx = FakeContext(FakeMapState(), FakeTimers(), key="u-1")
    gate.process_element(decoded("moderation.reports", report_record(at=T0 + 5)), reporter_ctx)
    assert [o[0] for o in gate.on_timer(T0 + 5, reporter_ctx)] == ["keyed"]
    stored = reporter_context.version.value()
    assert stored is not None and json.loads(stored)[SCHEMA_FIELD] == STATE_SCHEMA


def test_a_retro_join_state_is_stored_with_the_schema_and_a_newer_one_is_left_alone() -> None:
    join, runtime_context = RetroJoin(), FakeRuntimeContext()
    join.open(runtime_context)  # type: ignore[arg-type]
    ctx = FakeContext(FakeMapState(), FakeTimers())
    registration = next(fan_out(decoded("content.versions", upload(surface="comment"))))
    assert list(join.process_element(registration, ctx)) == []
    stored = runtime_context.version.value()
    assert stored is not None and json.loads(stored)[SCHEMA_FIELD] == STATE_SCHEMA
    newer = json.dumps({**json.loads(stored), SCHEMA_FIELD: STATE_SCHEMA + 1})
    runtime_context.version.current = newer
    record = bank_entry(hash="ab" * 32, ts=T0 + 60_000)
    bank = Row("broadcast", "hash.bank", "hash.bank", json.dumps(record), record["ts"], 0, "")
    assert list(join.process_element(next(fan_out(bank)), ctx)) == []
    assert runtime_context.version.value() == newer
