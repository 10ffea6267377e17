"""Human input, replays and order: a review or appeal applied once, for as long as the
version's record is kept, and the newest human decision winning whatever the arrival order
(issue 27 point 4; docs/moderation.md, "Human input: replays and order").

Contract: docs/CONTRACT.md, "Outcomes": a human outcome "is sticky: re-evaluation and later
evidence do not change it; only another human decision (review or appeal) does." "v1.1
additions", "Human decisions apply at any age" (a retired record still refuses a re-sent input).

Proved by:
    tests/operators/test_human_inputs.py::test_a_review_re_sent_after_retirement_changes_nothing
    tests/operators/test_human_inputs.py::test_a_duplicate_is_dropped_the_same_way_before_and_after_retirement
    tests/operators/test_human_inputs.py::test_an_older_review_arriving_after_a_newer_one_changes_nothing
    tests/operators/test_human_inputs.py::test_two_reviews_in_the_same_millisecond_end_the_same_in_either_order
    tests/operators/test_human_inputs.py::test_an_appeal_re_sent_after_retirement_opens_no_second_task
    tests/operators/test_human_inputs.py::test_past_the_bound_the_oldest_digests_go_and_their_reviews_are_still_refused
    tests/operators/test_human_inputs.py::test_the_newest_review_wins_whatever_the_arrival_order

Signatures carry no expiry or audience, and old signed reviews sit in `review.decisions`, the
DLQ's `raw` and the archive. The full state's `events` makes a re-sent record a duplicate, but a
retired record (rules/retention.py `retire`) keeps no event ids: so every human input applied
to a version is also remembered here, as a short digest in `human_ids`, which the retired
record keeps. Beside it `human.ts`, the newest applied review's `ts`: a review stamped before
it changes nothing, so even an input whose digest left the bounded list cannot steer the version.
"""

from __future__ import annotations

from typing import Any

from modstream.moderation.state import (
    HUMAN_IDS_KEPT,
    HUMAN_TOPICS,
    HumanDecision,
    State,
    event_digest,
)


def human_id(event_id: str) -> str:
    """The digest a version keeps of one human input's event id: the same as `events` keeps
    (`version_state.event_digest`; among at most HUMAN_IDS_KEPT ids per version an accidental
    collision is about 2^-53 likely)."""
    return event_digest(event_id)


def replayed(state: State, topic: str, record: Any) -> bool:
    """Whether this review or appeal was applied to the version already: a duplicate, which
    changes nothing and emits nothing, as a duplicate in the full state's `events` does."""
    return topic in HUMAN_TOPICS and human_id(record.event_id) in state.human_ids


def remember(state: State, topic: str, record: Any) -> None:
    """Keep the digest of a human input just applied; past `HUMAN_IDS_KEPT` the oldest go (an
    older review re-sent then is refused by `superseded`, still changing nothing)."""
    if topic not in HUMAN_TOPICS:
        return
    kept = state.human_ids
    kept.append(human_id(record.event_id))
    del kept[:-HUMAN_IDS_KEPT]


def in_force(record: Any, ts: int) -> HumanDecision:
    """The human decision a review applies: its outcome and reason, its `ts`, and its digest,
    which orders two reviews stamped in the same millisecond."""
    return HumanDecision(record.outcome, record.reason, ts, human_id(record.event_id))


def superseded(state: State, ts: int, event_id: str) -> int | None:
    """The `ts` of the human decision in force when a review (`ts`, `event_id`) comes before it
    and so changes nothing, else None. Reviews are ordered by `ts`, then by digest, so the
    outcome never depends on the arrival order (a decision stored before schema 4 has no digest:
    a review at its `ts` comes after it)."""
    human = state.human
    if human is None or ts > human.ts:
        return None
    if ts < human.ts or human_id(event_id) < (human.digest or ""):
        return human.ts
    return None


def superseded_message(record: Any, in_force_ts: int) -> str:
    """The DLQ message of a review that comes before the human decision in force (`stale`)."""
    return (
        f"moderation: review.decisions.ts: review for task {record.task_id} of content version "
        f"{record.content_version} is not newer than the human decision in force (ts "
        f"{in_force_ts}; at equal ts the greater event-id digest wins): the newest human "
        "decision wins, so it changes nothing"
    )
