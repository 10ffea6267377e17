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
    tests/operators/test_review_access.py::test_a_review_read_before_its_lease_waits_for_it_and_decides_as_in_ts_order
    tests/operators/test_review_access.py::test_a_review_whose_lease_never_comes_is_refused_when_its_wait_ends
    tests/integration/test_moderation_job.py::test_a_review_read_before_its_lease_waits_for_it_on_the_live_job

The whole rule: `on_review` (the handler of review.decisions) checks the grant and lease
(modstream/review/access.py), refuses a review older than the human decision in force
(rules/human_input.py), then decides, waits for or is the second review
(modstream/review/second_review.py); `on_lease` (review.leases) keeps a reviewer's claim. A
review refused only for want of its reviewer's lease waits LEASE_WAIT_MS of event time for a
lease stamped at or before it (`_wait`, `_leased`, `fire_waiting`), so the outcome does not
depend on which of the two topics is read first. A
human's reasons and restriction are read by modstream/moderation/verdict.py `evaluate`.
"""

from __future__ import annotations

from typing import Any

import msgspec

from modstream.contract.registry import parse_own
from modstream.moderation.rules import human_input
from modstream.moderation.rules.retention import keep_after_input
from modstream.moderation.state import (
    LEASE_WAIT_MS,
    WAITING_REVIEWS_KEPT,
    Context,
    State,
    StepResult,
    WaitingReview,
    event_digest,
)
from modstream.review import access as review_access
from modstream.review import second_review

REVIEWS = "review.decisions"


def on_review(state: State, record: Any, ts: int, ctx: Context, result: StepResult) -> bool:
    """A sticky human outcome; it closes the open tasks, the active appeal's among them. A
    review stamped before the human decision in force changes nothing (`stale`): the newest
    human decision wins whatever the arrival order (rules/human_input.py).
    The policy may want a second reviewer first (modstream/review/second_review.py)."""
    if ctx.grants is not None:
        refusal = review_access.review_refusal(state, record, ts, ctx.grants)
        if refusal is not None:
            error_class, message = refusal
            waits = error_class == "conflict" and review_access.awaits_lease(state, record, ts)
            if waits and _wait(state, record, ts, ctx, message, result):
                return False  # its digest stays in `events`: a duplicate changes nothing
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
    its queue and no other reviewer holds it (modstream/review/access.py). By itself it decides
    nothing and moves no TTL; a review of its reviewer read before it and stamped within it,
    which waited for it (`_wait`), applies now."""
    if ctx.grants is not None:
        refusal = review_access.lease_refusal(state, record, ctx.grants)
        if refusal is not None:
            del state.events[event_digest(record.event_id)]
            result.dead_letters.append(refusal)
            return False
    review_access.hold(state, record)
    return _leased(state, record, ctx, result)


def _wait(
    state: State, record: Any, ts: int, ctx: Context, refusal: str, result: StepResult
) -> bool:
    """Keep a review its reviewer holds no lease for yet until a lease stamped at or before it
    is read (`_leased`) or LEASE_WAIT_MS of event time passed (`fire_waiting`), counted from the
    operator's event time when the review was read late, behind it (`ctx.event_time`): a wait
    counted from its `ts` alone would already be over. The lease and
    the review come from two topics, and human input never holds event time, so the lease may
    be read after the review even though a console sends it first: without the wait, live and
    replay (which reads both in `ts` order) would decide differently. False when
    WAITING_REVIEWS_KEPT already wait: refused at once."""
    waiting = state.waiting_reviews
    if len(waiting) >= WAITING_REVIEWS_KEPT:
        return False
    raw = msgspec.json.encode(record).decode() if isinstance(record, msgspec.Struct) else None
    if raw is None:  # a record read by pydantic (`parse_own`'s fallback)
        raw = str(record.model_dump_json())
    digest = event_digest(record.event_id)
    until = max(ts, ctx.event_time if ctx.event_time is not None else ts) + LEASE_WAIT_MS
    waiting.append(
        WaitingReview(raw, record.task_id, record.reviewer_id, ts, until, digest, refusal)
    )
    armed = state.review_wait_timer
    if armed is None or until < armed:
        state.review_wait_timer = until
        result.timers.append(until)
    return True


def _leased(state: State, lease: Any, ctx: Context, result: StepResult) -> bool:
    """Apply the reviews that waited for this lease (its reviewer's, of its task, stamped
    between the lease's `ts` and its end), in `ts` order, each at its own `ts` as if read after
    the lease. What one of them is refused now goes to the DLQ as its letter, not the lease's.
    True when one applied: `step` then arms the version's timers, as after a review."""
    ready = [
        waiting
        for waiting in state.waiting_reviews
        if waiting.task_id == lease.task_id
        and waiting.reviewer_id == lease.reviewer_id
        and lease.ts <= waiting.ts <= lease.expires_ts
    ]
    if not ready:
        return False
    state.waiting_reviews = [waiting for waiting in state.waiting_reviews if waiting not in ready]
    applied = False
    for waiting in sorted(ready, key=lambda item: (item.ts, item.digest)):
        review = parse_own(REVIEWS, waiting.raw)
        before = len(result.dead_letters)
        if on_review(state, review, waiting.ts, ctx, result):
            human_input.remember(state, REVIEWS, review)
            result.timers += keep_after_input(state, waiting.ts, ctx)
            applied = True
        for error_class, message in result.dead_letters[before:]:
            result.letters_of.append((REVIEWS, error_class, message, waiting.raw, waiting.ts))
        del result.dead_letters[before:]
    return applied


def fire_waiting(state: State, ts: int, result: StepResult) -> None:
    """The wait of the oldest waiting reviews ended at `ts` with no lease read for them: each is
    refused (`conflict`, to the DLQ with its own record) and forgotten, so the same record sent
    again once its reviewer holds a lease (`dlq replay`) applies. The next wait's timer armed."""
    armed = state.review_wait_timer
    if armed is None or ts < armed:
        return
    state.review_wait_timer = None
    kept = []
    for waiting in state.waiting_reviews:
        if waiting.until > ts:
            kept.append(waiting)
            continue
        state.events.pop(waiting.digest, None)
        message = (
            f"{waiting.refusal}; no lease of it stamped at or before it was read within "
            f"{LEASE_WAIT_MS} ms of event time"
        )
        result.letters_of.append((REVIEWS, "conflict", message, waiting.raw, waiting.ts))
    state.waiting_reviews = kept
    if kept:
        until = min(waiting.until for waiting in kept)
        state.review_wait_timer = until
        result.timers.append(until)
