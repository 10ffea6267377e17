"""Second review (issue 29 item 2): the policy's `second_review` section makes chosen human
decisions need two distinct reviewers, and samples a share of the others for a blind second
review; two reviewers who disagree open an escalation task (docs/moderation.md, "Second
review").

Every review the job applies passes through `on_review` (after its grant, lease and order
checks, modstream/moderation/rules/reviews.py):

- **required** (its outcome is in `second_review.outcomes`, or a rule in
  `second_review.rules` matches the version): the first review changes nothing in force (no
  revision, no action); it closes the version's tasks and opens a second-review task (queue
  `second_review.queue`). The second review must come from another reviewer (the first
  reviewer's is refused, DLQ `conflict`); the same outcome decides (the revision and its
  action), another opens an escalation task (`second_review.escalation_queue`) and changes
  nothing until that task is decided.
- **sampled** (`second_review.sample` of the others, by the review's event-id digest, so replay
  samples the same): the first review decides as before, and a second-review task is opened;
  the second review only counts (a disagreement opens an escalation task too). One second
  review waits at a time: a review applied while a sampled one waits is not sampled.

A second-review task is blind: its reasons and evidence are the decision's in force before the
first review (the model's), never the first outcome; its `second_review` field names the task
reviewed, never the first reviewer or outcome. Each second review compared adds an `Agreement`
to the step's result (the job counts them: modstream/review/agreement.py turns the counts into
Cohen's kappa). Pure: no PyFlink, no clock.
"""

from __future__ import annotations

from typing import Any

from modstream.contract.common import APPEAL_TASK_PREFIX
from modstream.core.ids import sha256_hex
from modstream.moderation.decide import decide
from modstream.moderation.records import task
from modstream.moderation.rules import human_input as human
from modstream.moderation.state import (
    Agreement,
    Context,
    Output,
    SecondReviewWait,
    State,
    StepResult,
    event_digest,
)
from modstream.moderation.verdict import evaluate
from modstream.policy.document import SecondReview
from modstream.review import escalation

SECOND_PREFIX = "second-"
ESCALATION_PREFIX = "escalation-"
# The sampling digest's range: a review is sampled when its digest is below sample * this.
_SAMPLE_RANGE = 2**32


def on_review(state: State, record: Any, ts: int, ctx: Context, result: StepResult) -> bool:
    """Apply a review the access and order checks let through: the second of a pair, the
    escalation's decision, a first review that waits for its second, or an ordinary one
    (perhaps sampled). False when it is refused (it is then not remembered)."""
    wait = state.second
    if wait is not None and record.task_id == wait.task_id:
        return _second(state, wait, record, ts, ctx, result)
    if record.task_id.startswith((SECOND_PREFIX, ESCALATION_PREFIX)) and (
        record.task_id in state.tasks and record.task_id != state.escalation_task
    ):
        return _refuse(state, record, result, "stale", "is closed: a review decided it already")
    if wait is not None and not wait.sampled:
        return _refuse(
            state,
            record,
            result,
            "conflict",
            f"waits: the review of task {wait.of_task} needs its second reviewer (task "
            f"{wait.task_id}) before another review of this version applies",
        )
    rules = _rules(ctx)
    if rules is not None and record.task_id != state.escalation_task:
        shown = _shown(state)
        queue = escalation.queue_of(state, record.task_id)
        if _requires_two(state, record, ts, ctx, rules):
            escalation.close_all(state)
            result.outputs.append(_open_second(state, record, queue, ts, ctx, rules, shown, False))
            return True
        apply(state, record, ts, ctx, result, record.task_id)
        if state.second is None and sampled(record.event_id, rules.sample):
            result.outputs.append(_open_second(state, record, queue, ts, ctx, rules, shown, True))
        return True
    apply(state, record, ts, ctx, result, record.task_id)
    return True


def apply(
    state: State, record: Any, ts: int, ctx: Context, result: StepResult, task_id: str
) -> None:
    """The review decides: its outcome in force, the version's tasks closed (a sampled second
    review still waiting stays open), and a new revision when what is decided changed.
    `task_id`: the task the decision answers (an appeal's: trigger `appeal`)."""
    appeal = state.appeal_id
    trigger = "appeal" if appeal and task_id == f"{APPEAL_TASK_PREFIX}{appeal}" else "review"
    state.human = human.in_force(record, ts)
    wait = state.second
    escalation.close_all(state, keep=wait.task_id if wait is not None else None)
    state.escalation_task = None
    if trigger == "appeal":
        state.appeal_id = None
    result.outputs += decide(state, ctx, ts, trigger)


def _second(
    state: State, wait: SecondReviewWait, record: Any, ts: int, ctx: Context, result: StepResult
) -> bool:
    """The second review of a pair: compared, counted, and then deciding (required, same
    outcome), opening an escalation task (another outcome), or neither (sampled, same)."""
    if record.reviewer_id == wait.reviewer_id:
        return _refuse(
            state,
            record,
            result,
            "conflict",
            f"is a second review by {record.reviewer_id}, who made the first (task "
            f"{wait.of_task}): two distinct reviewers are required",
        )
    result.agreements.append(
        Agreement(
            wait.queue,
            wait.reviewer_id,
            record.reviewer_id,
            wait.outcome,
            record.outcome,
            wait.sampled,
        )
    )
    state.second = None
    state.task_queues.pop(wait.task_id, None)
    if wait.task_id in state.open_tasks:
        state.open_tasks.remove(wait.task_id)
    if record.outcome == wait.outcome:
        if not wait.sampled:
            apply(state, record, ts, ctx, result, wait.of_task)
        return True
    result.outputs.append(_open_escalation(state, wait, record, ts, ctx))
    return True


def _refuse(state: State, record: Any, result: StepResult, error_class: str, why: str) -> bool:
    """To the DLQ, changing nothing; not remembered, so a corrected resend is not a duplicate."""
    state.events.pop(event_digest(record.event_id), None)
    result.dead_letters.append(
        (
            error_class,
            f"moderation: review.decisions: review for task {record.task_id} of content "
            f"version {record.content_version} {why}",
        )
    )
    return False


def _rules(ctx: Context) -> SecondReview | None:
    policy = ctx.resolution.decide
    return policy.document.second_review if policy is not None else None


def _requires_two(state: State, record: Any, ts: int, ctx: Context, rules: SecondReview) -> bool:
    """Its outcome is one the policy wants two reviewers for, or a rule the policy names
    matches the version (the model's verdict: evaluated as if no human had decided)."""
    if record.outcome in rules.outcomes:
        return True
    if not rules.rules or state.content is None:
        return False
    in_force, state.human = state.human, None
    try:
        matched = evaluate(state, ctx.resolution.decide, ctx, ts).verdict.matched_rules
    finally:
        state.human = in_force
    return bool(set(matched) & set(rules.rules))


def sampled(event_id: str, sample: float) -> bool:
    """Whether a review gets a blind second review: its event id's digest below the share.
    Public so that a workload can choose reviews the policy samples
    (modstream/demo/workload_extras.py) by this very rule."""
    if sample <= 0:
        return False
    return int(sha256_hex("second_review", event_id)[:8], 16) < sample * _SAMPLE_RANGE


def _shown(state: State) -> tuple[list[str], list[str]]:
    """What a second reviewer sees: the reasons and evidence of the decision in force before
    the first review (never the first outcome)."""
    last = state.last_decision
    return list((last.reasons if last else None) or ["second_review"]), list(
        (last.evidence_refs if last else None) or []
    )


def second_task_id(content_id: str, content_version: int, first_event_id: str) -> str:
    """The second-review task of the review `first_event_id` of a version. Deterministic, so
    replay opens the same task and a workload can lease and decide it in advance."""
    return SECOND_PREFIX + _digest(content_id, content_version, first_event_id)


def escalation_task_id(content_id: str, content_version: int, second_task: str) -> str:
    """The escalation task a disagreement on `second_task` opens (deterministic, as above)."""
    return ESCALATION_PREFIX + _digest(content_id, content_version, second_task)


def _digest(content_id: str, content_version: int, of: str) -> str:
    return sha256_hex(content_id, content_version, of)[:20]


def _open_second(
    state: State,
    record: Any,
    queue: str,
    ts: int,
    ctx: Context,
    rules: SecondReview,
    shown: tuple[list[str], list[str]],
    sampled: bool,
) -> Output:
    """Open the blind second-review task of `record`'s review and wait for it."""
    task_id = second_task_id(state.content_id, state.content_version, record.event_id)
    state.second = SecondReviewWait(
        task_id,
        record.task_id,
        queue,
        record.reviewer_id,
        record.outcome,
        record.reason,
        ts,
        human.human_id(record.event_id),
        sampled,
    )
    reasons, refs = shown
    note = {"round": "second", "of_task": record.task_id, "sampled": sampled}
    return _task(state, task_id, rules.queue, rules.priority, reasons, refs, ts, ctx, note)


def _open_escalation(
    state: State, wait: SecondReviewWait, record: Any, ts: int, ctx: Context
) -> Output:
    """Two reviewers disagreed: a task for the escalation queue, showing both outcomes."""
    rules = _rules(ctx) or SecondReview()
    task_id = escalation_task_id(state.content_id, state.content_version, wait.task_id)
    state.escalation_task = task_id
    reasons, refs = _shown(state)
    note = {
        "round": "escalation",
        "of_task": wait.of_task,
        "sampled": wait.sampled,
        "outcomes": [wait.outcome, record.outcome],
    }
    return _task(
        state,
        task_id,
        rules.escalation_queue,
        rules.escalation_priority,
        reasons,
        refs,
        ts,
        ctx,
        note,
    )


def _task(
    state: State,
    task_id: str,
    queue: str,
    priority: int,
    reasons: list[str],
    refs: list[str],
    ts: int,
    ctx: Context,
    note: dict[str, Any],
) -> Output:
    if task_id not in state.tasks:
        state.tasks.append(task_id)
    escalation.track(state, task_id, queue, priority, ts)
    provenance = [{"evidence_ref": ref} for ref in refs]
    policy = ctx.resolution.decide
    record = task(state, task_id, "review", queue, priority, reasons, provenance, policy, ts)
    record["second_review"] = note
    return ("review.tasks", state.content_id, record)
