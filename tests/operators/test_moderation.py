"""The moderation step: every contract rule on one content version, and its properties."""

from __future__ import annotations

import dataclasses
import itertools
import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from modstream.contract import parse
from modstream.moderation import state_schema
from modstream.moderation.step import (
    ORPHAN_TTL_MS,
    REVIEW_RETENTION_MS,
    STATE_TTL_MS,
    TOMBSTONE_TTL_MS,
    sha256_hex,
)
from modstream.testing.policies import global_document
from modstream.testing.records import ONE_SECOND, T0, delete, evidence, upload
from modstream.testing.versions import (
    Version,
    appeal,
    context,
    image,
    image_evidence,
    review,
    with_clock,
)


def test_fast_gate_then_evidence_then_approved_with_provenance() -> None:
    """Issue 27, point 9: an image is never public before its integrity gate (media_check)
    passed, even on a low-risk surface (the shipped policy gave it PROVISIONAL_ALLOW)."""
    version = Version()
    version.upload(**image(surface="comment"))
    gate = version.last
    assert (gate["trigger"], gate["outcome"], gate["state"], gate["decision_revision"]) == (
        "fast_gate",
        "PENDING",
        "scanning",
        1,
    )
    assert "expires_ts" not in gate
    assert gate["completeness"] == {"required": 2, "received": 0, "unknown": []}
    for record in image_evidence("c-1", T0 + ONE_SECOND):
        version.send("detector.results", record)
    final = version.last
    assert (final["trigger"], final["outcome"], final["state"], final["decision_revision"]) == (
        "evidence",
        "ALLOW",
        "approved",
        2,
    )
    assert final["completeness"] == {"required": 2, "received": 2, "unknown": []}
    assert {e["detector"] for e in final["evidence"]} == {"nsfw_image", "media_check"}
    assert final["policy_id"] == "global" and final["policy_version"] == 1
    assert final["decision_id"] == sha256_hex("decision", "c-1", 1, 2)
    # Public only once every check answered.
    actions = version.of("moderation.actions")
    assert [(a["decision_revision"], a["visibility"]) for a in actions] == [
        (1, "pending"),
        (2, "public"),
    ]
    assert actions[0]["action_id"] == sha256_hex("c-1", 1, 1)


def test_high_risk_surface_waits_pending_and_never_allows_before_complete() -> None:
    version = Version()
    version.upload(**image(surface="public_post"))
    assert (version.last["outcome"], version.last["state"]) == ("PENDING", "scanning")
    version.send("detector.results", image_evidence("c-1", T0 + 1)[0])
    assert len(version.decisions) == 1  # half the evidence: nothing changed
    version.send("detector.results", image_evidence("c-1", T0 + 1)[1])
    assert version.last["outcome"] == "ALLOW"
    assert [a["visibility"] for a in version.of("moderation.actions")] == ["pending", "public"]


def test_duplicates_change_nothing() -> None:
    version = Version()
    version.upload(**image(surface="comment"))
    version.upload(**image(surface="comment"))  # same event id
    version.send("content.versions", upload(event_id="other", **image(surface="dm")))
    first = image_evidence("c-1", T0 + 1)[0]
    version.send("detector.results", first)
    before = list(version.outputs)
    version.send("detector.results", first)  # same event id
    version.send("detector.results", {**first, "event_id": "new-id", "scores": {"nsfw": 0.99}})
    assert version.outputs == before


def test_evidence_before_the_upsert_is_kept_and_joined() -> None:
    version = Version()
    for record in image_evidence("c-1", T0 - 5 * ONE_SECOND, nsfw=0.8):
        version.send("detector.results", record)
    assert version.decisions == []
    version.upload(**image(surface="comment"))
    # PENDING until media_check is in too (the nsfw score alone already asks a review).
    assert [d["trigger"] for d in version.decisions] == ["fast_gate", "evidence", "evidence"]
    assert [d["outcome"] for d in version.decisions] == ["PENDING", "PENDING", "RESTRICT"]
    assert (version.last["outcome"], version.last["restriction"]) == ("RESTRICT", "age_gate")
    tasks = version.of("review.tasks")
    assert [(t["queue"], t["kind"], t["priority"]) for t in tasks] == [("adult", "review", 2)]
    assert version.last["state"] == "pending_review"


def test_segments_complete_only_when_every_segment_reported() -> None:
    version = Version()
    version.upload(**image(modality="video", mime_type="video/mp4", surface="comment", segments=3))
    for segment in (0, 1):
        for record in image_evidence("c-1", T0 + segment * 10, segment_id=segment):
            version.send("detector.results", record)
    assert version.last["state"] == "scanning"
    assert version.last["completeness"]["required"] == 6
    # media_check first, so the decision that changes comes with the last piece of evidence.
    for record in reversed(image_evidence("c-1", T0 + 50, segment_id=2, nsfw=0.99)):
        version.send("detector.results", record)
    assert version.last["completeness"] == {"required": 6, "received": 6, "unknown": []}
    assert version.last["outcome"] == "RESTRICT"  # comment: age gate, not the public block


def test_single_segment_null_and_zero_are_the_same_segment() -> None:
    version = Version()
    version.upload(**image(surface="comment"))
    nsfw, media = image_evidence("c-1", T0 + 1)
    version.send("detector.results", nsfw)
    version.send("detector.results", {**media, "segment_id": 0})
    assert version.last["completeness"]["received"] == 2


def test_deadline_with_missing_evidence_expires_naming_the_detector() -> None:
    version = Version()
    version.upload(**image(surface="public_post"))
    version.send("detector.results", image_evidence("c-1", T0 + 1)[1])
    deadline = T0 + 30_000
    assert deadline in version.timers
    version.fire(deadline)
    last = version.last
    assert (last["trigger"], last["state"], last["ts"], last["outcome"]) == (
        "deadline",
        "expired",
        deadline,
        "PENDING",
    )
    assert last["completeness"]["unknown"] == ["nsfw_image"]
    assert "unknown-high-risk-visual" in last["matched_rules"]


DEADLINE = T0 + 30_000  # image: upsert ts + 30 s
GRACE = 5_000


def test_a_deadline_reached_while_catching_up_waits_and_evidence_that_comes_leaves_nothing() -> (
    None
):
    """A backlog: event time reaches the deadline an hour behind the processing clock. The
    detectors were asked only now, so the deadline waits 30 s + grace from now; the evidence
    comes before that, and no deadline revision is ever made (docs/moderation.md, "Time")."""
    hour_later = T0 + 3_600_000
    version = Version(with_clock(hour_later))
    version.upload(**image(surface="public_post"))
    version.send("detector.results", image_evidence("c-1", T0 + 1)[1])
    version.fire(DEADLINE)
    assert version.state is not None and version.state.deadline_timer == hour_later + 35_000
    assert hour_later + 35_000 in version.timers
    assert [d["trigger"] for d in version.decisions] == ["fast_gate"]
    version.send("detector.results", image_evidence("c-1", T0 + 2)[0])
    version.fire(hour_later + 35_000)
    assert [d["trigger"] for d in version.decisions] == ["fast_gate", "evidence"]
    assert version.last["state"] != "expired"


def test_a_waiting_deadline_decides_at_its_own_ts_when_the_detector_never_answers() -> None:
    hour_later = T0 + 3_600_000
    version = Version(with_clock(hour_later))
    version.upload(**image(surface="public_post"))
    version.fire(DEADLINE)
    assert version.decisions[-1]["trigger"] == "fast_gate"
    version.ctx = with_clock(hour_later + 36_000)  # live again, and the time is up
    version.fire(hour_later + 35_000)
    last = version.last
    assert (last["trigger"], last["state"], last["ts"]) == ("deadline", "expired", DEADLINE)
    assert last["completeness"]["unknown"] == ["media_check", "nsfw_image"]


def test_a_live_deadline_waits_for_the_grace_and_on_time_evidence_leaves_nothing() -> None:
    """Live: asked at T0, the deadline waits until T0 + 30 s + grace of processing time; the
    answer stamped within the deadline that reaches the job in the grace completes it."""
    version = Version(with_clock(T0))
    version.upload(**image(surface="public_post"))
    version.ctx = with_clock(DEADLINE + 1_000)
    version.fire(DEADLINE)
    assert version.state is not None and version.state.deadline_timer == DEADLINE + GRACE
    for record in image_evidence("c-1", DEADLINE - 10):
        version.send("detector.results", record)
    version.ctx = with_clock(DEADLINE + GRACE)
    version.fire(DEADLINE + GRACE)
    assert [d["trigger"] for d in version.decisions] == ["fast_gate", "evidence"]


def test_a_deadline_event_time_reached_ahead_of_the_clock_decides_and_never_spins() -> None:
    """Event time ahead of the processing clock (input stamped within the allowed future skew):
    the deadline's wait ends at a processing time event time has already passed. Re-armed
    there, its timer fired again in the same watermark, and again, a loop on the task thread
    until the clock caught up (the fuzz run's 37,660 firings). It decides at once, as replay."""
    version = Version(with_clock(T0))  # asked at T0: the wait ends at DEADLINE + GRACE
    version.upload(**image(surface="public_post"))
    version.fire(DEADLINE)  # clock still T0, the watermark past the wait's end
    assert version.state is not None and version.state.deadline_timer == DEADLINE + GRACE
    version.fire(DEADLINE + GRACE)  # fired again in the same watermark, the clock unmoved
    last = version.last
    assert (last["trigger"], last["state"], last["ts"]) == ("deadline", "expired", DEADLINE)
    assert version.state is not None and version.state.deadline_timer is None


def test_evidence_stamped_after_a_waiting_deadline_comes_after_the_deadline_as_in_replay() -> None:
    replayed = Version()
    waited = Version(with_clock(T0))
    for version in (replayed, waited):
        version.upload(**image(surface="public_post"))
        version.ctx = dataclasses.replace(version.ctx, clock_ms=DEADLINE + 1_000)
        version.fire(DEADLINE)
        for record in image_evidence("c-1", DEADLINE + 2_000):  # over its deadline
            version.send("detector.results", record)
    assert waited.decisions == replayed.decisions
    assert [d["trigger"] for d in waited.decisions] == ["fast_gate", "deadline", "evidence"]
    assert waited.decisions[1]["ts"] == DEADLINE


def _fire_live(version: Version, until: int, lag_ms: int) -> None:
    """Fire every timer up to `until` as a live job at most `lag_ms` behind the clock would:
    the clock never goes back, and is at least each timer's ts plus the lag."""
    while due := sorted(t for t in version.timers if t <= until):
        clock = max(version.ctx.clock_ms or 0, due[0] + lag_ms)
        version.ctx = dataclasses.replace(version.ctx, clock_ms=clock)
        version.fire(due[0])


def test_a_waiting_deadline_decided_after_later_input_still_expires_as_in_replay() -> None:
    """Found by the full fault run (c13-8): a text version whose detector never answered, its
    deadline waiting while the job caught up; a report burst an hour later was decided first
    (rev 2, expiring an hour after the reports), then the deadline at its own ts (rev 3, whose
    PROVISIONAL_ALLOW expires at deadline + 1 h, already past). No timer was armed for that
    earlier expiry: the version stayed PROVISIONAL_ALLOW where replay ends PENDING."""
    text = {"surface": "dm", "audience": "adult"}
    deadline, hour = T0 + 5_000, 3_600_000
    reports_at = T0 + 4_000_000

    def reports(version: Version) -> None:
        for index in range(4):
            _report(version, f"new-{index}", reports_at + index, weight=1.0, new=True)

    replayed = Version()
    replayed.upload(**text)
    replayed.fire_until(reports_at)
    reports(replayed)
    replayed.fire_until(reports_at + 100_000)
    assert (replayed.last["outcome"], replayed.last["state"]) == ("PENDING", "expired")

    live = Version(with_clock(T0 + 3_960_000))  # the upload read an hour behind
    live.upload(**text)
    _fire_live(live, T0 + 3_700_000, lag_ms=0)  # the backlog is read, the clock hardly moves
    _fire_live(live, reports_at - 1, lag_ms=38_000)  # still catching up: the deadline waits
    assert [d["trigger"] for d in live.decisions] == ["fast_gate"]
    live.ctx = dataclasses.replace(live.ctx, clock_ms=reports_at + 38_000)
    reports(live)
    _fire_live(live, reports_at + 100_000, lag_ms=3_000)  # live again
    assert [d["trigger"] for d in live.decisions] == ["fast_gate", "report", "deadline", "deadline"]
    assert live.decisions[2]["ts"] == deadline
    final = {k: live.last[k] for k in ("outcome", "state", "reasons")}
    assert final == {k: replayed.last[k] for k in ("outcome", "state", "reasons")}
    assert live.last["ts"] == replayed.last["ts"] == deadline + hour


def test_a_report_stamped_before_a_decided_deadline_does_not_reopen_scanning() -> None:
    """Found by the full fault run (c13-13984): a report batch is applied at its window's end,
    after a deadline inside the window was decided; evaluated at the report's own ts the
    version looked `scanning` again in replay, while live (the deadline waiting) it stayed
    `expired`. A deadline once decided has passed for every later input."""
    version = Version()
    version.upload(surface="public_post")
    version.fire_until(T0 + 5_000)
    assert (version.last["trigger"], version.last["state"]) == ("deadline", "expired")
    revisions = len(version.decisions)
    _report(version, "old-1", T0 + 4_700, weight=1.0, new=False)
    assert version.last["state"] == "expired"
    assert all(d["state"] == "expired" for d in version.decisions[revisions:])


def test_replay_never_waits() -> None:
    version = Version()
    version.upload(**image(surface="public_post"))
    version.fire(DEADLINE)
    assert (version.last["trigger"], version.last["ts"]) == ("deadline", DEADLINE)


@given(st.permutations(range(6)))
@settings(max_examples=30, deadline=None)
def test_evidence_read_before_its_upload_gives_the_same_decisions(order: list[int]) -> None:
    """A backlog's lanes are read unevenly: the same evidence read before its upload (joined
    at the upsert) or after it gives the same revisions and no duplicate scan request."""
    video = {"modality": "video", "mime_type": "video/mp4", "segments": 3, "surface": "dm"}
    results = []
    for detector, label in (("media_check", "malware"), ("nsfw_image", "nsfw")):
        for segment in range(3):
            score = 0.64 if (detector, segment) == ("media_check", 0) else 0.02
            status = "timeout" if (detector, segment) == ("media_check", 2) else "ok"
            results.append(
                evidence(
                    at=T0 + 100 + 500 * len(results),
                    event_id=f"e-{detector}-{segment}",
                    detector=detector,
                    model_version=f"{detector}-1",
                    segment_id=segment,
                    status=status,
                    scores={label: score} if status == "ok" else None,
                )
            )
    early, late = Version(), Version()
    for index in order:
        early.send("detector.results", results[index])
    early.upload(**video)
    late.upload(**video)
    for record in sorted(results, key=lambda r: r["ts"]):
        late.send("detector.results", record)
    assert early.decisions == late.decisions
    requested = [(r["detector"], r["segment_id"]) for r in early.of("scan.requests.video")]
    assert len(requested) == len(set(requested))


def test_timeout_and_error_are_unknown_never_safe() -> None:
    version = Version()
    version.upload(**image(surface="comment"))
    nsfw, media = image_evidence("c-1", T0 + 1)
    version.send("detector.results", {**nsfw, "status": "timeout", "scores": None})
    version.send("detector.results", media)
    assert version.last["outcome"] == "PENDING"  # media never public unchecked: a human looks
    assert "unknown-media" in version.last["matched_rules"]
    assert version.last["completeness"]["unknown"] == ["nsfw_image"]


def test_hash_bank_match_blocks_at_the_fast_gate() -> None:
    version = Version(context(banks=["known_bad"]))
    version.upload(**image(surface="comment"))
    assert (version.last["trigger"], version.last["outcome"], version.last["state"]) == (
        "fast_gate",
        "BLOCK",
        "blocked",
    )
    assert version.last["matched_rules"] == ["hash_bank:known_bad"]
    assert version.of("moderation.actions")[0]["visibility"] == "hidden"


def test_a_failed_limit_is_failed_pending() -> None:
    version = Version()
    version.upload(**image(surface="comment", mime_type="image/bmp"))
    assert (version.last["outcome"], version.last["state"], version.last["reasons"]) == (
        "PENDING",
        "failed",
        ["limit_mime_type"],
    )


def test_human_review_is_sticky_until_another_human_decides() -> None:
    version = Version()
    version.upload(**image(surface="comment"))
    review = {
        "event_id": "rv-1",
        "task_id": "t-ext",
        "content_id": "c-1",
        "content_version": 1,
        "reviewer_id": "r1",
        "outcome": "BLOCK",
        "reason": "sexual_content",
        "ts": T0 + 10,
    }
    version.send("review.decisions", review)
    assert (version.last["trigger"], version.last["outcome"], version.last["state"]) == (
        "review",
        "BLOCK",
        "blocked",
    )
    count = len(version.decisions)
    for record in image_evidence("c-1", T0 + 20, nsfw=0.0):
        version.send("detector.results", record)
    version.send(
        "moderation.reevaluate",
        {
            "event_id": "re-1",
            "content_id": "c-1",
            "content_version": 1,
            "reason": "x",
            "ts": T0 + 30,
        },
    )
    assert len(version.decisions) == count
    version.send(
        "review.decisions",
        {**review, "event_id": "rv-2", "outcome": "ALLOW", "reason": "ok", "ts": T0 + 40},
    )
    assert (version.last["outcome"], version.last["state"]) == ("ALLOW", "approved")


def test_appeal_opens_one_task_conflicts_go_to_the_dlq_and_the_review_closes_it() -> None:
    version = Version()
    version.upload(**image(surface="public_post"))
    for record in image_evidence("c-1", T0 + 1, nsfw=0.99):
        version.send("detector.results", record)
    assert version.last["outcome"] == "BLOCK"
    appeal = {
        "event_id": "ap-1",
        "appeal_id": "a1",
        "content_id": "c-1",
        "content_version": 1,
        "decision_revision": 1,
        "user_id": "author-1",
        "ts": T0 + 100,
    }
    version.send("moderation.appeals", appeal)
    task = version.of("review.tasks")[-1]
    assert (task["task_id"], task["kind"]) == ("appeal-a1", "appeal")
    version.send("moderation.appeals", {**appeal, "event_id": "ap-2", "appeal_id": "a2"})
    assert version.dead_letters and version.dead_letters[0][0] == "conflict"
    version.send(
        "review.decisions",
        {
            "event_id": "rv",
            "task_id": "appeal-a1",
            "content_id": "c-1",
            "content_version": 1,
            "reviewer_id": "r",
            "outcome": "ALLOW",
            "reason": "appeal_granted",
            "ts": T0 + 200,
        },
    )
    assert (version.last["trigger"], version.last["outcome"]) == ("appeal", "ALLOW")
    version.send("moderation.appeals", {**appeal, "event_id": "ap-3", "appeal_id": "a3"})
    assert version.of("review.tasks")[-1]["task_id"] == "appeal-a3"  # closed, so a new one


def test_reports_open_a_review_at_the_threshold_and_never_change_the_outcome() -> None:
    version = Version()
    version.upload(**image(surface="comment"))
    for record in image_evidence("c-1", T0 + 1):
        version.send("detector.results", record)
    outcome = version.last["outcome"]
    for index, reporter in enumerate(["u1", "u2", "u2", "u3"]):
        version.send(
            "moderation.reports",
            {
                "event_id": f"rp-{index}",
                "report_id": f"r{index}",
                "content_id": "c-1",
                "content_version": 1,
                "reporter_id": reporter,
                "reason": "spam",
                "ts": T0 + 10 + index,
            },
        )
    tasks = version.of("review.tasks")
    assert [t["queue"] for t in tasks] == ["reports"]
    assert (version.last["trigger"], version.last["state"], version.last["outcome"]) == (
        "report",
        "pending_review",
        outcome,
    )


def test_delete_hides_ignores_late_input_and_clears_state() -> None:
    version = Version()
    version.upload(**image(surface="comment"))
    version.send("content.versions", delete(at=T0 + 5))
    assert (version.last["trigger"], version.last["state"]) == ("delete", "deleted")
    assert version.of("moderation.actions")[-1]["visibility"] == "hidden"
    count = len(version.outputs)
    for record in image_evidence("c-1", T0 + 10, nsfw=0.99):
        version.send("detector.results", record)
    assert len(version.outputs) == count
    version.fire_until(T0 + 5 + TOMBSTONE_TTL_MS)
    assert version.state is None


def test_state_and_timers_are_cleared_after_the_ttl() -> None:
    version = Version()
    version.upload(**image(surface="comment"))
    for record in image_evidence("c-1", T0 + 1):
        version.send("detector.results", record)
    version.fire_until(T0 + STATE_TTL_MS - 1)
    assert version.state is not None  # still there for review, appeal, re-evaluation
    assert len([t for t in version.timers if t >= STATE_TTL_MS]) == 1  # one TTL timer armed
    version.fire_until(T0 + STATE_TTL_MS)
    assert version.state is not None  # the first TTL timer re-armed: input came after it
    version.fire_until(T0 + 2 + STATE_TTL_MS)  # the last evidence came at T0 + 2
    retired = version.state  # decided: a compact record keeps its right to be reviewed
    assert retired is not None and retired.retired and retired.events == {}
    assert version.timers == {T0 + 2 + STATE_TTL_MS + REVIEW_RETENTION_MS}
    version.fire_until(T0 + 2 + STATE_TTL_MS + REVIEW_RETENTION_MS)
    assert version.state is None and version.timers == set()
    orphan = Version()
    orphan.send("detector.results", image_evidence("c-9", T0)[0])
    orphan.fire_until(T0 + ORPHAN_TTL_MS)
    assert orphan.state is None


def test_a_review_40_days_later_applies_to_the_retired_record_with_the_next_revision() -> None:
    version = Version()
    version.upload(**image(surface="comment"))
    for record in image_evidence("c-1", T0 + 1):
        version.send("detector.results", record)
    assert version.last["outcome"] == "ALLOW"
    revision = version.last["decision_revision"]
    forty_days = T0 + 40 * 86_400_000
    version.fire_until(forty_days)
    assert version.state is not None and version.state.retired
    version.send("review.decisions", review("t-late", "BLOCK", at=forty_days))
    last = version.last
    assert (last["trigger"], last["outcome"], last["state"], last["ts"]) == (
        "review",
        "BLOCK",
        "blocked",
        forty_days,
    )
    assert last["decision_revision"] == revision + 1  # revision numbers never restart
    assert last["reasons"] == ["human_review"]
    [action] = [a for a in version.of("moderation.actions") if a["ts"] == forty_days]
    assert action["visibility"] == "hidden"


def test_an_appeal_of_a_retired_version_opens_a_task_with_the_decisions_reasons() -> None:
    version = Version()
    version.upload(**image(surface="public_post"))
    for record in image_evidence("c-1", T0 + 1, nsfw=0.99):
        version.send("detector.results", {**record, "evidence_ref": f"ev://{record['detector']}"})
    assert version.last["outcome"] == "BLOCK"
    version.fire_until(T0 + 40 * 86_400_000)
    version.send("moderation.appeals", appeal(at=T0 + 40 * 86_400_000))
    [task] = [t for t in version.of("review.tasks") if t["kind"] == "appeal"]
    assert task["reasons"] == version.last["reasons"]
    assert "ev://nsfw_image" in task["evidence"]  # the refs the appealed decision carried


def test_human_decisions_for_a_version_never_decided_go_to_the_dlq_as_stale() -> None:
    for topic, record in (
        ("review.decisions", review()),
        ("moderation.appeals", appeal()),
    ):
        version = Version()
        version.send(topic, record)
        assert version.state is None and version.outputs == []
        [(error_class, message)] = version.dead_letters
        assert error_class == "stale" and topic in message
    orphan = Version()  # evidence alone is not a decision
    orphan.send("detector.results", image_evidence("c-1", T0)[0])
    orphan.send("review.decisions", review())
    assert [c for c, _ in orphan.dead_letters] == ["stale"]


def test_a_retired_record_is_compact() -> None:
    """docs/moderation.md, "Retention", quotes these bytes (as stored, state schema 5)."""
    version = Version()
    version.upload(**image(surface="comment"))
    for record in image_evidence("c-1", T0 + 1):
        version.send("detector.results", record)
    full = len(state_schema.dump_version(version.state))
    version.fire_until(T0 + 10 + STATE_TTL_MS)
    assert version.state is not None and version.state.retired
    retired = len(state_schema.dump_version(version.state))
    assert retired < 400 and retired * 4 < full * 3, (full, retired)


def test_pause_floors_new_decisions_at_pending() -> None:
    version = Version(context(paused=True))
    version.upload(**image(surface="comment"))
    for record in image_evidence("c-1", T0 + 1):
        version.send("detector.results", record)
    assert version.last["outcome"] == "PENDING"
    assert "publication_paused" in version.last["reasons"]


def test_shadow_policy_decisions_go_to_moderation_shadow_only() -> None:
    version = Version(context(shadow=True))
    version.upload(**image(surface="comment"))
    for record in image_evidence("c-1", T0 + 1):
        version.send("detector.results", record)
    assert version.last["outcome"] == "ALLOW"
    shadows = version.of("moderation.shadow")
    assert shadows and all(s["shadow"] is True and s["policy_version"] == 2 for s in shadows)
    assert shadows[-1]["outcome"] == "PENDING"
    assert [s["decision_revision"] for s in shadows] == list(range(1, len(shadows) + 1))


def test_outputs_match_the_contract_schemas() -> None:
    version = Version(context(shadow=True))
    version.upload(**image(surface="public_post"))
    for record in image_evidence("c-1", T0 + 1, nsfw=0.8):
        version.send("detector.results", record)
    version.fire(T0 + 30_000)
    for topic, _, record in version.outputs:
        parse(topic, json.dumps(record))  # raises on any field the contract does not have


# Properties.
_evidence_records = st.lists(
    st.tuples(
        st.sampled_from(["nsfw_image", "media_check", "offensive_text"]),
        st.sampled_from([None, 0, 1, 2]),
        st.sampled_from(["ok", "timeout"]),
        st.floats(0, 1),
        st.sampled_from(["m1", "m2"]),
    ),
    min_size=0,
    max_size=10,
)


def _records(items: list[tuple[str, int | None, str, float, str]]) -> list[dict[str, Any]]:
    label = {"nsfw_image": "nsfw", "media_check": "malware", "offensive_text": "offensive"}
    records = []
    for index, (detector, segment, status, score, model) in enumerate(items):
        records.append(
            evidence(
                "c-1",
                T0 + 100 + index,
                event_id=f"e{index}",
                detector=detector,
                model_version=model,
                segment_id=segment,
                status=status,
                scores={label[detector]: score} if status == "ok" else None,
            )
        )
    # The contract: one evidence key, one result (a repeat is a duplicate).
    unique: dict[tuple[Any, ...], dict[str, Any]] = {}
    for record in records:
        key = (record["detector"], record["model_version"], record["segment_id"] or 0)
        unique.setdefault(key, record)
    return list(unique.values())


def _final(records: list[dict[str, Any]], surface: str) -> tuple[Any, ...]:
    version = Version()
    version.upload(**image(surface=surface, modality="video", mime_type="video/mp4", segments=3))
    for record in records:
        version.send("detector.results", record)
    # Final: after every deadline. Arrival order may decide a version earlier (a withheld
    # model's transient UNKNOWN, docs/scanning.md "Not done yet"); where it ends must not.
    version.fire_until(T0 + 30 * 86_400_000)
    last = version.last
    return last["outcome"], last.get("restriction"), last["state"]


@settings(max_examples=150, deadline=None)
@given(items=_evidence_records, data=st.data(), surface=st.sampled_from(["comment", "public_post"]))
def test_any_permutation_and_duplication_of_evidence_gives_the_same_final_decision(
    items: list[tuple[str, int | None, str, float, str]], data: st.DataObject, surface: str
) -> None:
    records = _records(items)
    shuffled = data.draw(st.permutations(records))
    duplicated = (
        shuffled + data.draw(st.lists(st.sampled_from(records), max_size=5))
        if records
        else shuffled
    )
    assert _final(records, surface) == _final(duplicated, surface)


@settings(max_examples=100, deadline=None)
@given(
    items=_evidence_records,
    reviews=st.lists(st.sampled_from(["ALLOW", "BLOCK", "RESTRICT", "PENDING"]), max_size=2),
)
def test_revisions_strictly_increase_and_each_decision_differs_from_the_previous(
    items: list[tuple[str, int | None, str, float, str]], reviews: list[str]
) -> None:
    version = Version()
    version.upload(
        **image(surface="public_post", modality="video", mime_type="video/mp4", segments=3)
    )
    for record in _records(items):
        version.send("detector.results", record)
    for index, outcome in enumerate(reviews):
        version.send(
            "review.decisions",
            {
                "event_id": f"rv{index}",
                "task_id": "t",
                "content_id": "c-1",
                "content_version": 1,
                "reviewer_id": "r",
                "outcome": outcome,
                "reason": "sexual_content",
                "ts": T0 + 10_000 + index,
            },
        )
    version.fire_until(T0 + 120_000)
    revisions = [d["decision_revision"] for d in version.decisions]
    assert revisions == list(range(1, len(revisions) + 1))
    keys = [(d["outcome"], d.get("restriction"), d["state"]) for d in version.decisions]
    assert all(a != b for a, b in itertools.pairwise(keys))


@settings(max_examples=60, deadline=None)
@given(items=_evidence_records)
def test_evidence_of_another_version_never_changes_a_version(
    items: list[tuple[str, int | None, str, float, str]],
) -> None:
    alone = Version()
    alone.upload(**image(surface="comment"))
    beside = Version()
    beside.upload(**image(surface="comment"))
    other = Version()  # version 2 of the same content, its own key as in the job
    other.send(
        "content.versions", upload(content_version=2, event_id="v2", **image(surface="comment"))
    )
    for record in _records(items):
        other.send("detector.results", {**record, "content_version": 2})
    assert alone.outputs == beside.outputs
    assert all((r.get("decision") or r)["content_version"] == 2 for _, _, r in other.outputs)


def test_the_fast_gate_is_the_scanning_outcome_whatever_rules_could_match() -> None:
    version = Version()
    version.upload(audience="minor", account_risk=0.99)  # text on a comment
    gate = version.last
    assert (gate["trigger"], gate["outcome"], gate["matched_rules"]) == (
        "fast_gate",
        "PROVISIONAL_ALLOW",
        [],
    )
    version.evidence(at=T0 + 1)
    assert "risky-account-minor-audience" in version.last["matched_rules"]


def test_an_action_only_when_the_visibility_changes() -> None:
    version = Version()
    version.upload(**image(surface="comment", modality="text", mime_type="text/plain"))
    version.send("detector.results", evidence(scores={"offensive": 0.9}))
    assert (version.last["outcome"], version.last["restriction"]) == ("RESTRICT", "reduced_reach")
    visibilities = [a["visibility"] for a in version.of("moderation.actions")]
    assert visibilities == ["public", "limited"]
    version.send(
        "review.decisions",
        {
            "event_id": "rv",
            "task_id": "t",
            "content_id": "c-1",
            "content_version": 1,
            "reviewer_id": "r",
            "outcome": "RESTRICT",
            "reason": "harassment",
            "ts": T0 + 9,
        },
    )
    assert len(version.of("moderation.actions")) == 2  # still limited: nothing to apply


def _report(version: Version, reporter: str, at: int, *, weight: float, new: bool) -> None:
    from modstream.moderation.state import ReportWeight

    ctx = version.ctx
    version.ctx = dataclasses.replace(ctx, report=ReportWeight(weight, new))
    version.send(
        "moderation.reports",
        {
            "event_id": f"rp-{reporter}-{at}",
            "report_id": f"r-{reporter}-{at}",
            "content_id": "c-1",
            "content_version": 1,
            "reporter_id": reporter,
            "reason": "spam",
            "ts": at,
        },
    )
    version.ctx = ctx


def test_new_reporters_count_half_and_reports_over_the_limit_not_at_all() -> None:
    version = Version()
    version.upload(**image(surface="comment"))
    _report(version, "old-1", T0 + 1, weight=1.0, new=False)
    _report(version, "old-2", T0 + 2, weight=1.0, new=False)
    _report(version, "spammer", T0 + 3, weight=0.0, new=False)  # over its hourly limit
    _report(version, "new-1", T0 + 4, weight=0.5, new=True)
    assert version.of("review.tasks") == []  # 2.5 < 3
    _report(version, "old-3", T0 + 5, weight=1.0, new=False)
    assert [t["queue"] for t in version.of("review.tasks")] == ["reports"]


def test_a_burst_from_new_reporters_is_flagged_as_brigading_instead_of_counted() -> None:
    version = Version()
    version.upload(**image(surface="comment"))
    for index in range(3):
        _report(version, f"new-{index}", T0 + 10 + index, weight=0.5, new=True)
    tasks = version.of("review.tasks")
    assert [(t["queue"], t["reasons"]) for t in tasks] == [("brigading", ["possible_brigading"])]
    assert version.state is not None and "new-2" not in version.state.reporters
    assert version.last["trigger"] == "report" and version.last["state"] == "pending_review"


def test_each_visible_change_tells_the_author_with_the_policys_notice() -> None:
    version = Version()
    version.upload(**image(surface="public_post"))
    for record in image_evidence("c-1", T0 + ONE_SECOND, nsfw=0.99):
        version.send("detector.results", record)
    actions = version.of("moderation.actions")
    notices = version.of("user.notifications")
    assert [n["decision_revision"] for n in notices] == [a["decision_revision"] for a in actions]
    blocked = notices[-1]
    assert (blocked["outcome"], blocked["reason_code"], blocked["appeal_allowed"]) == (
        "BLOCK",
        "sexual_content",
        True,
    )
    assert blocked["message"] == "Sexual content is not allowed here."
    assert blocked["user_id"] == "author-1" and "0.99" not in json.dumps(blocked)
    assert blocked["notification_id"] == sha256_hex(
        "notification", "c-1", 1, blocked["decision_revision"]
    )
    assert notices[0]["message"] == "Your content is being checked and is not visible yet."
    # The upheld appeal is the last word: no further appeal offered.
    version.send("moderation.appeals", appeal())
    version.send(
        "review.decisions",
        review(task_id="appeal-a-1", outcome="RESTRICT", at=T0 + 30 * ONE_SECOND),
    )
    assert version.of("user.notifications")[-1]["appeal_allowed"] is False


def test_offenses_and_human_decisions_go_to_the_authors_sanctions() -> None:
    version = Version()
    version.upload(**image(surface="public_post"))
    assert version.of("_sanctions") == []  # PENDING at the gate is no offense
    for record in image_evidence("c-1", T0 + ONE_SECOND, nsfw=0.99):
        version.send("detector.results", record)
    [offense] = version.of("_sanctions")
    assert offense["decision"]["outcome"] == "BLOCK"
    assert offense["strikes"]["reasons"][0] == "sexual_content"
    assert [key for topic, key, _ in version.outputs if topic == "_sanctions"] == ["author-1"]
    version.send("review.decisions", review(outcome="ALLOW", at=T0 + 20 * ONE_SECOND))
    assert version.of("_sanctions")[-1]["decision"]["trigger"] == "review"
    version.send("content.versions", delete(at=T0 + 40 * ONE_SECOND))
    assert len(version.of("_sanctions")) == 2  # a delete is nobody's offense


def test_an_upload_asks_for_each_required_detector_and_segment_not_yet_answered() -> None:
    video = Version()
    early = evidence(
        "c-1", T0 - 5, event_id="early", detector="media_check", model_version="m", segment_id=1,
        scores={"malware": 0.0, "corrupt": 0.0, "mime_mismatch": 0.0},
    )  # fmt: skip
    video.send("detector.results", early)
    video.upload(
        modality="video", mime_type="video/mp4", segments=3, media_ref="file:///media/c-1.mp4"
    )
    pairs = sorted((r["detector"], r["segment_id"]) for r in video.of("scan.requests.video"))
    assert pairs == [("media_check", 0), ("media_check", 2)]  # the gate first (cost order)
    for index in (0, 2):
        video.send("detector.results", {**early, "event_id": f"m{index}", "segment_id": index})
    requests = video.of("scan.requests.video")
    pairs = sorted((r["detector"], r["segment_id"]) for r in requests)
    assert pairs == [
        ("media_check", 0),
        ("media_check", 2),
        ("nsfw_image", 0),
        ("nsfw_image", 1),
        ("nsfw_image", 2),
    ]
    assert {r["media_ref"] for r in requests} == {"file:///media/c-1.mp4"}
    assert all(r["deadline_ts"] == T0 + 120_000 and r["priority"] == "live" for r in requests)
    text = Version()
    text.upload(modality="text", mime_type="text/plain", text="hello there")
    [request] = text.of("scan.requests.text")
    assert (request["detector"], request["segment_id"], request["text"]) == (
        "offensive_text",
        None,
        "hello there",
    )


# Contract v1.1: provisional expiry, actions on restriction change, reasons, appeal tasks.

HOUR = 3_600_000


TEXT_DEADLINE = T0 + 5_000  # the shipped policy's text deadline


def _expired_provisional(version: Version, until: int) -> dict[str, Any]:
    """Upload a text on a comment (PROVISIONAL_ALLOW: media never is) whose check never
    answers, and fire every timer up to `until`: the last decision."""
    version.upload()
    version.fire_until(until)
    return version.last


def test_a_provisional_allow_expiring_with_evidence_missing_is_decided_again() -> None:
    version = Version()
    after_deadline = _expired_provisional(version, TEXT_DEADLINE)
    assert (after_deadline["outcome"], after_deadline["state"]) == ("PROVISIONAL_ALLOW", "expired")
    expires = after_deadline["expires_ts"]
    assert expires == TEXT_DEADLINE + HOUR
    assert T0 + HOUR in version.timers  # one expiry timer at a time: the gate's, first
    version.fire_until(expires - 1)
    assert version.last == after_deadline and expires in version.timers  # re-armed
    version.fire_until(expires)
    last = version.last
    assert (last["trigger"], last["outcome"], last["state"], last["ts"]) == (
        "deadline",
        "PENDING",
        "expired",
        expires,
    )
    assert "expires_ts" not in last and last["reasons"] == ["provisional_expired"]
    [task] = [t for t in version.of("review.tasks") if t["queue"] == "provisional"]
    assert (task["kind"], task["ts"], task["decision_revision"]) == (
        "review",
        expires,
        last["decision_revision"],
    )
    assert version.of("moderation.actions")[-1]["visibility"] == "pending"
    # The chain ends: nothing is armed for the expiry again, and later timers decide nothing.
    count = len(version.decisions)
    version.fire_until(T0 + STATE_TTL_MS - 1)
    assert len(version.decisions) == count
    assert version.state is not None and version.state.expiry_timer is None


def test_a_provisional_expiry_reached_while_catching_up_waits_for_live_time() -> None:
    """A backlog (clock a day ahead): the expiry is looked at again once event time is live;
    evidence read meanwhile completes the version, and no expiry decision is made."""
    version = Version()
    expires = _expired_provisional(version, TEXT_DEADLINE)["expires_ts"]
    day_later = T0 + 86_400_000
    version.ctx = with_clock(day_later)
    version.fire_until(expires)
    assert version.last["ts"] == TEXT_DEADLINE and day_later + GRACE in version.timers
    version.evidence(at=expires + 20)
    version.fire_until(day_later + GRACE)
    assert (version.last["trigger"], version.last["outcome"]) == ("evidence", "ALLOW")
    assert not [t for t in version.of("review.tasks") if t["queue"] == "provisional"]


def test_after_its_expiry_a_version_stays_floored_until_its_evidence_completes() -> None:
    version = Version()
    expires = _expired_provisional(version, TEXT_DEADLINE)["expires_ts"]
    version.fire_until(expires)
    count = len(version.decisions)
    _report(version, "old-1", expires + 10, weight=1.0, new=False)
    assert len(version.decisions) == count  # the same missing evidence: still PENDING
    version.evidence(at=expires + 20)
    assert (version.last["trigger"], version.last["outcome"]) == ("evidence", "ALLOW")
    assert version.last["state"] == "pending_review"  # the provisional review is still open


def test_the_expiry_outcome_is_the_policys_unknown_high_risk_outcome() -> None:
    blocked = Version(context(unknown={"high_risk": "BLOCK", "default": "PROVISIONAL_ALLOW"}))
    expires = _expired_provisional(blocked, TEXT_DEADLINE)["expires_ts"]
    blocked.fire_until(expires)
    assert (blocked.last["outcome"], blocked.last["state"]) == ("BLOCK", "expired")
    absent = Version(context(unknown={"default": "PROVISIONAL_ALLOW"}))  # high_risk absent
    absent.fire_until(_expired_provisional(absent, TEXT_DEADLINE)["expires_ts"])
    assert (absent.last["outcome"], absent.last["trigger"]) == ("PENDING", "deadline")


def test_an_expiry_whose_outcome_is_provisional_again_never_re_arms() -> None:
    lenient = {"high_risk": "PROVISIONAL_ALLOW", "default": "PROVISIONAL_ALLOW"}
    version = Version(context(unknown=lenient))
    expires = _expired_provisional(version, TEXT_DEADLINE)["expires_ts"]
    fired = 0
    while due := sorted(t for t in version.timers if t < T0 + STATE_TTL_MS):
        version.fire(due[0])
        fired += 1
        assert fired < 10, "the expiry re-arms itself"
    deadlines = [d for d in version.decisions if d["trigger"] == "deadline"]
    # Still PROVISIONAL_ALLOW and `expired`: no new revision (nothing changed), but a reviewer
    # is asked, once.
    assert [d["ts"] for d in deadlines] == [TEXT_DEADLINE]
    [task] = version.of("review.tasks")
    assert (task["queue"], task["ts"]) == ("provisional", expires)


def test_a_provisional_allow_whose_evidence_completed_is_not_touched() -> None:
    version = Version()
    version.upload()
    assert version.last["expires_ts"] == T0 + HOUR
    version.evidence(at=T0 + ONE_SECOND)
    count = len(version.decisions)
    version.fire_until(T0 + 3 * HOUR)
    assert len(version.decisions) == count and version.last["outcome"] == "ALLOW"
    assert version.of("review.tasks") == []


def test_unknown_evidence_at_the_expiry_is_decided_again() -> None:
    version = Version()
    version.upload()
    version.evidence(at=T0 + 1, status="timeout", scores=None)
    assert version.last["outcome"] == "PROVISIONAL_ALLOW"  # complete, but the check is unknown
    version.fire_until(version.last["expires_ts"])
    assert (version.last["trigger"], version.last["outcome"]) == ("deadline", "PENDING")


def test_a_restriction_only_change_emits_an_action() -> None:
    version = Version()
    version.upload(modality="text", mime_type="text/plain")
    version.send("detector.results", evidence(scores={"offensive": 0.9}))
    assert (version.last["outcome"], version.last["restriction"]) == ("RESTRICT", "reduced_reach")
    rules = global_document()["rules"]
    for rule in rules:
        if rule["id"] == "offensive-limit":
            rule["restriction"] = "age_gate"
    version.ctx = context(rules=rules)
    version.send(
        "moderation.reevaluate",
        {
            "event_id": "re-1",
            "content_id": "c-1",
            "content_version": 1,
            "reason": "policy v2",
            "ts": T0 + 5,
        },
    )
    assert (version.last["outcome"], version.last["restriction"]) == ("RESTRICT", "age_gate")
    action = version.of("moderation.actions")[-1]
    assert (action["decision_revision"], action["visibility"], action["restriction"]) == (
        version.last["decision_revision"],
        "limited",
        "age_gate",
    )


def test_a_reviewers_free_text_never_becomes_a_reason_code() -> None:
    version = Version()
    version.upload(**image(surface="public_post"))
    free_text = "Looks like the uploader's ex, see ticket 4411"
    version.send("review.decisions", review(outcome="BLOCK", reason=free_text))
    assert version.last["reasons"] == ["human_review"]
    notice = version.of("user.notifications")[-1]
    assert notice["reason_code"] == "human_review" and "4411" not in json.dumps(notice)
    assert all("4411" not in json.dumps(record) for _, _, record in version.outputs)
    version.send("review.decisions", review(outcome="RESTRICT", reason="harassment", at=T0 + 20))
    assert version.last["reasons"] == ["human_review", "harassment"]
    assert version.of("user.notifications")[-1]["reason_code"] == "harassment"
    # A bank's reason is not a rule reason: a reviewer cannot name it.
    version.send("review.decisions", review(outcome="BLOCK", reason="known_match", at=T0 + 30))
    assert version.last["reasons"] == ["human_review"]


def test_an_appeal_task_carries_the_appealed_decisions_reasons_and_evidence() -> None:
    version = Version()
    version.upload(**image(surface="public_post"))
    for index, record in enumerate(image_evidence("c-1", T0 + 1, nsfw=0.99)):
        version.send("detector.results", {**record, "evidence_ref": f"s3://evidence/{index}"})
    decided = version.last
    assert decided["outcome"] == "BLOCK" and "sexual_content" in decided["reasons"]
    version.send("moderation.appeals", appeal())
    task = version.of("review.tasks")[-1]
    assert (task["kind"], task["reasons"]) == ("appeal", decided["reasons"])
    # The BLOCK came with the first result; the second changed nothing, so it is not part of
    # the appealed decision.
    assert task["evidence"] == [e["evidence_ref"] for e in decided["evidence"]]
    assert task["evidence"] == ["s3://evidence/0"]
    assert task["decision_revision"] == decided["decision_revision"]
    version.send("content.versions", delete(at=T0 + HOUR))
    assert version.state is not None and version.state.last_decision is not None
    last = version.state.last_decision  # a tombstone keeps no reason codes or evidence refs
    assert (last.reasons, last.evidence_refs, last.state) == (None, None, "deleted")
