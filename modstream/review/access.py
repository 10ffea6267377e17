"""Who may decide a content version's review task: grants and leases as records the moderation
job checks (issue 27; docs/SECURITY.md, threat 2c; docs/moderation.md, "Review access").

The review tool (modstream/review/queue.py) checks grants and leases in its Redis, which a reviewer
with Redis access can write. The job therefore holds its own copy, built from signed records:

- a **grant** (`review.grants`, signed by a lead) gives a reviewer queues from its `ts` on; the
  job keeps each reviewer's grant history (`ReviewGrants`, in broadcast state:
  modstream/review/grants.py) and asks which grant was in force at a review's `ts`, so replay and
  live decide alike;
- a **lease** (`review.leases`, signed by the reviewer) claims one task the job issued, until
  `expires_ts`; the version keeps, per task, the reviewer holding it (`state.leases`).

A review of a task the job issued applies only when its reviewer held the lease at the review's
`ts` and a grant of the task's queue; a review naming no task the job issued (`external`, a
proactive review) needs a grant of the queue `external`. Everything else is refused to the DLQ
and changes nothing: no grant is class `signature` (the reviewer's key may not say this), a
lease missing, expired or held by another is `conflict`. Pure: no PyFlink, no clock.
"""

from __future__ import annotations

from typing import Any

from modstream.contract.common import APPEAL_TASK_PREFIX
from modstream.contract.review import ALL_QUEUES
from modstream.core.ids import sha256_hex
from modstream.moderation.state import Lease, State

# Re-exported: the moderation job imports them from here.
from modstream.review.grants import ReviewGrants as ReviewGrants
from modstream.review.grants import state_entry as state_entry

# The queue of a review naming no task the job issued: a proactive review.
EXTERNAL_QUEUE = "external"
# Queues of the tasks the job issues under fixed names (modstream/moderation/rules/).
APPEALS_QUEUE = "appeals"
BRIGADING_QUEUE = "brigading"


def issued_queue(state: State, task_id: str, queue: str) -> bool:
    """Whether the job issued task `task_id` of this version in queue `queue`: the id of a
    policy-routed task is a digest of the version and its queue, so a lease cannot name
    another queue for it (a queue its reviewer holds a grant for). An open task is also in
    the queue the job keeps for it (`task_queues`: second review, escalation, an escalation
    rule's move)."""
    if task_id not in state.tasks:
        return False
    held = state.task_queues.get(task_id)
    if held is not None and held.queue == queue:
        return True  # its queue now: a second review's, an escalation's, or one it moved to
    if task_id.startswith(APPEAL_TASK_PREFIX):
        return queue == APPEALS_QUEUE
    if task_id.startswith("brigading-"):
        return queue == BRIGADING_QUEUE
    return task_id == f"review-{sha256_hex(state.content_id, state.content_version, queue)[:20]}"


def lease_refusal(state: State, lease: Any, grants: ReviewGrants) -> tuple[str, str] | None:
    """(DLQ class, message) when `lease` may not be held, else None; `lease` is a
    review.leases record (modstream/contract/review.py)."""
    where = f"moderation: review.leases: task {lease.task_id} of content version "
    where += f"{lease.content_version}"
    if not issued_queue(state, lease.task_id, lease.queue):
        return "conflict", f"{where} is not a task of queue {lease.queue!r} of this version"
    if not grants.may(lease.reviewer_id, lease.queue, lease.ts):
        return "signature", f"{where}: reviewer {lease.reviewer_id} holds no grant of queue " + (
            f"{lease.queue!r} at ts {lease.ts}"
        )
    wait = state.second
    if wait is not None and wait.task_id == lease.task_id and wait.reviewer_id == lease.reviewer_id:
        return "conflict", (
            f"{where} is the second review of {lease.reviewer_id}'s own review: two distinct "
            "reviewers are required"
        )
    held = state.leases.get(lease.task_id)
    if held is not None and held.reviewer_id != lease.reviewer_id and held.expires_ts > lease.ts:
        return "conflict", f"{where} is leased to another reviewer until {held.expires_ts}"
    return None


def hold(state: State, lease: Any) -> None:
    """Record the lease: its reviewer holds the task until `expires_ts`."""
    state.leases[lease.task_id] = Lease(lease.reviewer_id, lease.expires_ts)


def review_refusal(
    state: State, review: Any, ts: int, grants: ReviewGrants
) -> tuple[str, str] | None:
    """(DLQ class, message) when `review` may not apply at `ts`, else None."""
    where = f"moderation: review.decisions: review for task {review.task_id} of content "
    where += f"version {review.content_version}"
    if review.task_id not in state.tasks:
        if grants.may(review.reviewer_id, EXTERNAL_QUEUE, ts):
            return None
        return "signature", (
            f"{where}: not a task of this version, and reviewer {review.reviewer_id} holds no "
            f"grant of queue {EXTERNAL_QUEUE!r} (a proactive review) at ts {ts}"
        )
    if _queue_of(state, review.task_id, grants, review.reviewer_id, ts) is None:
        return "signature", (
            f"{where}: reviewer {review.reviewer_id} holds no grant of the task's queue at ts {ts}"
        )
    held = state.leases.get(review.task_id)
    if held is None or held.reviewer_id != review.reviewer_id or held.expires_ts < ts:
        return "conflict", f"{where}: reviewer {review.reviewer_id} holds no lease of it at ts {ts}"
    return None


def awaits_lease(state: State, review: Any, ts: int) -> bool:
    """Whether a review refused for want of its reviewer's lease may wait for one
    (modstream/moderation/rules/reviews.py): a lease read after it but stamped at or before it
    applies it, as replay, which reads both in `ts` order, does. Not a review naming no task
    of this version (it needs no lease), nor one whose task another reviewer holds at its
    `ts` (that reviewer's lease refuses any other until it ends)."""
    if review.task_id not in state.tasks:
        return False
    held = state.leases.get(review.task_id)
    return held is None or held.reviewer_id == review.reviewer_id or held.expires_ts < ts


def _queue_of(
    state: State, task_id: str, grants: ReviewGrants, reviewer_id: str, ts: int
) -> str | None:
    """A queue of the task the reviewer is granted at `ts` (the lease was checked against its
    queue when it was taken; a grant revoked since then refuses the decision), else None."""
    for queue in grants.queues_at(reviewer_id, ts):
        if queue == ALL_QUEUES or issued_queue(state, task_id, queue):
            return queue
    return None
