"""The Python side of BatchedVersions.java (modstream/jobs/moderation/batch.py) against the PyFlink
adapter it reuses: the same rows and stored state for the same input, one call per watermark.
No JVM: `JavaKeyed` (modstream/testing/flink.py) keeps what the Java operator keeps."""

from __future__ import annotations

import dataclasses
import json
import pickle
from typing import Any

import cloudpickle
import msgspec
import yaml
from pyflink.common import Row

from modstream.jobs.moderation.batch import BatchedModerate, restored
from modstream.jobs.moderation.config import ModerationConfig
from modstream.testing.flink import JavaKeyed, decoded, moderate
from modstream.testing.flink import decisions_in as _decisions
from modstream.testing.policies import GLOBAL_YAML
from modstream.testing.records import NOTHING_REQUIRED, T0, bank_entry, evidence, upload

Row3 = tuple[str, Any, str]


def java_side(config: ModerationConfig) -> JavaKeyed:
    """What the Java operator keeps (held input, stored values, timers, broadcast state)."""
    return JavaKeyed(BatchedModerate, config, broadcasts=True)


def _policy() -> ModerationConfig:
    # A fixed processing clock: the stored bytes hold times derived from it.
    return ModerationConfig(trusted_policy=yaml.safe_load(GLOBAL_YAML.read_text()), now_ms=T0)


def _text_upload() -> dict[str, Any]:
    return upload(surface="comment", modality="text", mime_type="text/plain")


def test_one_call_per_watermark_gives_what_the_pyflink_adapter_gives() -> None:
    """Upload, its deadline (T0 + 5 s) passing with no evidence, late evidence: the same rows
    in the same order, the same stored bytes, and one Python call per watermark."""
    stepwise, runtime_context, ctx = moderate(_policy())
    stepwise.process_element(decoded("content.versions", _text_upload()), ctx)
    expected = list(stepwise.on_timer(T0, ctx)) + list(stepwise.on_timer(T0 + 5000, ctx))
    stepwise.process_element(decoded("detector.results", evidence(at=T0 + 6000)), ctx)
    expected += stepwise.on_timer(T0 + 6000, ctx)

    java = java_side(_policy())
    java.element(decoded("content.versions", _text_upload()))
    got = java.watermark(T0)
    assert T0 + 5000 in {ts for _, ts in java.timers}  # the deadline is Java's to fire
    got += java.watermark(T0 + 5000)
    java.element(decoded("detector.results", evidence(at=T0 + 6000)))
    got += java.watermark(T0 + 6000)

    assert [tuple(row) for row in expected] == got
    assert [trigger for trigger, _, _ in _decisions(got)][:2] == ["fast_gate", "deadline"]
    assert java.calls == 3
    [value] = java.values.values()
    assert value == runtime_context.packed.value()


def test_a_timer_due_within_the_watermark_fires_in_the_same_call() -> None:
    """A watermark far past the deadline: the deadline set by the upload fires in the call
    that applied the upload, before the evidence stamped after it, as Flink fires a timer
    set below the watermark within that watermark."""
    stepwise, _, ctx = moderate(_policy())
    stepwise.process_element(decoded("content.versions", _text_upload()), ctx)
    stepwise.process_element(decoded("detector.results", evidence(at=T0 + 6000)), ctx)
    expected = list(stepwise.on_timer(T0 + 6000, ctx))

    java = java_side(_policy())
    java.element(decoded("content.versions", _text_upload()))
    java.element(decoded("detector.results", evidence(at=T0 + 6000)))
    got = java.watermark(T0 + 6000)
    assert got == [tuple(row) for row in expected]
    assert [trigger for trigger, _, _ in _decisions(got)][:2] == ["fast_gate", "deadline"]
    assert java.calls == 1
    assert all(ts > T0 + 6000 for _, ts in java.timers)


def test_many_versions_are_decided_in_one_call_and_metrics_come_back_as_updates() -> None:
    java = java_side(_policy())
    for number in range(20):
        java.element(decoded("content.versions", {**_text_upload(), "content_id": f"c-{number}"}))
    rows = java.watermark(T0)
    decided = [json.loads(row[2]) for row in rows if row[0] == "moderation.decisions"]
    assert len(decided) == 20 and java.calls == 1 and len(java.values) == 20
    counted = sum(m[3] for m in java.metrics if m[0] == "counter" and m[1] == "decisions")
    assert counted == 20


def test_broadcast_state_kept_by_java_restores_the_banks_in_a_new_python_side() -> None:
    """A hash-bank entry reaches Python when it arrives; what Python keeps of it comes back to
    Java (broadcast state), and a new Python side given that state after a restore decides an
    upload matching the bank as the first does (and unlike a side without the bank)."""
    sha = "ab" * 32
    entry = bank_entry(hash=sha, ts=T0 - 10)
    row = ("broadcast", "hash.bank", "hash.bank", json.dumps(entry), T0 - 10, 0, "")
    config = dataclasses.replace(_policy(), keyring=NOTHING_REQUIRED)
    java, restored, without = java_side(config), java_side(config), java_side(config)
    assert java.broadcast(row) == [] and java.broadcast_state
    restored.python.restore(msgspec.msgpack.encode(list(java.broadcast_state.items())))
    item = decoded("content.versions", {**_text_upload(), "sha256": sha})
    for side in (java, restored, without):
        side.element(item)
    first, second, third = (side.watermark(T0) for side in (java, restored, without))
    assert first == second
    assert _decisions(first) != _decisions(third)


def test_a_retired_version_leaves_no_stored_value() -> None:
    """Its TTL fires in Java and the answer clears the version's value: nothing is left."""
    config = _policy()
    java = java_side(config)
    java.element(decoded("content.versions", {**_text_upload(), "type": "upsert"}))
    java.watermark(T0)
    java.element(decoded("content.versions", {**_text_upload(), "type": "delete", "event_id": "d"}))
    java.watermark(T0 + 10)
    java.watermark(T0 + 10 * config.state_ttl_ms + config.review_retention_ms * 2)
    assert java.values == {} and java.timers == set()


def test_a_value_restored_from_the_pyflink_engine_decides_as_that_engine_would() -> None:
    """A savepoint of the PyFlink engine (issue 26) taken after an upload's fast gate: Java
    hands on `Moderate`'s stored value as PyFlink wrote it (`Types.PICKLED_BYTE_ARRAY`, the
    pickle of the bytes) and fires its restored timers as the version's own; the deadline and
    late evidence then give the PyFlink engine's rows, and the value is stored back as bytes
    equal to that engine's."""
    stepwise, runtime_context, ctx = moderate(_policy())
    stepwise.process_element(decoded("content.versions", _text_upload()), ctx)
    list(stepwise.on_timer(T0, ctx))
    saved = runtime_context.packed.value()
    restored_timers = msgspec.msgpack.decode(saved)[0]
    expected = list(stepwise.on_timer(T0 + 5000, ctx))
    stepwise.process_element(decoded("detector.results", evidence(at=T0 + 6000)), ctx)
    expected += stepwise.on_timer(T0 + 6000, ctx)

    java = java_side(_policy())
    key = decoded("content.versions", _text_upload())[1]
    java.values[key] = pickle.dumps(saved)
    for ts in restored_timers:  # the restored `user-timers` timers
        java.timer(key, ts)
    got = java.watermark(T0 + 5000)
    java.element(decoded("detector.results", evidence(at=T0 + 6000)))
    got += java.watermark(T0 + 6000)
    assert got == [tuple(row) for row in expected]
    assert "deadline" in [trigger for trigger, _, _ in _decisions(got)]
    assert java.values[key] == runtime_context.packed.value()
    assert restored(saved) == saved  # this engine's own value is read as it is
    assert restored(b"[1]\n{}") == "[1]\n{}"  # JSON text, from before state schema 3


def test_versions_split_over_several_calls_decide_as_in_one() -> None:
    """A watermark that readies more versions than one call takes (BatchedVersions.java splits
    them, MAX_VERSIONS_PER_CALL): the same rows, stored values and timers as one call."""
    sides = [
        JavaKeyed(BatchedModerate, _policy(), broadcasts=True, max_versions=n) for n in (3, 256)
    ]
    for side in sides:
        for number in range(20):
            content_id = f"c-{number}"
            side.element(decoded("content.versions", {**_text_upload(), "content_id": content_id}))
            side.element(
                decoded("detector.results", evidence(content_id=content_id, at=T0 + 6000 + number))
            )
    split, whole = ([*side.watermark(T0 + 3000), *side.watermark(T0 + 9000)] for side in sides)
    assert sorted(split) == sorted(whole) and len(_decisions(whole)) >= 40
    assert sides[0].values == sides[1].values and sides[0].timers == sides[1].timers
    assert sides[0].calls > sides[1].calls == 2


def test_a_failed_input_goes_to_the_dlq_and_is_counted_as_the_pyflink_adapter_does_it() -> None:
    """An admitted record whose step fails (a detector result that is not JSON: only a bug
    upstream could send one) comes back as the same `permanent` DLQ row the PyFlink adapter
    writes, counted under `dlq`, and the version's other input is applied."""
    broken = list(decoded("detector.results", evidence(at=T0 + 1)))
    broken[3] = "{not json"
    stepwise, _, ctx = moderate(_policy())
    ctx.key = broken[1]  # the version's key, as Flink's context gives it
    stepwise.process_element(decoded("content.versions", _text_upload()), ctx)
    stepwise.process_element(Row(*broken), ctx)
    expected = [tuple(row) for row in stepwise.on_timer(T0 + 1, ctx)]

    java = java_side(_policy())
    java.element(decoded("content.versions", _text_upload()))
    java.element(Row(*broken))
    got = java.watermark(T0 + 1)
    assert got == expected
    [letter] = [json.loads(value) for topic, _, value in got if topic == "moderation.dlq"]
    assert letter["error_class"] == "permanent" and letter["source_topic"] == "detector.results"
    assert [trigger for trigger, _, _ in _decisions(got)] == ["fast_gate"]
    counted = [m for m in java.metrics if m[0] == "counter" and m[1] == "dlq"]
    assert counted == [["counter", "dlq", ["error_class", "permanent"], 1]]


def test_a_version_read_again_is_counted_a_state_cache_hit_and_after_a_restore_a_miss() -> None:
    """`state_cache_reads`: the state stored by the first call is kept decoded for the second
    (hit); a new Python side (a restore) decodes the stored bytes (miss) and decides the same."""
    sides = [java_side(_policy()) for _ in range(2)]
    for side in sides:
        side.element(decoded("content.versions", _text_upload()))
        side.watermark(T0)
    restored_side = sides[1]
    restored_side.python = BatchedModerate(cloudpickle.dumps(_policy()), 0)
    restored_side.python.restore(
        msgspec.msgpack.encode(list(restored_side.broadcast_state.items()))
    )
    rows = []
    for side in sides:
        side.element(decoded("detector.results", evidence(at=T0 + 1000)))
        rows.append(side.watermark(T0 + 1000))
    assert rows[0] == rows[1] and len(_decisions(rows[0])) == 1
    assert sides[0].values == sides[1].values

    def reads(side: JavaKeyed) -> dict[str, int]:
        counted: dict[str, int] = {}
        for kind, name, labels, count in side.metrics:
            if kind == "counter" and name == "state_cache_reads":
                counted[labels[1]] = counted.get(labels[1], 0) + count
        return counted

    assert reads(sides[0]) == {"hit": 1}
    assert reads(sides[1]) == {"miss": 1}
