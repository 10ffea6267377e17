"""Review grants and task leases as the moderation step checks them (modstream/review/access.py):
a review applies only under a grant of its task's queue and a lease of its task."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from modstream.moderation.state import LEASE_WAIT_MS, WAITING_REVIEWS_KEPT, Lease
from modstream.moderation.step import Context, on_timer
from modstream.review.access import ReviewGrants, issued_queue, state_entry
from modstream.testing.records import T0
from modstream.testing.versions import CTX, Version, appeal, image, image_evidence, review

LEASE_MS = 900_000


def grants(*held: tuple[str, list[str], int]) -> ReviewGrants:
    """(reviewer, queues, from ts) grants."""
    table = ReviewGrants()
    for reviewer, queues, ts in held:
        table.apply(reviewer, queues, ts)
    return table


def checked(table: ReviewGrants) -> Context:
    return dataclasses.replace(CTX, grants=table)


def lease(reviewer: str, at: int, task_id: str = "appeal-a-1", **fields: Any) -> dict[str, Any]:
    return {
        "event_id": f"lease-{task_id}-{reviewer}-{at}",
        "task_id": task_id,
        "queue": "appeals",
        "content_id": "c-1",
        "content_version": 1,
        "reviewer_id": reviewer,
        "ts": at,
        "expires_ts": at + LEASE_MS,
        **fields,
    }


def appealed(ctx: Context) -> Version:
    """A version blocked by evidence whose author appealed: task `appeal-a-1`, queue appeals."""
    version = Version(ctx)
    version.upload(**image(surface="public_post"))
    for record in image_evidence("c-1", T0 + 1, nsfw=0.99):
        version.send("detector.results", record)
    version.send("moderation.appeals", appeal(at=T0 + 100))
    assert version.of("review.tasks")[-1]["task_id"] == "appeal-a-1"
    assert version.last["outcome"] == "BLOCK"
    return version


def allow(reviewer: str, at: int) -> dict[str, Any]:
    return review("appeal-a-1", "ALLOW", at=at, reviewer_id=reviewer)


def test_a_review_under_a_grant_and_a_lease_applies() -> None:
    version = appealed(checked(grants(("r1", ["appeals"], T0))))
    version.send("review.leases", lease("r1", T0 + 200))
    version.send("review.decisions", allow("r1", T0 + 300))
    assert version.dead_letters == []
    assert (version.last["trigger"], version.last["outcome"]) == ("appeal", "ALLOW")


def test_a_review_without_a_grant_goes_to_the_dlq_changes_nothing_and_applies_once_granted() -> (
    None
):
    table = grants(("r1", ["general"], T0))
    version = appealed(checked(table))
    # Neither the lease nor the review of a reviewer without a grant of queue appeals applies.
    version.send("review.leases", lease("r1", T0 + 200))
    version.send("review.decisions", allow("r1", T0 + 300))
    assert [error_class for error_class, _ in version.dead_letters] == ["signature"] * 2
    assert "holds no grant of queue 'appeals'" in version.dead_letters[0][1]
    assert "holds no grant of the task's queue" in version.dead_letters[1][1]
    assert version.last["outcome"] == "BLOCK" and version.state is not None
    assert version.state.human is None and version.state.leases == {}
    # Granted later, the same records sent again (`dlq replay`) apply: nothing was kept of them.
    table.apply("r1", ["appeals"], T0 + 150)
    version.send("review.leases", lease("r1", T0 + 200))
    version.send("review.decisions", allow("r1", T0 + 300))
    assert version.last["outcome"] == "ALLOW"


def test_a_review_without_the_lease_or_after_it_ended_is_a_conflict() -> None:
    version = appealed(checked(grants(("r1", ["appeals"], T0), ("r2", ["appeals"], T0))))
    version.send("review.decisions", allow("r1", T0 + 300))  # no lease at all: it waits
    version.send("review.leases", lease("r1", T0 + 400))  # stamped after it: not its lease
    version.send("review.decisions", allow("r2", T0 + 500))  # r1 holds it: refused at once
    ended = T0 + 400 + LEASE_MS + 1
    version.send("review.decisions", allow("r1", ended))  # r1's ended: it waits for a renewal
    assert [error_class for error_class, _ in version.dead_letters] == ["conflict"]
    assert "holds no lease of it" in version.dead_letters[0][1]
    assert version.state is not None and len(version.state.waiting_reviews) == 2
    version.fire_until(ended + LEASE_WAIT_MS)  # no lease came for either within the wait
    assert [error_class for error_class, _ in version.dead_letters] == ["conflict"] * 3
    assert all(
        "within 60000 ms of event time" in message for _, message in version.dead_letters[1:]
    )
    assert version.last["outcome"] == "BLOCK"
    assert version.state.waiting_reviews == [] and version.state.review_wait_timer is None


def test_a_review_read_before_its_lease_waits_for_it_and_decides_as_in_ts_order() -> None:
    """A console sends the lease, then the review; read from two topics, the review may come
    first (human input never holds event time). It waits for the lease and then decides as
    the two read in `ts` order do (replay): same decisions, same letters (none)."""
    table = grants(("r1", ["appeals"], T0))
    in_order, swapped = appealed(checked(table)), appealed(checked(table))
    in_order.send("review.leases", lease("r1", T0 + 200))
    in_order.send("review.decisions", allow("r1", T0 + 201))
    swapped.send("review.decisions", allow("r1", T0 + 201))
    assert swapped.last["outcome"] == "BLOCK" and swapped.dead_letters == []  # waiting
    assert swapped.state is not None and swapped.state.review_wait_timer == T0 + 201 + LEASE_WAIT_MS
    swapped.send("review.decisions", allow("r1", T0 + 201))  # a duplicate while it waits
    swapped.send("review.leases", lease("r1", T0 + 200))
    assert swapped.dead_letters == [] and in_order.dead_letters == []
    assert swapped.decisions == in_order.decisions
    assert (swapped.last["trigger"], swapped.last["outcome"]) == ("appeal", "ALLOW")
    assert swapped.state is not None and in_order.state is not None
    assert swapped.state.human == in_order.state.human
    assert swapped.state.human_ids == in_order.state.human_ids
    assert swapped.state.ttl == in_order.state.ttl and swapped.state.waiting_reviews == []
    swapped.fire_until(T0 + 201 + LEASE_WAIT_MS)  # the wait's timer finds nothing waiting
    assert swapped.dead_letters == [] and swapped.decisions == in_order.decisions


def test_a_review_whose_lease_never_comes_is_refused_when_its_wait_ends() -> None:
    """Refused (`conflict`) with its own record once LEASE_WAIT_MS of event time passed, and
    forgotten: sent again under a lease (`dlq replay`), it applies."""
    version = appealed(checked(grants(("r1", ["appeals"], T0))))
    result = version.send("review.decisions", allow("r1", T0 + 300))
    assert result.timers == [T0 + 300 + LEASE_WAIT_MS] and version.dead_letters == []
    version.fire_until(T0 + 300 + LEASE_WAIT_MS - 1)
    assert version.dead_letters == []
    fired = version.fire(T0 + 300 + LEASE_WAIT_MS)
    [(topic, error_class, message, raw, ts)] = fired.letters_of
    assert (topic, error_class, ts) == ("review.decisions", "conflict", T0 + 300)
    assert "reviewer r1 holds no lease of it at ts" in message
    assert json.loads(raw)["event_id"] == allow("r1", T0 + 300)["event_id"]
    assert version.last["outcome"] == "BLOCK"
    version.send("review.leases", lease("r1", T0 + 250))
    version.send("review.decisions", allow("r1", T0 + 300))  # the same record, sent again
    assert (version.last["trigger"], version.last["outcome"]) == ("appeal", "ALLOW")


def test_a_review_read_late_waits_from_the_event_time_it_was_read_at() -> None:
    """Read when the operator's event time is far past its `ts` (human input never holds event
    time), a review waits LEASE_WAIT_MS from then: counted from its `ts`, the wait would be over
    before the lease read next could end it."""
    table = grants(("r1", ["appeals"], T0))
    version = appealed(checked(table))
    read_at = T0 + 500_000
    version.ctx = dataclasses.replace(version.ctx, event_time=read_at)
    result = version.send("review.decisions", allow("r1", T0 + 300))
    assert result.timers == [read_at + LEASE_WAIT_MS]
    version.fire_until(read_at + LEASE_WAIT_MS - 1)
    assert version.dead_letters == []
    version.send("review.leases", lease("r1", T0 + 250))
    assert (version.last["trigger"], version.last["outcome"], version.last["ts"]) == (
        "appeal",
        "ALLOW",
        T0 + 300,
    )
    assert version.dead_letters == []


def test_at_most_so_many_reviews_wait_and_a_lease_applies_only_its_own() -> None:
    version = appealed(checked(grants(("r1", ["appeals"], T0), ("r2", ["appeals"], T0))))
    for index in range(WAITING_REVIEWS_KEPT + 1):
        version.send("review.decisions", allow("r2", T0 + 300 + index))
    assert [error_class for error_class, _ in version.dead_letters] == ["conflict"]
    assert version.state is not None
    assert len(version.state.waiting_reviews) == WAITING_REVIEWS_KEPT
    version.send("review.leases", lease("r1", T0 + 200))  # another reviewer's lease
    assert len(version.state.waiting_reviews) == WAITING_REVIEWS_KEPT
    assert version.last["outcome"] == "BLOCK"


def test_a_lease_held_by_another_reviewer_is_refused_until_it_ends() -> None:
    version = appealed(checked(grants(("r1", ["appeals"], T0), ("r2", ["appeals"], T0))))
    version.send("review.leases", lease("r1", T0 + 200))
    version.send("review.leases", lease("r2", T0 + 300))
    assert [error_class for error_class, _ in version.dead_letters] == ["conflict"]
    assert "leased to another reviewer" in version.dead_letters[0][1]
    later = T0 + 200 + LEASE_MS
    version.send("review.leases", lease("r2", later))  # r1's lease ended: r2 takes the task
    version.send("review.decisions", allow("r2", later + 1))
    assert version.last["outcome"] == "ALLOW" and len(version.dead_letters) == 1


def test_a_lease_must_name_the_task_and_queue_the_job_issued() -> None:
    version = appealed(checked(grants(("r1", ["*"], T0))))
    version.send("review.leases", lease("r1", T0 + 200, queue="general"))
    version.send("review.leases", lease("r1", T0 + 201, task_id="appeal-other"))
    assert [error_class for error_class, _ in version.dead_letters] == ["conflict", "conflict"]
    assert version.state is not None and issued_queue(version.state, "appeal-a-1", "appeals")


def test_a_revoked_grant_refuses_the_decision_of_a_lease_taken_before() -> None:
    table = grants(("r1", ["appeals"], T0))
    version = appealed(checked(table))
    version.send("review.leases", lease("r1", T0 + 200))
    table.apply("r1", [], T0 + 250)  # revoked
    version.send("review.decisions", allow("r1", T0 + 300))
    assert [error_class for error_class, _ in version.dead_letters] == ["signature"]
    assert version.last["outcome"] == "BLOCK"


def test_a_proactive_review_needs_a_grant_of_queue_external() -> None:
    table = grants(("r1", ["appeals"], T0), ("lead-reviewer", ["external"], T0))
    version = appealed(checked(table))
    version.send("review.decisions", review("t-ext", "ALLOW", at=T0 + 300, reviewer_id="r1"))
    assert [error_class for error_class, _ in version.dead_letters] == ["signature"]
    version.send(
        "review.decisions", review("t-ext", "ALLOW", at=T0 + 400, reviewer_id="lead-reviewer")
    )
    assert (version.last["trigger"], version.last["outcome"]) == ("review", "ALLOW")


def test_unchecked_context_applies_reviews_as_before() -> None:
    version = appealed(CTX)  # grants None: MODSTREAM_INSECURE_UNGRANTED_REVIEWS
    version.send("review.decisions", allow("anyone", T0 + 300))
    assert version.last["outcome"] == "ALLOW"


def test_a_retired_record_keeps_its_leases() -> None:
    ctx = dataclasses.replace(checked(grants(("r1", ["appeals"], T0))), state_ttl_ms=60_000)
    version = appealed(ctx)
    version.send("review.leases", lease("r1", T0 + 200))
    version.fire_until(T0 + 10 * 60_000)
    assert version.state is not None and version.state.retired
    assert version.state.leases == {"appeal-a-1": Lease("r1", T0 + 200 + LEASE_MS)}
    version.send("review.decisions", allow("r1", T0 + 11 * 60_000))
    assert version.last["outcome"] == "ALLOW" and on_timer(None, T0, ctx).state is None


def test_grants_are_read_at_the_review_ts_and_rebuilt_from_broadcast_state() -> None:
    table = grants(("r1", ["a"], T0), ("r1", ["a", "b"], T0 + 100), ("r1", [], T0 + 200))
    assert [table.may("r1", "b", ts) for ts in (T0 - 1, T0, T0 + 100, T0 + 200)] == [
        False,
        False,
        True,
        False,
    ]
    assert not table.apply("r1", ["a"], T0)  # redelivered: nothing new
    items = [
        state_entry(reviewer, queues, ts)
        for reviewer, held in table.history.items()
        for ts, queues in held
    ]
    assert ReviewGrants.from_state([*items, ("revision", "3")]).history == table.history
