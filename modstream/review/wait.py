"""Review wait (issue 29, item 3): how long the oldest open review task of each queue has
waited, against the queue's target.

A task is open from its `review.tasks` record until a `review.decisions` record names its
`task_id`: what the review feed (modstream/review/queue.py) shows a reviewer until one decides it
(`review backlog` counts the same tasks). The decision does not name the queue, so two keyed
steps, both in the reconciler job (modstream/jobs/review_wait.py):
1. by `task_id` (`follow_task`): the task's queue and when it was first seen, until its
   decision; a decision read before its task (two topics, no order between them) leaves a
   `closed` mark, so the task never opens; the mark is cleared after `CLOSED_KEPT_MS`.
   Emits `Change`s: opened (queue, task, at) and closed (queue, task).
2. by queue (`QueueWait`): the open tasks' first-seen times; the oldest is found again (a pass
   over them) only when the oldest one closed, and at most once per refresh.
"When it opened" is the processing time the reconciler first read the task, not its `ts`: a
backfill (or the demo's back-dated workload) is not late at once. In a live deployment the two
differ by the reconciler's consumer lag (its own alert). Both steps keep their data in keyed
state, so a job restored from its checkpoint reports the same ages as before it stopped (the
refresh timers are in the checkpoint too).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal

HOUR_MS = 3_600_000
# The longest a task of a queue should wait before a reviewer decides it (ModstreamReviewWait
# fires past it for 15 minutes; docs/OPERATIONS.md, "Review wait"). A queue not listed: DEFAULT.
TARGETS_MS: dict[str, int] = {
    "appeals": 24 * HOUR_MS,  # an author waits for their appeal: a day
    "provisional": HOUR_MS,  # expired provisional allows: content is public meanwhile
    "adult": 2 * HOUR_MS,
    "reports": 4 * HOUR_MS,
}
DEFAULT_TARGET_MS = 4 * HOUR_MS
# A decision read before its task keeps its mark this long (the topics' skew is far less).
CLOSED_KEPT_MS = 24 * HOUR_MS
# How often a queue's gauge is set again while it has open tasks.
REFRESH_MS = 10_000


def target_ms(queue: str) -> int:
    return TARGETS_MS.get(queue, DEFAULT_TARGET_MS)


@dataclass(frozen=True)
class Change:
    """A task opened or closed in its queue (`at`: when first seen open; 0 for closed)."""

    kind: Literal["opened", "closed"]
    queue: str
    task_id: str
    at: int = 0


def follow_task(
    state: dict[str, Any] | None, topic: str, record: dict[str, Any], now: int
) -> tuple[dict[str, Any] | None, list[Change]]:
    """One `review.tasks` or `review.decisions` record for the task `state` is about: the new
    state (`{"queue", "at"}` while open, `{"closed": at}` after) and the changes it makes."""
    task_id = str(record["task_id"])
    if topic == "review.tasks":
        moved = str(record["queue"])
        if state is not None and "queue" in state and state["queue"] != moved:
            # Escalated to another queue (modstream/review/escalation.py, `escalated_from`): it
            # leaves its queue and waits in the new one since it was first seen.
            at = int(state["at"])
            left = Change("closed", str(state["queue"]), task_id)
            return {"queue": moved, "at": at}, [left, Change("opened", moved, task_id, at)]
        if state is not None:  # open already (a record repeated), or decided first
            return state, []
        queue = str(record["queue"])
        return {"queue": queue, "at": now}, [Change("opened", queue, task_id, now)]
    if state is not None and "queue" in state:
        return {"closed": now}, [Change("closed", str(state["queue"]), task_id)]
    return state or {"closed": now}, []


def closed_mark_expired(state: dict[str, Any] | None, now: int) -> bool:
    """Whether a task's state is a `closed` mark old enough to clear."""
    return state is not None and "closed" in state and now - int(state["closed"]) >= CLOSED_KEPT_MS


def oldest(opened: Iterable[int]) -> int | None:
    """When the oldest open task was first seen (None: the queue is empty)."""
    return min(opened, default=None)


def wait_ms(oldest_at: int | None, now: int) -> int:
    """The oldest open task's wait (0 for an empty queue)."""
    return 0 if oldest_at is None else max(0, now - oldest_at)
