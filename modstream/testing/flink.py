"""Fakes of what Flink hands a PyFlink adapter (keyed value and map state, the runtime context,
event-time timers, the process context, metric groups), and drivers that run the moderation
job's adapters with them: no JVM, no MiniCluster.

The pure step is tested with `modstream.testing.versions`; this module is for the thin job
adapters around it (style: "adapters: call process_element / on_timer with small fakes"):

    from modstream.jobs.moderation.config import ModerationConfig
    from modstream.testing.flink import decisions_in, decoded, moderate
    from modstream.testing.records import T0, upload

    adapter, runtime_context, ctx = moderate(ModerationConfig(trusted_policy=policy))
    adapter.process_element(decoded("content.versions", upload()), ctx)
    rows = list(adapter.on_timer(T0, ctx))  # the watermark reaching T0
    assert decisions_in(rows) == [("fast_gate", "PROVISIONAL_ALLOW", 1)]

`JavaKeyed` and `FlinkKeyed` run one keyed handler the two ways the job can (the batched Java
operator's bookkeeping, and PyFlink's per-key adapter), so a test can compare them.
"""

from __future__ import annotations

import heapq
import json
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import cloudpickle
import msgspec
import yaml
from pyflink.common import Row

from modstream.jobs.moderation.batch import BATCH, TIMER
from modstream.jobs.moderation.config import ModerationConfig
from modstream.jobs.moderation.decode import Decode
from modstream.jobs.moderation.moderate import VERSION_STATE, Moderate, stored
from modstream.moderation import state_schema
from modstream.moderation.state import VersionState
from modstream.testing.policies import GLOBAL_YAML
from modstream.testing.records import NOTHING_REQUIRED

_PACK = msgspec.msgpack.Encoder().encode
# BatchedVersions.MAX_VERSIONS_PER_CALL: more versions readied at once go in several calls.
MAX_VERSIONS_PER_CALL = 256
_UNPACK = msgspec.msgpack.Decoder().decode


class FakeValueState:
    """Flink's ValueState of one key: value, update, clear."""

    def __init__(self) -> None:
        self.current: str | None = None

    def value(self) -> str | None:
        return self.current

    def update(self, value: str) -> None:
        self.current = value

    def clear(self) -> None:
        self.current = None


class FakeMapState(dict[Any, Any]):
    """Flink's MapState (and broadcast state) of one key, a dict with Flink's method names."""

    def put(self, key: Any, value: Any) -> None:
        self[key] = value

    def remove(self, key: Any) -> None:
        del self[key]

    def contains(self, key: Any) -> bool:
        return key in self

    def is_empty(self) -> bool:
        return not self


class FakeRuntimeContext:
    """Per-key state for one key, as Flink gives the adapter."""

    def __init__(self) -> None:
        self.version = FakeValueState()  # every adapter's one value (Moderate's before schema 3)
        self.packed = FakeValueState()  # Moderate's value since state schema 3
        self.buffer = FakeMapState()

    def get_state(self, descriptor: Any) -> FakeValueState:
        return self.packed if descriptor.get_name() == VERSION_STATE else self.version

    def get_map_state(self, descriptor: Any) -> FakeMapState:
        return self.buffer

    def get_index_of_this_subtask(self) -> int:
        return 0


def stored_state(runtime_context: FakeRuntimeContext) -> VersionState:
    """The version state `Moderate` stored."""
    state = state_schema.load_version(stored(runtime_context.packed.value())[1])
    assert state is not None
    return state


class FakeTimers:
    """A timer service on event time: the registered timers and the current watermark."""

    def __init__(self) -> None:
        self.registered: set[int] = set()
        self.watermark = -(2**63)

    def register_event_time_timer(self, ts: int) -> None:
        self.registered.add(ts)

    def delete_event_time_timer(self, ts: int) -> None:
        self.registered.discard(ts)

    def current_watermark(self) -> int:
        return self.watermark


class FakeContext:
    """The process context of a keyed broadcast function: broadcast state, timers, the key."""

    def __init__(self, broadcast: FakeMapState, timers: FakeTimers, key: str = "") -> None:
        self.broadcast = broadcast
        self.timers = timers
        self.key = key

    def get_current_key(self) -> str:
        return self.key

    def get_broadcast_state(self, descriptor: Any) -> FakeMapState:
        return self.broadcast

    def timer_service(self) -> FakeTimers:
        return self.timers


class ReconcilerRuntimeContext:
    """The reconciler's keyed state for one content item: its content and exposure values."""

    def __init__(self) -> None:
        self.content = FakeValueState()
        self.exposure = FakeValueState()

    def get_state(self, descriptor: Any) -> FakeValueState:
        return self.exposure if descriptor.name == "exposure" else self.content

    def get_metrics_group(self) -> Any:
        raise RuntimeError("no metrics without a JVM")


class ProcessingTimers:
    """A timer service that keeps the processing-time timers registered (enforce, reconciler)."""

    def __init__(self) -> None:
        self.processing: list[int] = []

    def register_processing_time_timer(self, ts: int) -> None:
        self.processing.append(ts)


class ProcessingContext:
    """The process context of a job on processing time: its timers and the current key."""

    def __init__(self, key: str = "c-1") -> None:
        self.timers = ProcessingTimers()
        self.key = key

    def timer_service(self) -> ProcessingTimers:
        return self.timers

    def get_current_key(self) -> str:
        return self.key


class Ordered:
    """Moderate as the job runs it, behind EventTimeOrder.java: decoded rows are held until
    `on_timer(T)` (the watermark reaching T, on both of the operator's inputs) hands those at or
    before T on as one batch, then the operator's own timer at T fires if it registered one."""

    def __init__(self, adapter: Moderate) -> None:
        self.adapter = adapter
        self.held: list[Row] = []

    def process_element(self, row: Row, ctx: FakeContext) -> Iterator[Any]:
        self.held.append(row)
        return iter(())

    def process_broadcast_element(self, row: Row, ctx: FakeContext) -> Iterator[Any]:
        return iter(unbatch(self.adapter.process_broadcast_element(row, ctx)))

    def __getattr__(self, name: str) -> Any:
        return getattr(self.adapter, name)  # broadcast input, policy store, banks

    def on_timer(self, timestamp: int, ctx: FakeContext) -> Iterator[Any]:
        due = sorted((r for r in self.held if r[4] <= timestamp), key=lambda r: (r[4], r[5] or 0))
        self.held = [row for row in self.held if row[4] > timestamp]
        outputs: list[Any] = []
        ctx.timers.watermark = max(ctx.timers.watermark, timestamp)
        if due:
            # Each column a tuple, as PyFlink's thread mode hands an array field over.
            columns = (tuple(r[field] for r in due) for field in (2, 3, 4, 5))
            outputs += unbatch(self.adapter.process_element(Row(*columns), ctx))
        if timestamp in ctx.timers.registered:
            ctx.timers.registered.discard(timestamp)
            outputs += unbatch(self.adapter.on_timer(timestamp, ctx))
        return iter(outputs)


def unbatch(batches: Iterator[Row]) -> list[Row]:
    """Moderate's Row(topics, keys, values) as the rows Unbatch.java makes of it; anything else
    is what the JVM would refuse to convert (the operator's output type is the batch)."""
    rows = []
    for batch in batches:
        assert len(batch) == 3 and all(isinstance(field, list) for field in batch), batch
        rows += [Row(*entry) for entry in zip(*batch, strict=True)]
    return rows


def moderate(config: ModerationConfig) -> tuple[Ordered, FakeRuntimeContext, FakeContext]:
    """`Moderate` opened on fake state as the job runs it (behind EventTimeOrder.java), its
    runtime context (the key's state) and a process context (broadcast state, timers)."""
    adapter = Moderate(config)
    runtime_context = FakeRuntimeContext()
    adapter.open(runtime_context)
    return Ordered(adapter), runtime_context, FakeContext(FakeMapState(), FakeTimers())


def decoded(topic: str, record: dict[str, Any]) -> Row:
    """`record` as `Decode` hands it on (signatures not required): the keyed operator's input."""
    rows = list(
        Decode(ModerationConfig(keyring=NOTHING_REQUIRED)).process_element(
            Row(topic, record.get("content_id"), json.dumps(record), record["ts"]), None
        )
    )
    assert len(rows) == 1 and isinstance(rows[0], Row)
    return rows[0]


def decisions_in(rows: list[Any]) -> list[tuple[str, str, int]]:
    """(trigger, outcome, decision_revision) of each moderation.decisions row among `rows`."""
    decided = [json.loads(row[2]) for row in rows if row[0] == "moderation.decisions"]
    return [(d["trigger"], d["outcome"], d["decision_revision"]) for d in decided]


def sanction_entry(content_id: str, at: int, emitted_at: int) -> str:
    """The Sanctions operator's input value (KeyedAt.java's): c-1's BLOCK for harassment at
    `at`, the shipped policy's strikes, emitted at `emitted_at`."""
    decision = {
        "content_id": content_id,
        "content_version": 1,
        "decision_revision": 2,
        "outcome": "BLOCK",
        "reasons": ["harassment"],
        "trigger": "evidence",
        "policy_id": "global",
        "policy_version": 1,
        "state": "blocked",
        "ts": at,
    }
    strikes = yaml.safe_load(GLOBAL_YAML.read_text())["strikes"]
    return json.dumps({"decision": decision, "strikes": strikes, "at": emitted_at})


class JavaKeyed:
    """BatchedVersions.java's bookkeeping around one KeyedBatch handler (the version, retro-join
    or sanctions operator's Python side), in plain Python: the input held per key until the
    watermark passes its `ts`, each key's stored value, the keys' timers and the broadcast
    state's puts. `watermark` makes a `fire` call for everything it readied, as Java does:
    inputs first (keys by their earliest ready `ts`, each key's rows by `ts`, then `seq`, then
    arrival), then the fired timers by `ts`, split into calls of at most `max_versions`
    versions with each version's tasks in one call; `broadcast` calls at once. Held input and timers
    are heaps, so a call touches only what is due (a benchmark's stand-in must not sweep every
    version between calls: modstream/bench/fire.py times the handler's calls alone, `cpu_s`).

    Checks what Java relies on: a handler without broadcast state puts nothing in it, and a
    timer a call leaves registered lies past that call's watermark (one at or below it fired in it).
    `keep_metrics=False` drops the metric updates instead of keeping them in `metrics`."""

    def __init__(
        self,
        handler: Callable[[bytes, int], Any],  # a KeyedBatch or BatchedModerate class
        config: ModerationConfig,
        *,
        broadcasts: bool = False,
        keep_metrics: bool = True,
        max_versions: int = MAX_VERSIONS_PER_CALL,
    ) -> None:
        self.python = handler(cloudpickle.dumps(config), 0)
        self.python.restore(_PACK([]))
        self.broadcasts = broadcasts
        self.keep_metrics = keep_metrics
        self.max_versions = max_versions
        self.held: dict[str, list[Any]] = {}
        self.values: dict[str, bytes] = {}
        self.timers: set[tuple[str, int]] = set()
        self.broadcast_state: dict[str, Any] = {}
        self.calls = 0
        self.cpu_s = 0.0  # CPU time in the handler's calls
        self.metrics: list[list[Any]] = []
        self._due: list[tuple[int, int, str]] = []  # (ts, arrival, key) of each held row
        self._arrivals = 0
        self._timer_heap: list[tuple[int, str]] = []  # may hold deleted timers: `timers` says

    def element(self, row: Any) -> None:
        """Row(route, key, topic, value, ts, seq, lane), held by its key."""
        self.held.setdefault(row[1], []).append(row)
        self._arrivals += 1
        heapq.heappush(self._due, (row[4], self._arrivals, row[1]))

    def timer(self, key: str, ts: int) -> None:
        """A timer of `key` at `ts` as a restore brings it back (the PyFlink engine's
        `user-timers`), or as a handler registers it."""
        if (key, ts) not in self.timers:
            self.timers.add((key, ts))
            heapq.heappush(self._timer_heap, (ts, key))

    def broadcast(self, row: Any) -> list[tuple[Any, ...]]:
        """A broadcast Row(route, key, topic, value, ts, ...), handed on at once."""
        return self._call("broadcast", [row[2], row[3], row[4]], None)

    def watermark(self, watermark: int) -> list[tuple[Any, ...]]:
        """The `fire` calls for the input and timers `watermark` readied (none: no call), at
        most `max_versions` versions each, a version's input and timers in one call."""
        ready: dict[str, None] = {}
        while self._due and self._due[0][0] <= watermark:
            ready[heapq.heappop(self._due)[2]] = None
        fired: list[tuple[str, int]] = []
        while self._timer_heap and self._timer_heap[0][0] <= watermark:
            ts, key = heapq.heappop(self._timer_heap)
            if (key, ts) in self.timers:
                self.timers.discard((key, ts))
                fired.append((key, ts))
        call_of: dict[str, int] = {}  # as BatchedVersions.flush splits them
        for key in [*ready, *(key for key, _ in fired)]:
            call_of.setdefault(key, len(call_of) // self.max_versions)
        calls: list[list[list[Any]]] = [[] for _ in range(-(-len(call_of) // self.max_versions))]
        for key in ready:
            rows = self.held.pop(key)
            due = sorted((r for r in rows if r[4] <= watermark), key=lambda r: (r[4], r[5] or 0))
            calls[call_of[key]].append([BATCH, key, [[r[2], r[3], r[4], r[5] or 0] for r in due]])
            if waiting := [r for r in rows if r[4] > watermark]:
                self.held[key] = waiting
        for key, ts in fired:
            calls[call_of[key]].append([TIMER, key, ts])
        answered: list[tuple[Any, ...]] = []
        for tasks in calls:
            keys = dict.fromkeys(task[1] for task in tasks)
            stored = [[key, self.values.get(key)] for key in keys]
            answered += self._call("fire", [watermark, stored, tasks], watermark)
        return answered

    def _call(self, method: str, payload: list[Any], watermark: int | None) -> list[Any]:
        packed = _PACK(payload)
        started = time.process_time()
        answer = getattr(self.python, method)(packed)
        self.cpu_s += time.process_time() - started
        self.calls += 1
        states, timers, rows, metrics, puts = _UNPACK(answer)
        assert self.broadcasts or not puts, puts
        for key, value in states:
            if value is None:
                self.values.pop(key, None)
            else:
                self.values[key] = value
        for key, ts, register in timers:  # in order: one may be registered, then cleared
            if register:
                self.timer(key, ts)
            else:
                self.timers.discard((key, ts))
        if watermark is not None:  # one at or below it fired in the call
            assert all((key, ts) not in self.timers for key, ts, _ in timers if ts <= watermark)
        self.broadcast_state.update(dict(puts))
        if self.keep_metrics:
            self.metrics += metrics
        return [tuple(row) for row in rows]


class FlinkKeyed:
    """A PyFlink keyed adapter as Flink runs it: one instance and state per key (`key_of` a
    row), `process_element` at arrival, `on_timer` in timestamp order at each watermark."""

    def __init__(self, make: Callable[[], Any], key_of: Callable[[Any], str]) -> None:
        self.make = make
        self.key_of = key_of
        self.keys: dict[str, tuple[Any, FakeRuntimeContext, FakeContext]] = {}
        self.calls = 0

    def _at(self, key: str) -> tuple[Any, FakeRuntimeContext, FakeContext]:
        if key not in self.keys:
            adapter, runtime_context = self.make(), FakeRuntimeContext()
            adapter.open(runtime_context)
            self.keys[key] = (
                adapter,
                runtime_context,
                FakeContext(FakeMapState(), FakeTimers(), key),
            )
        return self.keys[key]

    def element(self, row: Any) -> list[tuple[Any, ...]]:
        adapter, _, ctx = self._at(self.key_of(row))
        self.calls += 1
        return _rows(adapter.process_element(row, ctx))

    def watermark(self, watermark: int) -> list[tuple[Any, ...]]:
        rows: list[tuple[Any, ...]] = []
        while True:
            due = [
                (ts, key)
                for key, (_, _, ctx) in self.keys.items()
                for ts in ctx.timers.registered
                if ts <= watermark
            ]
            if not due:
                return rows
            ts, key = min(due)
            adapter, _, ctx = self.keys[key]
            ctx.timers.registered.discard(ts)
            self.calls += 1
            rows += _rows(adapter.on_timer(ts, ctx))

    def stored(self) -> dict[str, str]:
        """Each key's stored value (its one ValueState), where it has one."""
        return {
            key: value
            for key, (_, runtime_context, _) in self.keys.items()
            if (value := runtime_context.version.value()) is not None
        }

    def timers(self) -> set[tuple[str, int]]:
        return {(key, ts) for key, (_, _, ctx) in self.keys.items() for ts in ctx.timers.registered}


def _rows(rows: Iterable[Any] | None) -> list[tuple[Any, ...]]:
    return [tuple(row) for row in rows or ()]


class FakeGroup:
    """A metric group that records what is registered under which labels."""

    def __init__(self, path: tuple[str, ...] = (), made: dict[str, Any] | None = None) -> None:
        self.path = path
        self.made: dict[str, Any] = {} if made is None else made

    def add_group(self, name: str, extra: str | None = None) -> FakeGroup:
        return FakeGroup((*self.path, name if extra is None else f"{name}={extra}"), self.made)

    def counter(self, name: str) -> FakeCounter:
        return self.made.setdefault("/".join((*self.path, name)), FakeCounter())

    def distribution(self, name: str) -> FakeCounter:
        return self.made.setdefault("/".join((*self.path, name)), FakeCounter())


class FakeCounter:
    """A counter or distribution that keeps its count and the values it was given."""

    def __init__(self) -> None:
        self.count = 0
        self.calls = 0  # each one a Python-to-Java call in a job
        self.values: list[int] = []

    def inc(self, count: int = 1) -> None:
        self.count += count
        self.calls += 1

    def update(self, value: int) -> None:
        self.values.append(value)


class FakeMetricsContext:
    """A runtime context with only a metric group: `OperatorMetrics(FakeMetricsContext(), ...)`."""

    def __init__(self) -> None:
        self.group = FakeGroup()

    def get_metrics_group(self) -> FakeGroup:
        return self.group
