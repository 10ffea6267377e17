"""The moderation step as the job runs it, in process: `BatchedModerate.fire`, the Python side of
BatchedVersions.java (modstream/jobs/moderation/batch.py), called as Java calls it, on the
records Decode admits. What the job's interpreter does per event in the version operator:
`make bench-step`'s apply (the pure step, `Moderate.apply`) plus the adapter around it, the
metrics it reports included, and the MessagePack payloads in and out.

`Driver` keeps what the Java operator keeps (input held per version until the watermark, the
stored values, the versions' timers) in plain Python, outside the timed part: only `fire` is
timed, in CPU time. The watermark advances `step_ms` of event time per call, so a call carries
every version that became ready in that much event time (a live job calls every 200 ms of
processing time; a backlog's call carries thousands of versions).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import cloudpickle
import msgspec

from modstream.jobs.moderation.batch import BATCH, TIMER, BatchedModerate
from modstream.jobs.moderation.config import ModerationConfig
from modstream.jobs.moderation.decode import Decode

KEYED = "keyed"  # Decode's route for the version operator's input (config.DECODED_ROW)
_PACK = msgspec.msgpack.Encoder().encode
_UNPACK = msgspec.msgpack.Decoder().decode


def keyed_rows(config: ModerationConfig, records: list[tuple[str, str]]) -> list[Any]:
    """The DECODED_ROWs Decode admits of `records` (topic, value) for the version operator."""
    decode = Decode(config)
    rows = [decode.decode(topic, None, raw, 0, "0", 0) for topic, raw in records]
    return [row for row in rows if not isinstance(row, tuple) and row[0] == KEYED]


@dataclass
class Driver:
    """BatchedVersions.java's bookkeeping around one `BatchedModerate`, and the CPU time its
    `fire` calls took."""

    config: ModerationConfig
    python: BatchedModerate = field(init=False)
    held: dict[str, list[Any]] = field(default_factory=dict)
    values: dict[str, bytes] = field(default_factory=dict)
    timers: set[tuple[str, int]] = field(default_factory=set)
    cpu_s: float = 0.0
    calls: int = 0
    outputs: int = 0

    def __post_init__(self) -> None:
        self.python = BatchedModerate(cloudpickle.dumps(self.config), 0)
        self.python.restore(_PACK([]))

    def run(self, rows: list[Any], until: int, step_ms: int) -> None:
        """Every row in ts order, the watermark `step_ms` further per call, then at `until`."""
        ordered = sorted(rows, key=lambda row: row[4])
        watermark = ordered[0][4] if ordered else until
        index = 0
        while index < len(ordered) or watermark < until:
            watermark = watermark + step_ms if index < len(ordered) else until
            while index < len(ordered) and ordered[index][4] <= watermark:
                self.held.setdefault(ordered[index][1], []).append(ordered[index])
                index += 1
            self._call(watermark)

    def _call(self, watermark: int) -> None:
        tasks = list(self._ready(watermark))
        fired = sorted((ts, key) for key, ts in self.timers if ts <= watermark)
        self.timers -= {(key, ts) for ts, key in fired}
        tasks += [[TIMER, key, ts] for ts, key in fired]
        if not tasks:
            return
        keys = dict.fromkeys(task[1] for task in tasks)
        payload = _PACK([watermark, [[key, self.values.get(key)] for key in keys], tasks])
        started = time.process_time()
        answer = self.python.fire(payload)
        self.cpu_s += time.process_time() - started
        self.calls += 1
        states, timers, rows, _metrics, _puts = _UNPACK(answer)
        self.outputs += len(rows)
        for key, value in states:
            if value is None:
                self.values.pop(key, None)
            else:
                self.values[key] = value
        for key, ts, register in timers:
            (self.timers.add if register else self.timers.discard)((key, ts))

    def _ready(self, watermark: int) -> Iterator[list[Any]]:
        for key in list(self.held):
            ready = [row for row in self.held[key] if row[4] <= watermark]
            if not ready:
                continue
            yield [BATCH, key, [[row[2], row[3], row[4], row[5] or 0] for row in ready]]
            waiting = [row for row in self.held[key] if row[4] > watermark]
            if waiting:
                self.held[key] = waiting
            else:
                del self.held[key]
