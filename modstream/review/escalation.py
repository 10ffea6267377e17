"""The escalation rule (issue 29 item 3): a review task left open too long gets a higher
priority or moves to another queue, by the policy's `escalation` section (per queue:
`after_ms`, `priority`, `queue`; docs/policy-language.md).

The version knows its open tasks (`state.task_queues`: queue, priority, when opened), so the
rule is the moderation step's, on an event-time timer like the provisional expiry: one timer
armed at a time (`escalation_timer`), at the earliest open task's `ts + after_ms`; when it
fires, every task due by then is escalated once and re-emitted on review.tasks (same
`task_id`, the new queue and priority, `ts` = when it became due, `escalated_from` = the queue
it left), and the next is armed. Event time only: replay escalates the same tasks at the same
`ts` as the live job. A task opened before this rule (no entry in `task_queues`) is not
escalated. Pure: no PyFlink, no clock.
"""

from __future__ import annotations

import msgspec

from modstream.contract.common import APPEAL_TASK_PREFIX
from modstream.moderation.records import task
from modstream.moderation.state import Context, OpenTask, Output, State
from modstream.policy.evaluate import CompiledPolicy


def track(state: State, task_id: str, queue: str, priority: int, ts: int) -> None:
    """A task just opened: listed open, with what the escalation rule needs."""
    if task_id not in state.open_tasks:
        state.open_tasks.append(task_id)
    state.task_queues[task_id] = OpenTask(queue, priority, ts)


def close_all(state: State, keep: str | None = None) -> None:
    """A review decided the version: every open task is closed (as `open_tasks` always was),
    but `keep` (a sampled second review still waiting for its reviewer)."""
    state.open_tasks = [task_id for task_id in state.open_tasks if task_id == keep]
    state.task_queues = {
        task_id: held for task_id, held in state.task_queues.items() if task_id == keep
    }


def queue_of(state: State, task_id: str) -> str:
    """The queue a task is in now ('external' for a review naming no task the job tracks)."""
    held = state.task_queues.get(task_id)
    if held is not None:
        return held.queue
    if task_id.startswith(APPEAL_TASK_PREFIX):
        return "appeals"
    if task_id.startswith("brigading-"):
        return "brigading"
    return "external" if task_id not in state.tasks else "review"


def _due(state: State, policy: CompiledPolicy | None) -> list[tuple[int, str]]:
    """(event time it escalates at, task id) of each open task the policy escalates."""
    rules = policy.document.escalation if policy is not None else {}
    due = []
    for task_id, held in state.task_queues.items():
        rule = rules.get(held.queue)
        if rule is not None and not held.escalated:
            due.append((held.ts + rule.after_ms, task_id))
    return sorted(due)


def arm(state: State, policy: CompiledPolicy | None) -> list[int]:
    """The timer of the earliest escalation due, when none as early is armed already (one
    armed at a time: an earlier one re-arms the next when it fires)."""
    due = _due(state, policy)
    if not due or state.deleted:
        return []
    first = due[0][0]
    armed = state.escalation_timer
    if armed is not None and armed <= first:
        return []
    state.escalation_timer = first
    return [first]


def fire(state: State, ts: int, ctx: Context) -> tuple[list[Output], list[int]]:
    """The escalation timer fired at `ts`: escalate every open task due by then, each re-emitted
    with its new queue and priority; arm the next. A task closed since it was armed is gone
    from `task_queues`, so it is left alone."""
    state.escalation_timer = None
    if state.deleted or state.content is None:
        return [], []
    policy = ctx.resolution.decide
    rules = policy.document.escalation if policy is not None else {}
    outputs: list[Output] = []
    for due_at, task_id in _due(state, policy):
        if due_at > ts:
            break
        held = state.task_queues[task_id]
        rule = rules[held.queue]
        moved = msgspec.structs.replace(
            held,
            queue=rule.queue or held.queue,
            priority=held.priority if rule.priority is None else rule.priority,
            ts=due_at,
            escalated=True,
        )
        state.task_queues[task_id] = moved
        outputs.append(_escalated(state, task_id, held.queue, moved, policy))
    return outputs, arm(state, policy)


def _escalated(
    state: State, task_id: str, left: str, moved: OpenTask, policy: CompiledPolicy | None
) -> Output:
    """The task's review.tasks record again, in its new queue and priority."""
    last = state.last_decision
    reasons = (last.reasons if last else None) or ["escalated"]
    if task_id.startswith("second-"):  # blind: the decision in force may be the first review's
        reasons = ["second_review"]
    provenance = [{"evidence_ref": ref} for ref in (last.evidence_refs if last else None) or []]
    kind = "appeal" if task_id.startswith(APPEAL_TASK_PREFIX) else "review"
    record = task(
        state, task_id, kind, moved.queue, moved.priority, reasons, provenance, policy, moved.ts
    )
    record["escalated_from"] = left
    return ("review.tasks", state.content_id, record)
