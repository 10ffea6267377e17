"""One version's keyed state: what a delete leaves behind (privacy) and the bounds on what
reports and segments can make it hold (modstream/core/limits.py)."""

from __future__ import annotations

import json
from dataclasses import replace

from modstream.core.limits import Limits
from modstream.moderation.state import ReportWeight, event_digest, to_document
from modstream.moderation.step import TOMBSTONE_KEEPS, new_state
from modstream.testing.records import SECRET_TEXT, T0, delete, upload
from modstream.testing.versions import CTX, Version, appeal, image, image_evidence, review

MEDIA_REF = "file:///media/SECRET-holiday-photo.jpg"
PHASH = "0123456789abcdef"


def report(reporter: str, at: int, event_id: str | None = None) -> dict[str, object]:
    return {
        "event_id": event_id or f"rp-{reporter}-{at}",
        "report_id": f"r-{reporter}-{at}",
        "content_id": "c-1",
        "content_version": 1,
        "reporter_id": reporter,
        "reason": "spam",
        "ts": at,
    }


def send_report(version: Version, record: dict[str, object], weight: float = 1.0) -> None:
    ctx = version.ctx
    version.ctx = replace(ctx, report=ReportWeight(weight, new_reporter=False))
    version.send("moderation.reports", record)
    version.ctx = ctx


def test_a_deleted_version_keeps_no_content_in_its_state() -> None:
    version = Version()
    version.upload(**image(surface="comment", media_ref=MEDIA_REF, phash=PHASH, text=SECRET_TEXT))
    for record in image_evidence("c-1", T0 + 1, nsfw=0.4):
        version.send("detector.results", record)
    version.send("review.decisions", review(outcome="RESTRICT", reason="SECRET-REVIEWER-NOTE"))
    send_report(version, report("r-1", T0 + 12))
    before = json.dumps(to_document(version.state))
    assert "ab" * 32 in before and PHASH in before and "SECRET-REVIEWER-NOTE" in before
    version.send("content.versions", delete(at=T0 + 20))
    assert version.last["state"] == "deleted"
    stored = json.dumps(to_document(version.state))
    for secret in (SECRET_TEXT, MEDIA_REF, "ab" * 32, PHASH, "SECRET-REVIEWER-NOTE"):
        assert secret not in stored
    state = version.state
    assert state is not None
    assert state.content is None and state.human is None
    assert state.evidence == {} and state.reporters == {} and state.burst == []
    # What is kept: the ids that make late input a no-op, and the last decision.
    assert set(state.events) >= {event_digest(f"ev-c-1-{T0}"), event_digest(f"del-c-1-{T0 + 20}")}
    assert state.decision_revision == version.last["decision_revision"] and state.deleted
    fresh = new_state("c", 1)
    changed = {
        name for name in state.__struct_fields__ if getattr(state, name) != getattr(fresh, name)
    }
    assert changed <= set(TOMBSTONE_KEEPS)


def test_late_input_after_a_delete_still_changes_nothing() -> None:
    version = Version()
    version.upload(**image(surface="comment"))
    version.send("content.versions", delete(at=T0 + 5))
    count = len(version.outputs)
    for record in image_evidence("c-1", T0 + 10, nsfw=0.99):
        version.send("detector.results", record)
    version.send("review.decisions", review(at=T0 + 11))
    version.send("moderation.appeals", appeal(at=T0 + 12))
    version.send("content.versions", upload(at=T0 + 13, **image()))
    send_report(version, report("late", T0 + 14))
    assert len(version.outputs) == count and version.dead_letters == []
    assert version.state is not None and version.state.content is None


def test_reports_beyond_the_reporter_limit_leave_no_trace_in_the_version() -> None:
    version = Version()
    version.upload(**image(surface="comment"))
    send_report(version, report("counted", T0 + 1))
    assert version.state is not None
    events, ttl = len(version.state.events), version.state.ttl
    for index in range(500):
        send_report(version, report("spammer", T0 + 2 + index), weight=0.0)
    assert len(version.state.events) == events  # no event id kept
    assert version.state.ttl == ttl  # and the state's life is not extended
    for index in range(50):  # the counted reporter again: already counted, nothing kept
        send_report(version, report("counted", T0 + 1_000 + index))
    assert len(version.state.events) == events
    assert version.state.report_weight == 1.0


def test_a_report_over_the_limit_for_an_unknown_version_creates_no_state() -> None:
    version = Version()
    send_report(version, report("spammer", T0), weight=0.0)
    assert version.state is None and version.outputs == [] and version.timers == set()


def test_counted_reporters_and_the_burst_are_bounded_per_version() -> None:
    limits = Limits(max_reporters=5)
    version = Version(replace(CTX, limits=limits))
    version.upload(**image(surface="comment"))
    for index in range(20):
        send_report(version, report(f"r-{index}", T0 + 1 + index))
    state = version.state
    assert state is not None
    assert len(state.reporters) == 5 and state.report_weight == 5.0
    assert len(state.burst) <= 5
    assert sum(1 for item in state.burst if item.new_reporter) == state.burst_new
    assert len(state.events) == 1 + 5  # the upload and the counted reports


def test_new_reporter_burst_stays_consistent_when_its_window_is_full() -> None:
    limits = Limits(max_reporters=3)
    version = Version(replace(CTX, limits=limits))
    version.upload(**image(surface="comment"))
    ctx = version.ctx
    for index in range(6):
        version.ctx = replace(ctx, report=ReportWeight(0.5, new_reporter=True))
        version.send("moderation.reports", report(f"new-{index}", T0 + 1 + index))
    version.ctx = ctx
    state = version.state
    assert state is not None
    assert len(state.burst) <= 3
    assert sum(1 for item in state.burst if item.new_reporter) == state.burst_new
    assert len(state.reporters) < 6 and len(state.events) == 1 + len(state.reporters)


def test_an_upsert_declaring_too_many_segments_is_refused_and_keeps_no_state() -> None:
    version = Version(replace(CTX, limits=Limits(max_segments=8)))
    result = version.upload(**image(modality="video", mime_type="video/mp4", segments=9))
    assert result.dead_letters and result.dead_letters[0][0] == "schema"
    assert "content.versions.segments" in result.dead_letters[0][1]
    assert "9 declared, over the limit of 8" in result.dead_letters[0][1]
    assert version.state is None and version.outputs == [] and version.timers == set()
    # A valid upsert of the same version afterwards is decided as usual.
    version.send(
        "content.versions",
        upload(event_id="ev-again", **image(modality="video", mime_type="video/mp4", segments=8)),
    )
    assert version.decisions and version.of("scan.requests.video")


def test_evidence_for_a_segment_beyond_the_bound_is_refused() -> None:
    version = Version(replace(CTX, limits=Limits(max_segments=8)))
    version.upload(**image(surface="comment"))
    before = json.dumps(to_document(version.state))
    record = image_evidence("c-1", T0 + 1, segment_id=8)[0]
    result = version.send("detector.results", record)
    assert [letter[0] for letter in result.dead_letters] == ["schema"]
    assert "detector.results.segment_id" in result.dead_letters[0][1]
    assert json.dumps(to_document(version.state)) == before


def test_the_default_bounds_apply_when_the_context_names_none() -> None:
    assert CTX.limits == Limits()
