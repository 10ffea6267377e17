"""The Python side of BatchedVersions.java for the batched engine's keyed operators other than
the per-version step (issue 26, point 2): the retro join by hash key
(modstream/jobs/moderation/retro_batch.py) and the sanctions by author
(modstream/jobs/moderation/sanctions_batch.py).

Java calls `fire` once per flush with every key made ready since the last (its stored value,
its held input with ts at or before the watermark, its fired timers). Per key, `KeyedBatch`
replays what Flink would have done for the PyFlink adapter it replaces. An adapter that takes
its input when it arrives (`RetroJoin`) saw all of it before the watermark fired its timers:
here the key's input comes first (by ts), then its timers by ts. An adapter that buffers its
input until a timer at the input's ts (`Sanctions`, `input_is_timer`) took it in timestamp
order with its other timers: here input and timers are merged by ts, and a timer at a ts that
has input is that input's. Either way a timer set at or before the watermark fires in the same
call (as Flink fires it within that watermark), in its order; a later one goes back to Java.
A subclass says what one ts's input and one timer do (`on_input`, `on_timer`) over `stored`
and `store`, Flink's ValueState of the key.
"""

from __future__ import annotations

import heapq
from typing import Any

import cloudpickle
import msgspec

from modstream.jobs.moderation.batch import BATCH, RecordedMetrics
from modstream.jobs.moderation.config import ModerationConfig

_PACK = msgspec.msgpack.Encoder().encode
_UNPACK = msgspec.msgpack.Decoder().decode
INPUT, TIMER = 0, 1  # at one ts, a key's input comes before its timer

Entry = list[Any]  # [topic, value, ts, seq], as Java holds a key's input
# (rank, ts, INPUT | TIMER, order, entries): rank 0 (input taken at arrival) before rank 1
Event = tuple[int, int, int, int, list[Entry] | None]


class KeyedBatch:
    """One BatchedVersions subtask's Python side for a keyed handler, in event-time order."""

    operator = "keyed_batch"  # the metrics' operator label; a subclass names its own
    # Whether the PyFlink adapter took its input on a timer at the input's ts (a buffer, as
    # `Sanctions` does): then a key's input and its own timer at one ts are one Flink timer,
    # run once, as input (`on_input`); else input comes first and the timer after it.
    input_is_timer = False

    def __init__(self, pickled_config: bytes, subtask: int) -> None:
        self.config: ModerationConfig = cloudpickle.loads(pickled_config)
        self.subtask = subtask
        self.metrics = RecordedMetrics(self.operator)
        self.values: dict[str, bytes | None] = {}
        self.key = ""
        self.watermark = 0
        self.timer_changes: dict[tuple[str, int], bool] = {}
        self.events: list[Event] = []  # the current key's, a heap
        self.timers_due: set[int] = set()  # the current key's timers in `events`
        self.order = 0

    def restore(self, _payload: bytes) -> bytes:
        """Nothing of the policy or banks is kept: this handler has no broadcast input."""
        return b""

    def broadcast(self, _payload: bytes) -> bytes:
        """Never called without a broadcast input; answers nothing if it is."""
        return self._answer([])

    def fire(self, payload: bytes) -> bytes:
        """[watermark, [[key, stored], ...], tasks]: a task is [BATCH, key, [[topic, value,
        ts, seq], ...]] (by ts, then seq) or [TIMER, key, ts]; each key is run to the
        watermark, keys in the order Java made them ready."""
        watermark, stored, tasks = _UNPACK(payload)
        self.watermark = watermark
        self.values = {key: value for key, value in stored}
        self.timer_changes = {}
        per_key: dict[str, list[Event]] = {}
        for kind, key, task in tasks:
            events = per_key.setdefault(key, [])
            if kind == BATCH:
                rank = 1 if self.input_is_timer else 0
                for ts, entries in _by_ts(task):
                    events.append((rank, ts, INPUT, self._next(), entries))
            else:
                events.append((1, int(task), TIMER, self._next(), None))
        rows: list[list[Any]] = []
        for key, events in per_key.items():
            self.key = key
            self.events = self._timers_merged(events)
            heapq.heapify(self.events)
            self.timers_due = {ts for _, ts, kind, _, _ in self.events if self._is_timer(kind)}
            while self.events:
                _, ts, kind, _, held = heapq.heappop(self.events)
                if self._is_timer(kind):
                    self.timers_due.discard(ts)
                if held is None:
                    rows += self.on_timer(key, ts)
                else:
                    rows += self.on_input(key, ts, held)
        return self._answer(rows)

    def _is_timer(self, kind: int) -> bool:
        return kind == TIMER or self.input_is_timer

    def _timers_merged(self, events: list[Event]) -> list[Event]:
        """With `input_is_timer`, a timer at a ts the key has input at is that input's."""
        if not self.input_is_timer:
            return events
        inputs = {ts for _, ts, kind, _, _ in events if kind == INPUT}
        return [event for event in events if event[2] == INPUT or event[1] not in inputs]

    def on_input(self, key: str, ts: int, entries: list[Entry]) -> list[list[Any]]:
        """The key's input at `ts` (ordered by seq, then arrival): the rows it emits."""
        raise NotImplementedError

    def on_timer(self, key: str, ts: int) -> list[list[Any]]:
        """The key's timer at `ts`: the rows it emits."""
        raise NotImplementedError

    def stored(self) -> bytes | None:
        return self.values.get(self.key)

    def store(self, value: bytes | None) -> None:
        self.values[self.key] = value

    def register_timer(self, ts: int) -> None:
        """At or before the watermark: fired in this call, in order; later: Java's to set."""
        if ts > self.watermark:
            self.timer_changes[(self.key, ts)] = True
        elif ts not in self.timers_due:
            self.timers_due.add(ts)
            heapq.heappush(self.events, (1, ts, TIMER, self._next(), None))

    def _next(self) -> int:
        self.order += 1
        return self.order

    def _answer(self, rows: list[list[Any]]) -> bytes:
        states = [[key, value] for key, value in self.values.items()]
        timers = [[key, ts, register] for (key, ts), register in self.timer_changes.items()]
        self.values, self.timer_changes = {}, {}
        return _PACK([states, timers, rows, self.metrics.drain(), []])


def _by_ts(entries: list[Entry]) -> list[tuple[int, list[Entry]]]:
    """Java's ready input of one key (by ts, then seq) as one group per ts."""
    groups: list[tuple[int, list[Entry]]] = []
    for entry in entries:
        ts = int(entry[2])
        if groups and groups[-1][0] == ts:
            groups[-1][1].append(entry)
        else:
            groups.append((ts, [entry]))
    return groups
