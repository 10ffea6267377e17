"""Human input (modstream/moderation/rules/human_input.py): a re-sent review or appeal changes
nothing for as long as the version's record is kept, and the newest human decision wins whatever the
arrival order (issue 27 point 4)."""

from __future__ import annotations

import dataclasses
import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from modstream.moderation.rules.human_input import human_id
from modstream.moderation.state import HUMAN_IDS_KEPT, STATE_TTL_MS
from modstream.testing.records import ONE_SECOND, T0
from modstream.testing.versions import CTX, Version, appeal, image, image_evidence, review

# The measurement of issue 27 point 4 ran with a 20 s state TTL.
SHORT_TTL = dataclasses.replace(CTX, state_ttl_ms=20 * ONE_SECOND)
FORTY_DAYS = 40 * 86_400_000


def decided(ctx: object = CTX) -> Version:
    """An image on a comment surface, decided ALLOW on its evidence."""
    version = Version(ctx)  # type: ignore[arg-type]
    version.upload(**image(surface="comment"))
    for record in image_evidence("c-1", T0 + 1):
        version.send("detector.results", record)
    assert version.last["outcome"] == "ALLOW"
    return version


def retire(version: Version, at: int) -> None:
    version.fire_until(at)
    assert version.state is not None and version.state.retired
    assert version.state.events == {}  # the event ids went: only the digests stay


def unchanged_by(version: Version, topic: str, record: dict[str, object]) -> list[str]:
    """Send `record`; assert it emitted nothing and left the human outcome and revision as they
    were; return the DLQ classes it produced."""
    before = (len(version.outputs), version.state.human if version.state else None)
    revision = version.last["decision_revision"]
    letters = len(version.dead_letters)
    version.send(topic, record)
    assert version.state is not None
    assert (len(version.outputs), version.state.human) == before
    assert version.last["decision_revision"] == revision
    return [error_class for error_class, _ in version.dead_letters[letters:]]


def test_a_review_re_sent_after_retirement_changes_nothing() -> None:
    """The measured sequence: ALLOW (e1), BLOCK (e2), the state retired, e1 re-sent byte for
    byte 32 s later. It was applied as a new ALLOW revision over the later BLOCK."""
    version = decided(SHORT_TTL)
    allow = review("t-1", "ALLOW", at=T0 + 2 * ONE_SECOND)
    block = review("t-2", "BLOCK", at=T0 + 3 * ONE_SECOND)
    version.send("review.decisions", allow)
    version.send("review.decisions", block)
    assert (version.last["outcome"], version.last["trigger"]) == ("BLOCK", "review")
    retire(version, T0 + 3 * ONE_SECOND + SHORT_TTL.state_ttl_ms)
    assert version.state is not None
    assert version.state.human_ids == [human_id(allow["event_id"]), human_id(block["event_id"])]
    for record in (allow, block):  # dropped as duplicates, as in the full state: no DLQ row
        assert unchanged_by(version, "review.decisions", record) == []
    assert version.state.human.outcome == "BLOCK"


def test_a_duplicate_is_dropped_the_same_way_before_and_after_retirement() -> None:
    live = decided()
    first = review("t-1", "BLOCK", at=T0 + 2 * ONE_SECOND)
    live.send("review.decisions", first)
    assert unchanged_by(live, "review.decisions", first) == []
    retire(live, T0 + FORTY_DAYS)
    assert unchanged_by(live, "review.decisions", first) == []


def test_an_older_review_arriving_after_a_newer_one_changes_nothing() -> None:
    version = decided()
    newer = review("t-2", "BLOCK", at=T0 + 20 * ONE_SECOND)
    older = review("t-1", "ALLOW", at=T0 + 10 * ONE_SECOND)
    version.send("review.decisions", newer)
    assert unchanged_by(version, "review.decisions", older) == ["stale"]
    [(_, message)] = version.dead_letters
    assert "review.decisions.ts" in message and str(T0 + 20 * ONE_SECOND) in message
    assert unchanged_by(version, "review.decisions", older) == []  # now a duplicate


def test_an_older_review_arriving_after_retirement_changes_nothing() -> None:
    version = decided()
    version.send("review.decisions", review("t-2", "BLOCK", at=T0 + 20 * ONE_SECOND))
    retire(version, T0 + FORTY_DAYS)
    older = review("t-1", "ALLOW", at=T0 + 10 * ONE_SECOND)
    assert unchanged_by(version, "review.decisions", older) == ["stale"]
    # A newer review still applies to the retired record, with the next revision.
    revision = version.last["decision_revision"]
    version.send("review.decisions", review("t-3", "ALLOW", at=T0 + FORTY_DAYS))
    assert (version.last["outcome"], version.last["decision_revision"]) == ("ALLOW", revision + 1)


def test_two_reviews_in_the_same_millisecond_end_the_same_in_either_order() -> None:
    """Ordered by their event ids' digests: the greater one is in force, whichever came last."""
    same_ts = T0 + 10 * ONE_SECOND
    block, allow = review("t-1", "BLOCK", at=same_ts), review("t-2", "ALLOW", at=same_ts)
    winner = max((block, allow), key=lambda record: human_id(record["event_id"]))
    for first, second in ((block, allow), (allow, block)):
        version = decided()
        version.send("review.decisions", first)
        version.send("review.decisions", second)
        assert version.state is not None
        assert version.state.human.outcome == winner["outcome"]
        assert version.last["outcome"] == winner["outcome"]
        assert [c for c, _ in version.dead_letters] == ([] if second is winner else ["stale"])


def test_an_appeal_re_sent_after_retirement_opens_no_second_task() -> None:
    version = decided()
    filed = appeal("a-1", at=T0 + 20 * ONE_SECOND)
    version.send("moderation.appeals", filed)
    version.send("review.decisions", review("appeal-a-1", "BLOCK", at=T0 + 30 * ONE_SECOND))
    assert version.last["trigger"] == "appeal" and version.state is not None
    assert version.state.appeal_id is None
    retire(version, T0 + FORTY_DAYS)
    tasks = len(version.of("review.tasks"))
    assert unchanged_by(version, "moderation.appeals", filed) == []
    assert len(version.of("review.tasks")) == tasks and version.state.appeal_id is None


def test_an_older_appeal_opens_its_task_and_its_newer_review_decides() -> None:
    """An appeal is a request, not a decision: it opens its task whatever its `ts`. Its review
    is a human decision like any other: newer than the one in force, it decides (`appeal`)."""
    version = decided()
    version.send("review.decisions", review("t-1", "BLOCK", at=T0 + 20 * ONE_SECOND))
    version.send("moderation.appeals", appeal("a-1", at=T0 + 15 * ONE_SECOND))
    assert [t["kind"] for t in version.of("review.tasks")][-1] == "appeal"
    version.send("review.decisions", review("appeal-a-1", "ALLOW", at=T0 + 40 * ONE_SECOND))
    assert (version.last["trigger"], version.last["outcome"]) == ("appeal", "ALLOW")
    assert version.state is not None and version.state.appeal_id is None


def test_an_appeals_review_older_than_the_decision_in_force_leaves_the_appeal_open() -> None:
    version = decided()
    version.send("moderation.appeals", appeal("a-1", at=T0 + 15 * ONE_SECOND))
    version.send("review.decisions", review("t-2", "BLOCK", at=T0 + 30 * ONE_SECOND))
    stale_answer = review("appeal-a-1", "ALLOW", at=T0 + 25 * ONE_SECOND)
    assert unchanged_by(version, "review.decisions", stale_answer) == ["stale"]
    assert version.state is not None and version.state.appeal_id == "a-1"
    version.send("review.decisions", review("appeal-a-1", "ALLOW", at=T0 + 35 * ONE_SECOND))
    assert (version.last["trigger"], version.last["outcome"]) == ("appeal", "ALLOW")


def test_past_the_bound_the_oldest_digests_go_and_their_reviews_are_still_refused() -> None:
    version = decided()
    reviews = [
        review(f"t-{n}", "BLOCK" if n % 2 else "ALLOW", at=T0 + (n + 2) * ONE_SECOND)
        for n in range(HUMAN_IDS_KEPT + 3)
    ]
    for record in reviews:
        version.send("review.decisions", record)
    retire(version, T0 + FORTY_DAYS)
    assert version.state is not None and len(version.state.human_ids) == HUMAN_IDS_KEPT
    assert human_id(reviews[0]["event_id"]) not in version.state.human_ids
    assert unchanged_by(version, "review.decisions", reviews[0]) == ["stale"]
    assert unchanged_by(version, "review.decisions", reviews[-1]) == []


@settings(max_examples=60, deadline=None)
@given(
    order=st.permutations(range(4)),
    seconds=st.lists(st.integers(min_value=2, max_value=4), min_size=4, max_size=4),
    retired_after=st.integers(min_value=0, max_value=4),
)
def test_the_newest_review_wins_whatever_the_arrival_order(
    order: list[int], seconds: list[int], retired_after: int
) -> None:
    """Four reviews (some perhaps in the same millisecond), sent in any order, the version
    retired after any number of them, each then re-sent: the outcome in force is the newest
    review's (by `ts`, then by digest), and the last decision says so."""
    outcomes = ("ALLOW", "BLOCK", "ALLOW", "BLOCK")
    reviews = [review(f"t-{n}", outcomes[n], at=T0 + seconds[n] * ONE_SECOND) for n in range(4)]
    newest = max(reviews, key=lambda record: (record["ts"], human_id(record["event_id"])))
    version = decided()
    for sent, n in enumerate(itertools.chain(order, order)):
        if sent == retired_after:
            retire(version, T0 + FORTY_DAYS + STATE_TTL_MS)
        version.send("review.decisions", reviews[n])
    assert version.state is not None
    assert version.state.human.ts == newest["ts"]
    assert version.state.human.outcome == version.last["outcome"] == newest["outcome"]
