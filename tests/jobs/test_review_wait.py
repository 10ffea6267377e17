"""modstream/jobs/review_wait.py: the two keyed steps with fake state, timers and metrics (no JVM),
and the wait they report surviving a restore of their state."""

from __future__ import annotations

import json
from typing import Any

from pyflink.common import Row

from modstream.jobs.review_wait import FollowTask, QueueWait, ReviewRecords
from modstream.review.wait import CLOSED_KEPT_MS, REFRESH_MS
from modstream.testing.flink import FakeMapState, FakeMetricsContext, FakeValueState


class State:
    """One key's state, by descriptor name, as Flink keeps it across a restore."""

    def __init__(self) -> None:
        self.values: dict[str, FakeValueState] = {}
        self.maps: dict[str, FakeMapState] = {}

    def get_state(self, descriptor: Any) -> FakeValueState:
        return self.values.setdefault(descriptor.get_name(), FakeValueState())

    def get_map_state(self, descriptor: Any) -> FakeMapState:
        return self.maps.setdefault(descriptor.get_name(), FakeMapState())


class Runtime(State):
    def __init__(self, state: State, metrics: FakeMetricsContext) -> None:
        self.values, self.maps, self.metrics = state.values, state.maps, metrics

    def get_metrics_group(self) -> Any:
        return self.metrics.get_metrics_group()


class Timers:
    def __init__(self) -> None:
        self.due: list[int] = []

    def register_processing_time_timer(self, ts: int) -> None:
        self.due.append(ts)


class Context:
    def __init__(self, key: str) -> None:
        self.key, self.timers = key, Timers()

    def get_current_key(self) -> str:
        return self.key

    def timer_service(self) -> Timers:
        return self.timers


def task(task_id: str, queue: str = "appeals") -> str:
    return json.dumps(
        {"task_id": task_id, "kind": "appeal", "content_id": "c-1", "content_version": 1,
         "decision_revision": 1, "policy_version": 1, "queue": queue, "priority": 1,
         "reasons": ["appeal"], "evidence": [], "ts": 1}
    )  # fmt: skip


def decision(task_id: str) -> str:
    return json.dumps(
        {"event_id": f"e-{task_id}", "task_id": task_id, "content_id": "c-1",
         "content_version": 1, "reviewer_id": "r-1", "outcome": "ALLOW", "reason": "ok",
         "ts": 2}
    )  # fmt: skip


def gauge(metrics: FakeMetricsContext, name: str, queue: str = "appeals") -> int:
    return int(metrics.group.made[f"modstream/queue={queue}/{name}"].values[-1])


def test_only_valid_review_records_reach_the_task_step() -> None:
    records = ReviewRecords(lambda physical: physical.removeprefix("p."))
    assert list(records.flat_map(Row("p.review.tasks", "c-1", task("t-1"), 0, ""))) == [
        Row("review.tasks", "t-1", task("t-1"))
    ]
    assert list(records.flat_map(Row("p.review.tasks", "c-1", "{broken", 0, ""))) == []
    assert list(records.flat_map(Row("p.review.tasks", "c-1", None, 0, ""))) == []
    wrong_field = task("t-1").replace('"task_id"', '"task"')
    assert list(records.flat_map(Row("p.review.tasks", "c-1", wrong_field, 0, ""))) == []
    too_deep = "[" * 10_000 + "]" * 10_000
    assert list(records.flat_map(Row("p.review.decisions", "c-1", too_deep, 0, ""))) == []
    assert list(records.flat_map(Row("p.moderation.actions", "c-1", "{}", 0, ""))) == []


def test_the_oldest_open_task_per_queue_is_reported_and_survives_a_restore() -> None:
    now = [1_000_000]
    tasks: dict[str, State] = {}

    def follow(topic: str, raw: str, task_id: str) -> list[Row]:
        step = FollowTask(lambda: now[0])
        step.open(Runtime(tasks.setdefault(task_id, State()), FakeMetricsContext()))
        return list(step.process_element(Row(topic, task_id, raw), Context(task_id)))

    changes = follow("review.tasks", task("t-1"), "t-1")
    now[0] += 60_000
    changes += follow("review.tasks", task("t-2"), "t-2")
    changes += follow("review.decisions", decision("t-3"), "t-3")  # before its task
    changes += follow("review.tasks", task("t-3"), "t-3")
    assert [(c[0], c[2], c[3]) for c in changes] == [
        ("opened", "t-1", 1_000_000),
        ("opened", "t-2", 1_060_000),
    ]

    queue_state, metrics = State(), FakeMetricsContext()
    wait = QueueWait(lambda: now[0])
    wait.open(Runtime(queue_state, metrics))
    context = Context("appeals")
    for change in changes:
        list(wait.process_element(change, context))
    now[0] += 30_000
    list(wait.on_timer(context.timers.due[-1], context))
    assert gauge(metrics, "oldest_review_wait_ms") == 90_000
    assert gauge(metrics, "review_wait_target_ms") == 24 * 3_600_000

    # The oldest is decided: the next refresh finds the next oldest.
    for change in follow("review.decisions", decision("t-1"), "t-1"):
        list(wait.process_element(change, context))
    now[0] += REFRESH_MS
    list(wait.on_timer(context.timers.due[-1], context))
    assert gauge(metrics, "oldest_review_wait_ms") == now[0] - 1_060_000 == 40_000

    # A restore: a new operator instance over the same keyed state reports the same wait.
    restored_metrics = FakeMetricsContext()
    restored = QueueWait(lambda: now[0])
    restored.open(Runtime(queue_state, restored_metrics))
    list(restored.on_timer(context.timers.due[-1], context))
    assert gauge(restored_metrics, "oldest_review_wait_ms") == gauge(
        metrics, "oldest_review_wait_ms"
    )

    # The last one decided: 0, and no refresh armed any more.
    armed = len(context.timers.due)
    for change in follow("review.decisions", decision("t-2"), "t-2"):
        list(restored.process_element(change, context))
    list(restored.on_timer(context.timers.due[-1], context))
    assert gauge(restored_metrics, "oldest_review_wait_ms") == 0
    assert len(context.timers.due) == armed


def test_a_decisions_closed_mark_is_cleared_after_it_is_kept() -> None:
    state = State()
    step = FollowTask(lambda: 500)
    step.open(Runtime(state, FakeMetricsContext()))
    context = Context("t-9")
    assert (
        list(step.process_element(Row("review.decisions", "t-9", decision("t-9")), context)) == []
    )
    assert context.timers.due == [500 + CLOSED_KEPT_MS]
    list(step.on_timer(500 + CLOSED_KEPT_MS - 1, context))
    assert state.values["review_task"].value() is not None
    list(step.on_timer(500 + CLOSED_KEPT_MS, context))
    assert state.values["review_task"].value() is None
