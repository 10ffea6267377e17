"""Human reviews: a reviewer's outcome overrides the automated rules for the version and is
sticky; only another human decision changes it. A review applies only under its reviewer's
grant and lease of the task's queue, and may need a second reviewer first.

Contract: docs/CONTRACT.md, "review.decisions": a review "is fenced to its `content_version`,
and applies whether or not its `task_id` names a task that modstream opened". "Outcomes": "A
human reviewer's outcome for a version overrides automated rules for that version and is sticky:
re-evaluation and later evidence do not change it; only another human decision (review or
appeal) does." "v1.1 additions", "Reasons": "a human decision's `reasons` are
`["human_review"]`, plus the reviewer's `reason` only when it is one of the policy's rule
reasons."

Proved by:
    tests/operators/test_moderation.py::test_human_review_is_sticky_until_another_human_decides
    tests/operators/test_moderation.py::test_a_reviewers_free_text_never_becomes_a_reason_code
    tests/operators/test_review_access.py::test_a_review_under_a_grant_and_a_lease_applies
    tests/operators/test_review_access.py::test_a_review_without_a_grant_goes_to_the_dlq_changes_nothing_and_applies_once_granted
    tests/operators/test_review_access.py::test_a_lease_held_by_another_reviewer_is_refused_until_it_ends

The whole rule: `on_review` (the handler of review.decisions) checks the grant and lease
(modstream/review/access.py), refuses a review older than the human decision in force
(rules/human_input.py), then decides, waits for or is the second review
(modstream/review/second_review.py); `on_lease` (review.leases) keeps a reviewer's claim. A
human's reasons and restriction are read by modstream/moderation/verdict.py `evaluate`.
"""

from __future__ import annotations

from typing import Any

from modstream.moderation.rules import human_input
from modstream.moderation.state import Context, State, StepResult, event_digest
from modstream.review import access as review_access
from modstream.review import second_review


def on_review(state: State, record: Any, ts: int, ctx: Context, result: StepResult) -> bool:
    """A sticky human outcome; it closes the open tasks, the active appeal's among them. A
    review stamped before the human decision in force changes nothing (`stale`): the newest
    human decision wins whatever the arrival order (rules/human_input.py).
    The policy may want a second reviewer first (modstream/review/second_review.py)."""
    if ctx.grants is not None:
        refusal = review_access.review_refusal(state, record, ts, ctx.grants)
        if refusal is not None:
            # Not applied, so not remembered: the same record sent again once its reviewer
            # holds the grant and lease (`dlq replay`) applies.
            del state.events[event_digest(record.event_id)]
            result.dead_letters.append(refusal)
            return False
    newer = human_input.superseded(state, ts, record.event_id)
    if newer is not None:
        result.dead_letters.append(("stale", human_input.superseded_message(record, newer)))
        return False
    # Decides, waits for a second reviewer, or is the second: modstream/review/second_review.py.
    return second_review.on_review(state, record, ts, ctx, result)


def on_lease(state: State, record: Any, ts: int, ctx: Context, result: StepResult) -> bool:
    """A reviewer's claim of one task the job issued, kept while the reviewer holds a grant of
    its queue and no other reviewer holds it (modstream/review/access.py); it decides nothing
    and moves no TTL."""
    if ctx.grants is not None:
        refusal = review_access.lease_refusal(state, record, ctx.grants)
        if refusal is not None:
            del state.events[event_digest(record.event_id)]
            result.dead_letters.append(refusal)
            return False
    review_access.hold(state, record)
    return False
