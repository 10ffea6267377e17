"""Two ways to run a keyed handler without a JVM, for comparing them: `JavaKeyed`, what
BatchedVersions.java keeps for a modstream/jobs/moderation/keyed_batch.py handler (held input per
key until the watermark, stored values, timers, one `fire` per watermark), and `FlinkKeyed`, what
Flink does for the PyFlink adapter it replaces (input at arrival, one adapter and its state per key,
timers fired in timestamp order at each watermark, a timer set at or below it fired within it)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import cloudpickle
import msgspec

from modstream.jobs.moderation.batch import BATCH, TIMER
from modstream.jobs.moderation.config import ModerationConfig
from modstream.jobs.moderation.keyed_batch import KeyedBatch
from tests.jobs.test_moderation_adapter import (
    FakeContext,
    FakeMapState,
    FakeRuntimeContext,
    FakeTimers,
)


class JavaKeyed:
    """BatchedVersions.java's bookkeeping around a KeyedBatch handler."""

    def __init__(self, handler: type[KeyedBatch], config: ModerationConfig) -> None:
        self.python = handler(cloudpickle.dumps(config), 0)
        self.python.restore(msgspec.msgpack.encode([]))
        self.held: dict[str, list[Any]] = {}
        self.values: dict[str, bytes] = {}
        self.timers: set[tuple[str, int]] = set()
        self.calls = 0
        self.metrics: list[list[Any]] = []

    def element(self, row: Any) -> None:
        """Row(route, key, topic, value, ts, seq, lane), held by its key."""
        self.held.setdefault(row[1], []).append(row)

    def watermark(self, watermark: int) -> list[tuple[Any, ...]]:
        """Inputs first (keys by their earliest ready ts), then fired timers by ts."""
        tasks: list[list[Any]] = []
        ready_keys = [key for key in self.held if any(r[4] <= watermark for r in self.held[key])]
        for key in sorted(ready_keys, key=lambda k: min(r[4] for r in self.held[k])):
            ready = sorted(
                (r for r in self.held[key] if r[4] <= watermark), key=lambda r: (r[4], r[5] or 0)
            )
            tasks.append([BATCH, key, [[r[2], r[3], r[4], r[5] or 0] for r in ready]])
            self.held[key] = [r for r in self.held[key] if r[4] > watermark]
        fired = sorted((ts, key) for key, ts in self.timers if ts <= watermark)
        self.timers -= {(key, ts) for ts, key in fired}
        tasks += [[TIMER, key, ts] for ts, key in fired]
        if not tasks:
            return []
        keys = dict.fromkeys(task[1] for task in tasks)
        payload = [watermark, [[key, self.values.get(key)] for key in keys], tasks]
        self.calls += 1
        answer = self.python.fire(msgspec.msgpack.encode(payload))
        states, timers, rows, metrics, puts = msgspec.msgpack.decode(answer)
        assert puts == []
        for key, value in states:
            if value is None:
                self.values.pop(key, None)
            else:
                self.values[key] = value
        for key, ts, register in timers:
            assert ts > watermark  # one at or below it fired in the call
            (self.timers.add if register else self.timers.discard)((key, ts))
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
            key: runtime_context.version.value()
            for key, (_, runtime_context, _) in self.keys.items()
            if runtime_context.version.value() is not None
        }

    def timers(self) -> set[tuple[str, int]]:
        return {(key, ts) for key, (_, _, ctx) in self.keys.items() for ts in ctx.timers.registered}


def _rows(rows: Iterable[Any] | None) -> list[tuple[Any, ...]]:
    return [tuple(row) for row in rows or ()]
