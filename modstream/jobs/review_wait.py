"""reconciler: the review-wait gauges, per queue (modstream/review/wait.py holds the logic).

Why the reconciler: it is the processing-time job that already reads contract outputs to
measure what users live with (enforcement lag, the exposure window); review.tasks and
review.decisions are two more topics on its source, in two keyed steps apart from
reconciliation (their own state and timers). A record that does not parse is skipped: the
moderation job reads the same review.decisions and dead-letters it, and review.tasks are its
own output (one DLQ row per bad input, as for the exposure window's uploads).
Metrics (modstream/jobs/metrics.py): `oldest_review_wait_ms` and `review_wait_target_ms` by queue.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

from pyflink.common import Row, Types
from pyflink.datastream import DataStream
from pyflink.datastream.functions import FlatMapFunction, KeyedProcessFunction, RuntimeContext
from pyflink.datastream.state import MapStateDescriptor, ValueStateDescriptor

from modstream.contract import SchemaError, parse
from modstream.jobs import metrics, runtime
from modstream.review import wait as review_wait

REVIEW_TOPICS = ("review.tasks", "review.decisions")
# Row(topic, task_id, value) into the task step; Row(kind, queue, task_id, at) out of it.
TASK_ROW = Types.ROW([Types.STRING(), Types.STRING(), Types.STRING()])
CHANGE_ROW = Types.ROW([Types.STRING(), Types.STRING(), Types.STRING(), Types.LONG()])


def review_record(topic: str, raw: str | None) -> dict[str, Any] | None:
    """A valid review.tasks or review.decisions record, or None: the moderation job reads the
    same records and sends an invalid one to the DLQ with its class, so it is dropped here
    (counted once, there)."""
    try:
        record: dict[str, Any] = parse(topic, raw or "").model_dump()
        return record
    except SchemaError:
        return None


class ReviewRecords(FlatMapFunction):
    """The source's review records as Row(topic, task_id, value); every other record dropped
    here (the reconciliation branch takes those)."""

    def __init__(self, contract: Callable[[str], str]) -> None:
        self.contract = contract

    def flat_map(self, value: Row) -> Iterator[Row]:
        topic = self.contract(value[0])
        if topic not in REVIEW_TOPICS:
            return
        record = review_record(topic, value[2])
        if record is not None:
            yield Row(topic, str(record["task_id"]), value[2])


class FollowTask(KeyedProcessFunction):
    """Keyed by task_id: opened when its task is read, closed by its decision."""

    def __init__(self, clock: Callable[[], int] = runtime.wall_clock_ms) -> None:
        self.clock = clock

    def open(self, runtime_context: RuntimeContext) -> None:
        self.task = runtime_context.get_state(ValueStateDescriptor("review_task", Types.STRING()))

    def process_element(self, value: Row, ctx: Any) -> Iterator[Row]:
        record = review_record(value[0], value[2])
        if record is None:
            return
        stored = self.task.value()
        before = json.loads(stored) if stored else None
        now = self.clock()
        state, changes = review_wait.follow_task(before, value[0], record, now)
        if state is not None and state != before:
            self.task.update(json.dumps(state))
            if "closed" in state:
                ctx.timer_service().register_processing_time_timer(now + review_wait.CLOSED_KEPT_MS)
        for change in changes:
            yield Row(change.kind, change.queue, change.task_id, change.at)

    def on_timer(self, timestamp: int, ctx: Any) -> Iterator[Row]:
        stored = self.task.value()
        if stored and review_wait.closed_mark_expired(json.loads(stored), timestamp):
            self.task.clear()
        return iter(())


class QueueWait(KeyedProcessFunction):
    """Keyed by queue: its open tasks (task_id -> first seen) and the oldest, as gauges set on
    a refresh timer while the queue has open tasks (and once more, to 0, when it empties)."""

    def __init__(self, clock: Callable[[], int] = runtime.wall_clock_ms) -> None:
        self.clock = clock

    def open(self, runtime_context: RuntimeContext) -> None:
        self.open_tasks = runtime_context.get_map_state(
            MapStateDescriptor("open_tasks", Types.STRING(), Types.LONG())
        )
        # The oldest open task's first-seen time; cleared when it closed (found again later).
        self.oldest = runtime_context.get_state(ValueStateDescriptor("oldest", Types.LONG()))
        self.armed = runtime_context.get_state(ValueStateDescriptor("refresh", Types.LONG()))
        self.metrics = metrics.OperatorMetrics(runtime_context, "review wait")

    def process_element(self, value: Row, ctx: Any) -> Iterator[Row]:
        kind, task_id, at = value[0], value[2], int(value[3] or 0)
        oldest = self.oldest.value()
        if kind == "opened":
            if (oldest is None and self.open_tasks.is_empty()) or (
                oldest is not None and at < oldest
            ):
                self.oldest.update(at)
            self.open_tasks.put(task_id, at)
        elif self.open_tasks.contains(task_id):
            closed_at = self.open_tasks.get(task_id)
            self.open_tasks.remove(task_id)
            if closed_at == oldest:
                self.oldest.clear()  # found again at the next refresh, not at every close
        if self.armed.value() is None:
            self._arm(ctx, self.clock())
        return iter(())

    def on_timer(self, timestamp: int, ctx: Any) -> Iterator[Row]:
        self.armed.clear()
        queue = str(ctx.get_current_key())
        oldest = self.oldest.value()
        if oldest is None:
            oldest = review_wait.oldest(self.open_tasks.values())
            if oldest is not None:
                self.oldest.update(oldest)
        now = self.clock()
        self.metrics.set("oldest_review_wait_ms", review_wait.wait_ms(oldest, now), queue=queue)
        self.metrics.set("review_wait_target_ms", review_wait.target_ms(queue), queue=queue)
        if oldest is not None:
            self._arm(ctx, now)
        return iter(())

    def _arm(self, ctx: Any, now: int) -> None:
        due = now + review_wait.REFRESH_MS
        self.armed.update(due)
        ctx.timer_service().register_processing_time_timer(due)


def build_review_wait(
    source: DataStream, contract: Callable[[str], str], clock: Callable[[], int]
) -> DataStream:
    """The two keyed steps over the source's review records; an empty stream of sink rows
    (to union with the job's outputs, so the branch is part of the job's graph)."""
    return (
        source.flat_map(ReviewRecords(contract), output_type=TASK_ROW)
        .name("review records")
        .uid("review-records")
        .key_by(lambda row: row[1], key_type=Types.STRING())
        .process(FollowTask(clock), output_type=CHANGE_ROW)
        .name("review task")
        .uid("review-task")
        .key_by(lambda row: row[1], key_type=Types.STRING())
        .process(QueueWait(clock), output_type=runtime.SINK_ROW)
        .name("review wait")
        .uid("review-wait")
    )
