"""modstream/review/wait.py: a task is open from its task record to its decision, in either
order of the two topics, and a queue's wait is its oldest open task's."""

from __future__ import annotations

from typing import Any

from modstream.review.wait import (
    CLOSED_KEPT_MS,
    DEFAULT_TARGET_MS,
    Change,
    closed_mark_expired,
    follow_task,
    oldest,
    target_ms,
    wait_ms,
)

TASK = {"task_id": "t-1", "queue": "appeals", "ts": 5}
DECISION = {"task_id": "t-1", "outcome": "ALLOW", "ts": 9}


def test_a_task_opens_once_and_its_decision_closes_it() -> None:
    state, changes = follow_task(None, "review.tasks", TASK, 100)
    assert changes == [Change("opened", "appeals", "t-1", 100)]
    again, repeated = follow_task(state, "review.tasks", TASK, 150)
    assert (again, repeated) == (state, [])  # a repeated task record changes nothing
    closed, changes = follow_task(state, "review.decisions", DECISION, 200)
    assert changes == [Change("closed", "appeals", "t-1")]
    assert follow_task(closed, "review.decisions", DECISION, 250) == (closed, [])


def test_an_escalated_task_leaves_its_queue_and_waits_in_the_new_one_since_first_seen() -> None:
    state, _ = follow_task(None, "review.tasks", TASK, 100)
    moved = {**TASK, "queue": "senior", "escalated_from": TASK["queue"]}
    state, changes = follow_task(state, "review.tasks", moved, 500)
    assert changes == [
        Change("closed", str(TASK["queue"]), str(TASK["task_id"])),
        Change("opened", "senior", str(TASK["task_id"]), 100),
    ]
    _, changes = follow_task(state, "review.decisions", DECISION, 600)
    assert changes == [Change("closed", "senior", str(TASK["task_id"]))]


def test_a_decision_read_before_its_task_keeps_the_task_from_ever_opening() -> None:
    mark: Any
    mark, changes = follow_task(None, "review.decisions", DECISION, 100)
    assert changes == [] and mark == {"closed": 100}
    assert follow_task(mark, "review.tasks", TASK, 120) == (mark, [])
    assert not closed_mark_expired(mark, 100 + CLOSED_KEPT_MS - 1)
    assert closed_mark_expired(mark, 100 + CLOSED_KEPT_MS)
    assert not closed_mark_expired({"queue": "appeals", "at": 0}, 10 * CLOSED_KEPT_MS)


def test_a_queues_wait_is_its_oldest_open_tasks_and_zero_when_empty() -> None:
    assert oldest([300, 100, 200]) == 100 and oldest([]) is None
    assert wait_ms(100, 1_100) == 1_000
    assert wait_ms(None, 1_100) == 0
    assert wait_ms(2_000, 1_100) == 0  # a clock that stepped back is not a negative wait
    assert target_ms("appeals") == 24 * 3_600_000
    assert target_ms("some-new-queue") == DEFAULT_TARGET_MS
