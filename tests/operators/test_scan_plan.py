"""Scan planning (modstream/scanning/plan.py): cost order and backfill, through the moderation step
as the job drives it, and the pure planning functions alone."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from modstream.moderation.state import Content, Evidence
from modstream.policy.evaluate import PolicyError, load_policy
from modstream.scanning import plan as scan_plan
from modstream.testing.policies import global_document
from modstream.testing.records import T0, evidence
from modstream.testing.versions import Version, context, image

MEDIA = "file:///media/c-1.jpg"
DEADLINE = T0 + 30_000  # the seed policy's image deadline


def requests(version: Version, modality: str = "image") -> list[dict[str, Any]]:
    return version.of(f"scan.requests.{modality}")


def media_check(at: int, **scores: float) -> dict[str, Any]:
    return evidence(
        "c-1",
        at,
        event_id=f"m-{at}",
        detector="media_check",
        model_version="media-1",
        scores={"malware": 0.0, "corrupt": 0.0, "mime_mismatch": 0.0, **scores},
    )


def nsfw(at: int, score: float) -> dict[str, Any]:
    return evidence(
        "c-1",
        at,
        event_id=f"n-{at}",
        detector="nsfw_image",
        model_version="open_nsfw-1",
        scores={"nsfw": score},
    )


def reevaluate(at: int) -> dict[str, Any]:
    return {
        "event_id": f"re-{at}",
        "content_id": "c-1",
        "content_version": 1,
        "reason": "policy v2",
        "ts": at,
    }


def test_an_upload_matching_a_block_bank_gets_no_scan_request_and_stays_blocked() -> None:
    version = Version(context(banks=["known_bad"]))
    version.upload(**image(surface="public_post", media_ref=MEDIA))
    assert requests(version) == []
    assert (version.last["outcome"], version.last["state"]) == ("BLOCK", "blocked")
    version.fire_until(DEADLINE + 1)  # nothing is waited for: the deadline changes nothing
    assert len(version.decisions) == 1 and version.of("review.tasks") == []


def test_a_restrict_bank_match_is_still_scanned_a_model_may_make_it_worse() -> None:
    version = Version(context(banks=["spam_campaign"]))
    version.upload(**image(media_ref=MEDIA))
    assert [r["detector"] for r in requests(version)] == ["media_check"]


def test_an_upload_failing_a_limit_gets_no_scan_request() -> None:
    version = Version()
    version.upload(**image(size_bytes=30_000_000, media_ref=MEDIA))
    assert requests(version) == []
    assert (version.last["outcome"], version.last["state"]) == ("PENDING", "failed")
    version.fire_until(DEADLINE + 1)
    assert len(version.decisions) == 1


def test_media_check_first_and_the_model_only_after_it_passed() -> None:
    version = Version()
    version.upload(**image(surface="comment", media_ref=MEDIA))
    [check] = requests(version)
    assert (check["detector"], check["priority"], check["media_ref"]) == (
        "media_check",
        "live",
        MEDIA,
    )
    version.send("detector.results", media_check(T0 + 100))
    [_, model] = requests(version)
    assert (model["detector"], model["media_ref"], model["size_bytes"]) == (
        "nsfw_image",
        MEDIA,
        50_000,
    )
    assert model["deadline_ts"] == DEADLINE and model["ts"] == T0 + 100  # the upload's deadline
    version.send("detector.results", media_check(T0 + 200))  # another check result: no new ask
    assert len(requests(version)) == 2
    version.send("detector.results", nsfw(T0 + 300, 0.01))
    assert (version.last["outcome"], version.last["state"]) == ("ALLOW", "approved")


def test_a_rule_reading_the_gate_with_pending_or_worse_fails_it_and_the_model_is_never_asked() -> (
    None
):
    version = Version()
    version.upload(**image(surface="comment", media_ref=MEDIA))
    version.send("detector.results", media_check(T0 + 100, corrupt=1.0))
    assert [r["detector"] for r in requests(version)] == ["media_check"]
    # Decided at once, not at the deadline: the model that was never asked is UNKNOWN.
    last = version.last
    assert (last["outcome"], last["state"], last["ts"]) == ("PENDING", "pending_review", T0 + 100)
    assert last["completeness"]["unknown"] == ["nsfw_image"]
    assert "invalid_media" in last["reasons"]
    version.fire_until(DEADLINE + 1)
    assert version.last["state"] != "expired"


def test_a_gate_detector_that_cannot_answer_fails_the_gate_closed() -> None:
    version = Version()
    version.upload(**image(surface="public_post", media_ref=MEDIA))
    failed = {**media_check(T0 + 100), "status": "timeout", "scores": None}
    version.send("detector.results", failed)
    assert len(requests(version)) == 1
    last = version.last
    assert (last["outcome"], last["ts"]) == ("PENDING", T0 + 100)
    assert last["completeness"]["unknown"] == ["media_check", "nsfw_image"]


def test_a_policy_without_gate_asks_every_detector_at_once() -> None:
    detectors = global_document()["detectors"]
    detectors["image"] = {
        **detectors["image"],
        "required": ["media_check", "nsfw_image"],
        "gate": [],
        "deadline_ms": 30000,
    }
    version = Version(context(detectors=detectors))
    version.upload(**image(media_ref=MEDIA))
    assert sorted(r["detector"] for r in requests(version)) == ["media_check", "nsfw_image"]


def test_gate_evidence_that_came_before_the_upload_asks_the_model_with_it() -> None:
    version = Version()
    version.send("detector.results", media_check(T0 - 5))
    version.upload(**image(media_ref=MEDIA))
    assert [r["detector"] for r in requests(version)] == ["nsfw_image"]


def test_the_policy_refuses_a_gate_that_is_not_required_or_on_text() -> None:
    detectors = global_document()["detectors"]
    detectors["image"] = {"required": ["nsfw_image"], "gate": ["media_check"], "deadline_ms": 1}
    with pytest.raises(PolicyError, match="gate detectors must also be required: media_check"):
        load_policy(global_document(detectors=detectors))
    detectors = global_document()["detectors"]
    detectors["text"] = {"required": ["a", "b"], "gate": ["a"], "deadline_ms": 1}
    with pytest.raises(PolicyError, match="text detectors cannot be gated"):
        load_policy(global_document(detectors=detectors))


def _v2_requires(detector: str, modality: str = "image") -> Any:
    detectors = global_document()["detectors"]
    required = detectors[modality]["required"]
    detectors[modality] = {**detectors[modality], "required": [*required, detector]}
    return context(detectors=detectors)


def test_a_reevaluation_under_a_policy_needing_a_new_detector_asks_it_at_backfill() -> None:
    version = Version()
    version.upload(**image(surface="comment", media_ref=MEDIA))
    version.send("detector.results", media_check(T0 + 100))
    version.send("detector.results", nsfw(T0 + 200, 0.01))
    live = len(requests(version))
    version.ctx = _v2_requires("weapons_image")
    version.send("moderation.reevaluate", reevaluate(T0 + 86_400_000))
    assert len(requests(version)) == live  # on the backfill topic, never the live one
    [request] = version.of("scan.requests.image.backfill")
    assert (request["detector"], request["priority"], request["media_ref"]) == (
        "weapons_image",
        "backfill",
        MEDIA,
    )
    assert request["deadline_ts"] == T0 + 86_400_000 + 30_000
    # Until it answers, the policy's missing detector is unknown (fail closed), never safe.
    assert version.last["completeness"]["unknown"] == ["weapons_image"]
    version.send("moderation.reevaluate", reevaluate(T0 + 86_400_001))  # asked once
    assert len(version.of("scan.requests.image.backfill")) == 1
    weapons = {**nsfw(T0 + 86_400_100, 0.0), "detector": "weapons_image", "scores": {"gun": 0.0}}
    version.send("detector.results", weapons)
    assert (version.last["outcome"], version.last["completeness"]["unknown"]) == ("ALLOW", [])


def test_a_backfill_of_a_gated_version_asks_the_checks_first_and_the_models_at_backfill() -> None:
    version = Version()
    version.upload(**image(surface="comment", media_ref=MEDIA))
    version.send("detector.results", {**media_check(T0 + 100), "status": "error"})
    assert version.state is not None and version.state.scan == "withheld"
    version.ctx = _v2_requires("weapons_image")
    version.send("moderation.reevaluate", reevaluate(T0 + 1_000_000))
    assert len(requests(version)) == 1  # the gate failed: its models are never asked
    fresh = Version(_v2_requires("weapons_image"))
    fresh.send("detector.results", media_check(T0 - 5))
    assert fresh.state is not None
    facts = {**image(surface="comment"), "region": "DE", "audience": "all", "account_risk": 0.2}
    content = Content(ts=T0, author_id="a", media_ref=MEDIA, **facts)
    state = msgspec.structs.replace(fresh.state, content=content, evidence={})
    plan = scan_plan.backfill(state, fresh.ctx.resolution.decide, T0 + 10)
    assert [(topic, r["detector"]) for topic, _, r in plan] == [
        ("scan.requests.image.backfill", "media_check")
    ]
    state.evidence["m"] = Evidence("media_check", "m", None, "ok", {"corrupt": 0.0})
    asked = scan_plan.on_evidence(state, fresh.ctx.resolution.decide, T0 + 20)
    assert sorted((r["detector"], r["priority"]) for _, _, r in asked) == [
        ("nsfw_image", "backfill"),
        ("weapons_image", "backfill"),
    ]


def test_text_is_not_retained_so_a_reevaluation_asks_no_text_backfill() -> None:
    version = Version()
    version.upload(modality="text", mime_type="text/plain", text="hello")
    version.send("detector.results", evidence(at=T0 + 10))
    version.ctx = _v2_requires("toxicity_v2", "text")
    version.send("moderation.reevaluate", reevaluate(T0 + 86_400_000))
    assert len(requests(version, "text")) == 1
    assert version.last["completeness"]["unknown"] == ["toxicity_v2"]
    assert "hello" not in str(version.state)


def test_calls_saved_counts_required_pairs_never_asked_nor_answered() -> None:
    policy = load_policy(global_document())
    uploads = [
        {"content_id": "a", "content_version": 1, "modality": "image", "segments": 1},
        {"content_id": "b", "content_version": 1, "modality": "video", "segments": 2},
        {"content_id": "c", "content_version": 1, "modality": "text", "segments": 1},
    ]
    asked = {
        ("a", 1, "media_check", 0),
        ("b", 1, "media_check", 0),
        ("b", 1, "media_check", 1),
        ("b", 1, "nsfw_image", 0),
        ("b", 1, "nsfw_image", 1),
    }
    assert scan_plan.calls_saved(uploads, policy, asked) == {
        "required": 7,
        "models": 2,  # a's nsfw_image (gate failed) and c's offensive_text (bank/limit)
        "checks": 0,
    }


def test_the_gate_decides_on_the_evidence_not_on_the_order_it_came_in() -> None:
    ok = media_check(T0 + 100)
    late = {**media_check(T0 + 101), "event_id": "m2", "model_version": "media-2"}
    late.update(status="timeout", scores=None)
    finals = []
    for first, second in ((ok, late), (late, ok)):
        version = Version()
        version.upload(**image(surface="comment", media_ref=MEDIA))
        version.send("detector.results", first)
        version.send("detector.results", second)
        last = version.last
        finals.append((last["outcome"], last["state"], last["completeness"]["unknown"]))
    assert finals[0] == finals[1]
    assert finals[0][2] == ["media_check", "nsfw_image"]  # UNKNOWN at once, fail closed


def test_a_live_request_for_a_high_risk_surface_says_so_and_others_do_not() -> None:
    """The scan pool admits `high_risk` first (modstream/scanning/admission.py); the field is
    written only when true."""
    risky, plain = Version(), Version()
    risky.upload(**image(surface="public_post", media_ref=MEDIA))
    plain.upload(**image(surface="comment", media_ref=MEDIA))
    assert [r.get("high_risk") for r in requests(risky)] == [True]
    assert [r.get("high_risk") for r in requests(plain)] == [None]
