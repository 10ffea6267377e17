"""The moderation job's adapters with small fakes of state and context: no JVM."""

from __future__ import annotations

import json
from typing import Any

import yaml
from pyflink.common import Row

from jobs.moderation import BROADCAST_TAG, DLQ_TAG, Decode, Moderate, ModerationConfig
from operators.policy_store import sign
from tests.conftest import T0, evidence, upload
from tests.operators.policy_builders import GLOBAL_YAML, global_document


class FakeValueState:
    def __init__(self) -> None:
        self.current: str | None = None

    def value(self) -> str | None:
        return self.current

    def update(self, value: str) -> None:
        self.current = value

    def clear(self) -> None:
        self.current = None


class FakeMapState(dict):  # type: ignore[type-arg]
    def put(self, key: Any, value: Any) -> None:
        self[key] = value

    def remove(self, key: Any) -> None:
        del self[key]


class FakeRuntimeContext:
    """Per-key state for one key, as Flink gives the adapter."""

    def __init__(self) -> None:
        self.version = FakeValueState()
        self.buffer = FakeMapState()

    def get_state(self, descriptor: Any) -> FakeValueState:
        return self.version

    def get_map_state(self, descriptor: Any) -> FakeMapState:
        return self.buffer

    def get_index_of_this_subtask(self) -> int:
        return 0


class FakeTimers:
    def __init__(self) -> None:
        self.registered: set[int] = set()

    def register_event_time_timer(self, ts: int) -> None:
        self.registered.add(ts)


class FakeContext:
    def __init__(self, broadcast: FakeMapState, timers: FakeTimers) -> None:
        self.broadcast = broadcast
        self.timers = timers

    def get_broadcast_state(self, descriptor: Any) -> FakeMapState:
        return self.broadcast

    def timer_service(self) -> FakeTimers:
        return self.timers


def moderate(config: ModerationConfig) -> tuple[Moderate, FakeRuntimeContext, FakeContext]:
    adapter = Moderate(config)
    runtime_context = FakeRuntimeContext()
    adapter.open(runtime_context)  # type: ignore[arg-type]
    return adapter, runtime_context, FakeContext(FakeMapState(), FakeTimers())


def decoded(topic: str, record: dict[str, Any]) -> Row:
    rows = list(
        Decode(ModerationConfig()).process_element(
            Row(topic, record.get("content_id"), json.dumps(record), record["ts"]), None
        )
    )
    assert len(rows) == 1 and isinstance(rows[0], Row)
    return rows[0]


def test_decode_routes_keyed_broadcast_and_invalid_records() -> None:
    decode = Decode(ModerationConfig())
    keyed = list(
        decode.process_element(Row("content.versions", "c-1", json.dumps(upload()), T0), None)
    )
    assert keyed[0][1] == "c-1\x1f1" and keyed[0][4] == T0
    broadcast = list(decode.process_element(Row("hash.bank", "h", "{}", T0), None))
    assert broadcast[0][0] is BROADCAST_TAG
    invalid = list(decode.process_element(Row("content.versions", "k", "{nope", 7), None))
    assert invalid[0][0] is DLQ_TAG
    assert json.loads(invalid[0][1][2])["error_class"] == "schema"
    other = list(decode.process_element(Row("moderation.decisions", "k", "{}", 7), None))
    assert other[0][0] is DLQ_TAG  # not an input of this job


def test_input_waits_for_its_timer_then_decides_and_state_is_stored() -> None:
    policy = yaml.safe_load(GLOBAL_YAML.read_text())
    adapter, runtime_context, ctx = moderate(ModerationConfig(trusted_policy=policy))
    row = decoded(
        "content.versions", upload(surface="comment", modality="text", mime_type="text/plain")
    )
    assert list(adapter.process_element(row, ctx)) == []  # buffered until the watermark
    assert T0 in ctx.timers.registered and T0 in runtime_context.buffer
    outputs = list(adapter.on_timer(T0, ctx))
    topics = [out[0] for out in outputs]
    assert topics == ["moderation.decisions", "moderation.actions"]
    assert runtime_context.buffer == {}
    state = json.loads(runtime_context.version.value() or "{}")
    assert state["rev"] == 1 and state["deadline"] == T0 + 5000
    assert {T0 + 5000} <= ctx.timers.registered
    adapter.process_element(decoded("detector.results", evidence(at=T0 + 10)), ctx)
    decided = [json.loads(o[2]) for o in adapter.on_timer(T0 + 10, ctx)]
    assert decided[0]["trigger"] == "evidence" and decided[0]["outcome"] == "ALLOW"


def test_broadcast_records_change_the_policy_from_their_ts_and_rejections_go_to_the_dlq() -> None:
    policy = yaml.safe_load(GLOBAL_YAML.read_text())
    adapter, _, ctx = moderate(ModerationConfig(trusted_policy=policy, policy_key="k"))
    strict = {
        "event_id": "p2",
        "policy_id": "global",
        "version": 2,
        "parent_version": 1,
        "mode": "active",
        "author": "a",
        "ts": T0 + 100,
        "document": global_document(2, default="PENDING"),
    }
    strict["signature"] = sign(strict, b"k")
    forged = dict(strict, event_id="p3", version=3, document=global_document(3, default="ALLOW"))
    assert (
        list(
            adapter.process_broadcast_element(
                Row("broadcast", "policy.rules", "policy.rules", json.dumps(strict), T0 + 100), ctx
            )
        )
        == []
    )
    letters = list(
        adapter.process_broadcast_element(
            Row("broadcast", "policy.rules", "policy.rules", json.dumps(forged), T0 + 200), ctx
        )
    )
    assert json.loads(letters[0][2])["error_class"] == "signature"
    assert ctx.broadcast["revision"] == "1"  # state written for checkpoints and other tasks
    # A fresh adapter instance (another subtask, or after restore) rebuilds the same store.
    other, _, _ = moderate(ModerationConfig(trusted_policy=policy, policy_key="k"))
    store, _ = other._load(ctx.broadcast)
    assert store.resolve("global", T0 + 99, "c").decide.version == 1  # type: ignore[union-attr]
    assert store.resolve("global", T0 + 100, "c").decide.version == 2  # type: ignore[union-attr]
