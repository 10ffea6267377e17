"""Appeals: an appeal becomes a review task `appeal-<appeal_id>` carrying the appealed
decision's reasons and evidence; at most one is active per version.

Contract: docs/CONTRACT.md, "moderation.appeals": "At most one active appeal per `(content_id,
content_version)`; another while one is active is rejected to the DLQ with `error_class:
"conflict"`. An appeal becomes a review task of kind `appeal` with `task_id`
`appeal-<appeal_id>`; the reviewer's `review.decisions` record with that `task_id` closes it, and
the decision it causes has `trigger: appeal`." "v1.1 additions", "Appeal tasks": "Appeal tasks
carry the appealed decision's `reasons` and `evidence` refs."

Proved by:
    tests/operators/test_moderation.py::test_appeal_opens_one_task_conflicts_go_to_the_dlq_and_the_review_closes_it
    tests/operators/test_moderation.py::test_an_appeal_task_carries_the_appealed_decisions_reasons_and_evidence
    tests/operators/test_moderation.py::test_an_appeal_of_a_retired_version_opens_a_task_with_the_decisions_reasons

The whole rule: `on_appeal` (the handler of moderation.appeals) opens the task (its record:
modstream/moderation/records.py `appeal_task`) and tracks it for escalation; the review that
closes it is rules/reviews.py's; a re-sent appeal is a duplicate (rules/human_input.py).
"""

from __future__ import annotations

from typing import Any

from modstream.contract.common import APPEAL_TASK_PREFIX
from modstream.moderation.records import APPEAL_PRIORITY, appeal_task
from modstream.moderation.state import Context, State, StepResult
from modstream.review import access as review_access
from modstream.review import escalation


def on_appeal(state: State, record: Any, ts: int, ctx: Context, result: StepResult) -> bool:
    """Open the appeal's task; a second appeal while one is active is a `conflict`."""
    if state.appeal_id is not None:
        result.dead_letters.append(
            (
                "conflict",
                f"appeal {record.appeal_id}: appeal "
                f"{state.appeal_id} is still active for this version",
            )
        )
        return False
    state.appeal_id = record.appeal_id
    task_id = f"{APPEAL_TASK_PREFIX}{record.appeal_id}"
    state.tasks.append(task_id)
    escalation.track(state, task_id, review_access.APPEALS_QUEUE, APPEAL_PRIORITY, ts)
    result.outputs.append(appeal_task(state, task_id, ctx.resolution.decide, ts))
    return True
