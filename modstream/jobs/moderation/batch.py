"""moderation: the Python side of BatchedVersions.java (issue 26, point 2), the job's keyed
operator with order, state, timers and metrics in Java (`--engine batched`).

Java calls `BatchedModerate.fire` once per watermark with every version that became ready
(one MessagePack payload: their stored values, then in Flink's order their input batches and
their fired timers) and `broadcast` once per policy or hash-bank record. Each version runs
through the same adapter code as the PyFlink operator (`Moderate`,
modstream/jobs/moderation/moderate.py) over in-memory stand-ins for Flink's state, timer service and
metrics, so the decisions and the stored bytes are the same; what Flink would have been asked one
call at a time comes back in one answer: the versions' new stored values, their timers to set or
delete, the output rows, the metric updates and what broadcast state keeps.

A timer set at or before the watermark fires in the same call, in timestamp order with the
fired ones, as Flink's timer service fires it within the same watermark.
"""

from __future__ import annotations

import contextlib
import heapq
import pickle
from collections.abc import Iterable, Iterator
from typing import Any

import cloudpickle
import msgspec

from modstream.core import redaction
from modstream.jobs.metrics import METRICS, OperatorMetrics
from modstream.jobs.moderation.config import ModerationConfig
from modstream.jobs.moderation.metrics import ModerationMetrics
from modstream.jobs.moderation.moderate import Moderate

_PACK = msgspec.msgpack.Encoder().encode
_UNPACK = msgspec.msgpack.Decoder().decode
BATCH, TIMER = 0, 1  # a task's kind in `fire`'s payload


class RecordedMetrics(OperatorMetrics):
    """OperatorMetrics whose updates are kept as `[kind, name, [label, value, ...], amount]`
    for Java to apply (BatchedVersions.metric): counters summed per call, gauges last value."""

    def __init__(self, operator: str) -> None:
        super().__init__(None, operator)
        # (name, label values in the metric's order) -> the call's sum, or the last value.
        self.counts: dict[tuple[str, tuple[str, ...]], int] = {}
        self.values: dict[tuple[str, tuple[str, ...]], int] = {}
        self.samples: list[list[Any]] = []
        self.shown: dict[tuple[str, tuple[str, ...]], list[str]] = {}
        # (name, *labels.items()) as a keyword call passed them -> (name, label values): a
        # metric's labels are looked up and stringified once, not at each update (docs/
        # BENCHMARKS.md, "the step as the job runs it").
        self.keys: dict[tuple[Any, ...], tuple[str, tuple[str, ...]]] = {}

    def add(self, name: str, values: tuple[str, ...], count: int = 1) -> None:
        """Summed by (name, values) as given: named and redacted once per series, at `drain`."""
        key = (name, values)
        self.counts[key] = self.counts.get(key, 0) + count

    def inc(self, name: str, count: int = 1, **labels: str) -> None:
        key = self._key(name, labels)
        self.counts[key] = self.counts.get(key, 0) + count

    @contextlib.contextmanager
    def deferred(self) -> Iterator[None]:
        """Nothing to defer: every update is already summed per call and reaches Java once,
        with the call's answer (`OperatorMetrics.deferred` saves Java calls per update)."""
        yield

    def set(self, name: str, value: float, **labels: str) -> None:
        self.values[self._key(name, labels)] = int(value)

    def observe(self, name: str, value: float, **labels: str) -> None:
        self.samples.append(["histogram", name, self._shown(self._key(name, labels)), int(value)])

    def _key(self, name: str, labels: dict[str, str]) -> tuple[str, tuple[str, ...]]:
        called = (name, *labels.items())
        key = self.keys.get(called)
        if key is None:
            spec = METRICS[name]
            key = self.keys[called] = (name, tuple(str(labels[label]) for label in spec.labels))
        return key

    def _shown(self, key: tuple[str, tuple[str, ...]]) -> list[str]:
        """[label, value, ...] as Flink's groups name them, each value redacted once (as
        OperatorMetrics registers each metric once)."""
        known = self.shown.get(key)
        if known is None:
            name, values = key
            labels = METRICS[name].labels
            shown = redaction.current().value(values)
            known = [item for pair in zip(labels, shown, strict=True) for item in pair]
            self.shown[key] = known
        return known

    def drain(self) -> list[list[Any]]:
        updates = [["counter", key[0], self._shown(key), n] for key, n in self.counts.items()]
        updates += [["gauge", key[0], self._shown(key), v] for key, v in self.values.items()]
        updates += self.samples
        self.counts, self.values, self.samples = {}, {}, []
        return updates


class _Versions:
    """The versions' stored values during one call, Flink's ValueState for `Moderate` (text:
    a value restored from before state schema 3, `restored`)."""

    def __init__(self) -> None:
        self.values: dict[str, str | bytes | None] = {}
        self.key = ""

    def value(self) -> str | bytes | None:
        return self.values.get(self.key)

    def update(self, value: bytes) -> None:
        self.values[self.key] = value

    def clear(self) -> None:
        self.values[self.key] = None


class _Nothing:
    """A state that holds nothing: the JSON value and input buffer of versions stored before
    state schema 3 and issue 14, which this operator's state never has."""

    def value(self) -> None:
        return None

    def get(self, _key: Any) -> None:
        return None

    def clear(self) -> None:
        return None


class _Broadcast(dict[str, str]):
    """Broadcast state for `PolicyAware`: a dict whose writes are also kept for Java."""

    def __init__(self) -> None:
        super().__init__()
        self.puts: list[list[str]] = []

    def put(self, key: str, value: str) -> None:
        self[key] = value
        self.puts.append([key, value])

    def contains(self, key: str) -> bool:
        return key in self


class _Context:
    """The keyed context `Moderate` reads: current key, timer service, broadcast state."""

    def __init__(self, owner: BatchedModerate) -> None:
        self.owner = owner

    def get_current_key(self) -> str:
        return self.owner.versions.key

    def timer_service(self) -> _Context:
        return self

    def register_event_time_timer(self, timestamp: int) -> None:
        self.owner.timer_set(int(timestamp), True)

    def delete_event_time_timer(self, timestamp: int) -> None:
        self.owner.timer_set(int(timestamp), False)

    def get_broadcast_state(self, _descriptor: Any) -> _Broadcast:
        return self.owner.broadcast_state


class BatchedModerate:
    """One BatchedVersions subtask's Python side: a `Moderate` over in-memory state."""

    def __init__(self, pickled_config: bytes, subtask: int) -> None:
        config: ModerationConfig = cloudpickle.loads(pickled_config)
        self.moderate = Moderate(config)
        self.versions = _Versions()
        self.broadcast_state = _Broadcast()
        self.metrics = RecordedMetrics("moderate")
        self.ctx = _Context(self)
        moderate = self.moderate
        moderate.buffer = _Nothing()
        moderate.subtask = subtask
        moderate.key = config.policy_key.encode("utf-8") if config.policy_key else None
        moderate.store = None
        moderate.banks = None
        moderate.loaded_revision = -1
        moderate.packed = self.versions
        moderate.version = _Nothing()
        moderate._legacy = False
        moderate.metrics = self.metrics
        moderate.reported = ModerationMetrics(self.metrics, config.clock)
        self.watermark = 0
        self.timer_changes: dict[tuple[str, int], bool] = {}
        self.due_now: list[tuple[int, int, str]] = []  # (ts, order, key) to fire in this call
        self.order = 0

    def restore(self, payload: bytes) -> bytes:
        """Broadcast state as Java kept it, after a start or restore."""
        for key, value in _UNPACK(payload):
            self.broadcast_state[key] = value
        return b""

    def broadcast(self, payload: bytes) -> bytes:
        """One policy.rules or hash.bank record [topic, value, ts]."""
        topic, raw, ts = _UNPACK(payload)
        rows = list(self.moderate.process_broadcast_element((None, None, topic, raw, ts), self.ctx))
        return self._answer(list(_unbatched(rows)))

    def fire(self, payload: bytes) -> bytes:
        """[watermark, [[key, stored], ...], tasks]: a task is [BATCH, key, [[topic, value,
        ts, seq], ...]] or [TIMER, key, ts], in the order Flink made them ready."""
        watermark, stored, tasks = _UNPACK(payload)
        self.watermark = watermark
        self.moderate.watermark = watermark
        self.versions.values = {key: restored(value) for key, value in stored}
        self.timer_changes = {}
        self.due_now = []
        rows: list[Any] = []
        for kind, key, task in tasks:
            if kind == BATCH:
                self.versions.key = key
                batch = (
                    [entry[0] for entry in task],
                    [entry[1] for entry in task],
                    [entry[2] for entry in task],
                    [entry[3] for entry in task],
                )
                rows += self.moderate.element_rows(batch, self.ctx)
            else:
                self._due(int(task), key)
        while self.due_now:
            timestamp, _, key = heapq.heappop(self.due_now)
            self.versions.key = key
            rows += self.moderate.timer_rows(timestamp, self.ctx)
        hits, misses = self.moderate.decoded.counted()
        if hits:
            self.metrics.add("state_cache_reads", ("hit",), hits)
        if misses:
            self.metrics.add("state_cache_reads", ("miss",), misses)
        return self._answer(rows)

    def timer_set(self, timestamp: int, register: bool) -> None:
        """A timer set at or before the watermark fires in this call (as Flink would, within
        this watermark); others are Java's to set or delete."""
        key = self.versions.key
        if register and timestamp <= self.watermark:
            self._due(timestamp, key)
            self.timer_changes.pop((key, timestamp), None)
            return
        self.timer_changes[(key, timestamp)] = register

    def _due(self, timestamp: int, key: str) -> None:
        self.order += 1
        heapq.heappush(self.due_now, (timestamp, self.order, key))

    def _answer(self, rows: list[Any]) -> bytes:
        """[states, timers, rows, metric updates, broadcast puts]: a row is a (topic, key,
        value) tuple, which MessagePack writes as the array Java reads."""
        states = [[key, _as_bytes(value)] for key, value in self.versions.values.items()]
        timers = [[key, ts, register] for (key, ts), register in self.timer_changes.items()]
        puts, self.broadcast_state.puts = self.broadcast_state.puts, []
        self.versions.values = {}
        self.timer_changes = {}
        return _PACK([states, timers, rows, self.metrics.drain(), puts])


def restored(value: bytes | None) -> str | bytes | None:
    """A version's stored value as `Moderate` reads it (`stored`). This operator's own value is
    the MessagePack array `[due timers, state document]` (fixarray, 0x92). Java hands on a
    value restored from the PyFlink engine's savepoint as that engine stored it: since state
    schema 3 `Types.PICKLED_BYTE_ARRAY`, the pickle of those bytes (opcode PROTO, 0x80,
    first), unpickled here as PyFlink unpickles its own state; before, JSON text (`{` or `[`),
    read as text."""
    if value is None or value[:1] == b"\x92":
        return value
    if value[:1] == b"\x80":
        unpickled: bytes = pickle.loads(value)
        return unpickled
    return value.decode("utf-8")


def _as_bytes(value: str | bytes | None) -> bytes | None:
    """A stored value for Java: restored JSON text not rewritten in this call as its bytes
    (read as text again next time, `restored`)."""
    return value.encode("utf-8") if isinstance(value, str) else value


def _unbatched(batches: Iterable[Any]) -> Iterator[tuple[str, str | None, str]]:
    """Moderate's output rows Row(topics, keys, values) as (topic, key, value) each; its
    broadcast rejections come as one such batch too."""
    for batch in batches:
        yield from zip(batch[0], batch[1], batch[2], strict=True)
