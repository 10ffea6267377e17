"""Admission control for a scan pool: admit only what the pool can answer within the deadline.

Issue 28 item 7. Requests that reach a scan job wait in a priority queue, never in Kafka: the job
reads its topics as fast as they come and decides at once, per request, whether the pool can
still answer it in time. Priority classes, first served first:

1. `live_high_risk`: a live request for a high-risk surface, or one a report bumped (`bump`);
2. `live`: every other live request;
3. `backfill`: re-scans for a re-evaluation (their own topic, docs/contract-notes.md).

A request may wait until `answer_by`: when it arrived plus its budget, the request's
`deadline_ts - ts`. It arrived when it was written to Kafka (`arrival_ms`: the record timestamp
the moderation job's producer stamped), not when the pool read it, so what waited upstream
(in Kafka, in Flink's buffers, in a restored checkpoint) has spent that part of its budget.
The pool answers `seconds_per_request` (its capacity's inverse, configured or measured) per
request, one after the other in class order, so a request's predicted answer
is `now + (ahead + 1) * seconds_per_request`, where `ahead` counts the requests in flight and
every waiting request of its class or a higher one. What is refused, or later pushed past
its own `answer_by` by higher-priority arrivals, is shed: the caller answers it `timeout` at
once, so the policy's unknown rule decides its version instead of a silent wait. `take` also
sheds a waiting request that could no longer be answered in time even if it started now.
Pure: time comes in as `now` (ms), nothing here touches Flink.
"""

from __future__ import annotations

import dataclasses
import heapq
import itertools
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import msgspec

PRIORITIES = ("live_high_risk", "live", "backfill")
NO_DEADLINE = 1 << 62


def priority_of(request: dict[str, Any]) -> str:
    """A request's class from its `priority` and `high_risk` fields
    (modstream/contract/outputs.py)."""
    if request.get("priority") == "backfill":
        return "backfill"
    return "live_high_risk" if request.get("high_risk") else "live"


def budget_ms(request: dict[str, Any]) -> int:
    """How long the request may take from when the pool saw it: its deadline's distance from
    its `ts` (none: no limit)."""
    deadline, ts = request.get("deadline_ts"), request.get("ts")
    if isinstance(deadline, int) and isinstance(ts, int):
        return max(0, deadline - ts)
    return NO_DEADLINE


RawRow = tuple[str, str | None, str | None]  # (physical topic, key, value) as Kafka gave it


def arrival_ms(record_ms: int | None, now: int) -> int:
    """When a request arrived: its Kafka record timestamp, never later than `now`.

    Not the request's `ts`: that is its upload's event time, which a replay or a client's clock
    puts anywhere. The record timestamp is the wall clock of the moderation job's producer when
    it wrote the request (the time its deadline wait starts), so only the skew between two
    NTP-synced hosts separates it from ours; a timestamp ahead of `now` (their clock ahead)
    counts from now, so skew never lengthens a budget. None (no timestamp): `now`."""
    return now if record_ms is None or record_ms > now else record_ms


@dataclass(frozen=True)
class Waiting:
    """One request waiting in the pool: what admission reads of it, and the raw row (kept for
    the scan and for a `timeout` answer)."""

    seq: int
    priority: str
    modality: str
    content_id: str
    content_version: int
    arrived_ms: int
    answer_by_ms: int
    row: Any = None


class _Admission(msgspec.Struct):
    """The fields admission reads of a request (the rest, text included, is skipped unparsed)."""

    content_id: str
    content_version: int
    modality: str = ""
    priority: str = "live"
    high_risk: bool = False
    deadline_ts: int | None = None
    ts: int | None = None


def admission_fields(
    row: RawRow,
    seq: int,
    now: int,
    arrival: str = "",
    index: int = 0,
    record_ms: int | None = None,
) -> Waiting | None:
    """A raw request row as a `Waiting` entry (`row`: `(arrival, index, row)`, the adapter's
    handle on it), read with the rules of `priority_of` and `budget_ms`, its budget counted
    from `arrival_ms(record_ms, now)`; None for a row that is not a JSON object with a content
    id and version (the model worker dead-letters it)."""
    try:
        fields = msgspec.json.decode(row[2] or "", type=_Admission)
    # DecodeError: not JSON, or a field missing or mistyped (ValidationError is one);
    # RecursionError: nesting deeper than msgspec decodes.
    except (msgspec.DecodeError, RecursionError):
        return None
    budget = (
        max(0, fields.deadline_ts - fields.ts)
        if fields.deadline_ts is not None and fields.ts is not None
        else NO_DEADLINE
    )
    if fields.priority == "backfill":
        priority = "backfill"
    else:
        priority = "live_high_risk" if fields.high_risk else "live"
    arrived = arrival_ms(record_ms, now)
    return Waiting(
        seq=seq,
        priority=priority,
        modality=fields.modality,
        content_id=fields.content_id,
        content_version=fields.content_version,
        arrived_ms=arrived,
        answer_by_ms=min(NO_DEADLINE, arrived + budget),
        row=(arrival, index, row),
    )


class _Report(msgspec.Struct):
    """What a bump reads of a report (docs/CONTRACT.md, moderation.reports)."""

    content_id: str
    content_version: int


def reported_version(value: str | None) -> tuple[str, int] | None:
    """The (content id, version) a `moderation.reports` record names, None for one that does
    not decode: the moderation job dead-letters reports; the scan pool only skips them."""
    try:
        report = msgspec.json.decode(value or "", type=_Report)
    except (msgspec.DecodeError, RecursionError):
        return None
    return report.content_id, report.content_version


@dataclass
class Capacity:
    """The pool's service time per request, seconds: configured (`rps`), else measured as a
    moving average over the batches it answered (`observe`); zero (admit everything) until the
    first measurement."""

    rps: float | None = None
    workers: int = 1
    measured_s: float = 0.0
    weight: float = 0.2

    def seconds_per_request(self) -> float:
        if self.rps:
            return 1.0 / self.rps
        return self.measured_s / max(1, self.workers)

    def observe(self, requests: int, seconds: float) -> None:
        """One worker answered `requests` in `seconds` (one batch)."""
        if requests <= 0:
            return
        each = max(0.0, seconds) / requests
        self.measured_s = (
            each
            if self.measured_s == 0.0
            else self.measured_s + self.weight * (each - self.measured_s)
        )


@dataclass
class AdmissionQueue:
    """The waiting requests of one pool (or of one batching key of it), by class, oldest first."""

    capacity: Capacity = field(default_factory=Capacity)
    in_flight: int = 0
    _queues: dict[str, deque[Waiting]] = field(default_factory=dict)
    _deadlines: list[tuple[int, int]] = field(default_factory=list)  # (answer_by, seq)
    _waiting: dict[int, Waiting] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._queues = {priority: deque() for priority in PRIORITIES}

    def __len__(self) -> int:
        return len(self._waiting)

    def predicted_answer(self, ahead: int, now: int) -> int:
        return now + int((ahead + 1) * self.capacity.seconds_per_request() * 1000)

    def offer(self, waiting: Waiting, now: int) -> list[Waiting]:
        """Admit `waiting` if the pool can answer it in time; returns what is shed now (the
        request itself when refused, else lower-class requests it pushed past their time)."""
        queues = self._queues
        first, live, backfill = (queues[p] for p in PRIORITIES)
        rank = PRIORITIES.index(waiting.priority)
        ahead = self.in_flight + len(first) + (len(live) if rank else 0)
        ahead += len(backfill) if rank == 2 else 0
        if self.predicted_answer(ahead, now) > waiting.answer_by_ms:
            return [waiting]
        queues[waiting.priority].append(waiting)
        self._waiting[waiting.seq] = waiting
        if waiting.answer_by_ms < NO_DEADLINE:
            heapq.heappush(self._deadlines, (waiting.answer_by_ms, waiting.seq))
        if rank == 2 or not (backfill or (rank == 0 and live)):
            return []  # nothing below it
        return self._shed_pushed_back(rank, now)

    def _shed_pushed_back(self, rank: int, now: int) -> list[Waiting]:
        """Lower-class requests that no longer make their time behind the arrival: each lower
        queue is walked once (its length is bounded by what the pool answers within a
        budget), keeping those still predicted in time."""
        shed: list[Waiting] = []
        ahead = self.in_flight + sum(len(self._queues[p]) for p in PRIORITIES[: rank + 1])
        for priority in PRIORITIES[rank + 1 :]:
            kept: deque[Waiting] = deque()
            for waiting in self._queues[priority]:
                if self.predicted_answer(ahead + len(kept), now) > waiting.answer_by_ms:
                    shed.append(self._forget(waiting))
                else:
                    kept.append(waiting)
            self._queues[priority] = kept
            ahead += len(kept)
        return shed

    def take(self, count: int, now: int) -> tuple[list[Waiting], list[Waiting]]:
        """Up to `count` requests to scan now, highest class first and oldest first within
        it; and those shed because even starting now they would answer late."""
        shed = self.expire(now)
        taken: list[Waiting] = []
        for priority in PRIORITIES:
            queue = self._queues[priority]
            while queue and len(taken) < count:
                taken.append(self._forget(queue.popleft()))
        return taken, shed

    def expire(self, now: int) -> list[Waiting]:
        """Every waiting request that would answer late even if it were next: its time is
        shorter than the work in flight (queued at the workers ahead of it) plus its own."""
        late_after = self.predicted_answer(self.in_flight, now)
        shed: list[Waiting] = []
        while self._deadlines and self._deadlines[0][0] < late_after:
            _, seq = heapq.heappop(self._deadlines)
            waiting = self._waiting.get(seq)
            if waiting is not None:
                self._queues[waiting.priority].remove(waiting)
                shed.append(self._forget(waiting))
        return shed

    def bump(self, content_id: str, content_version: int) -> int:
        """A report on this version: its waiting requests go to the front of the first class
        (ahead of other high-risk ones, oldest first among them). Returns how many moved."""
        moved: list[Waiting] = []
        for priority in PRIORITIES:
            queue = self._queues[priority]
            keep = deque(w for w in queue if not _of(w, content_id, content_version))
            moved += [w for w in queue if _of(w, content_id, content_version)]
            self._queues[priority] = keep
        first = self._queues[PRIORITIES[0]]
        moved.sort(key=lambda w: w.arrived_ms)
        for waiting in reversed(moved):
            bumped = dataclasses.replace(waiting, priority=PRIORITIES[0])
            self._waiting[waiting.seq] = bumped
            first.appendleft(bumped)
        return len(moved)

    def oldest_age_ms(self, now: int, look: int = 64) -> dict[tuple[str, str], int]:
        """The oldest waiting request's age per (modality, priority), left out where none
        waits. A class is oldest first (bumped requests aside), so only the first `look` of
        each are read: the metric's cost stays flat however long the queue."""
        ages: dict[tuple[str, str], int] = {}
        for priority, queue in self._queues.items():
            for waiting in itertools.islice(queue, look):
                key = (waiting.modality, priority)
                ages[key] = max(ages.get(key, 0), now - waiting.arrived_ms)
        return ages

    def waiting(self) -> Iterable[Waiting]:
        for priority in PRIORITIES:
            yield from self._queues[priority]

    def _forget(self, waiting: Waiting) -> Waiting:
        self._waiting.pop(waiting.seq, None)
        return waiting


def _of(waiting: Waiting, content_id: str, content_version: int) -> bool:
    return waiting.content_id == content_id and waiting.content_version == content_version
