"""policy_rules/examples/global-read-all.yaml (issue 28): global.yaml with ocr_text and
speech_text asked for and read, and nothing else changed."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import yaml

from modstream.detectors.registry import FACTORIES
from modstream.policy.evaluate import ContentFacts, load_policy
from modstream.testing.policies import GLOBAL_YAML, global_document
from modstream.testing.policies import evidence_view as evidence

READ_ALL = GLOBAL_YAML.parent / "examples" / "global-read-all.yaml"
MEDIA_RULES = ("offensive-in-media-block", "offensive-in-media-limit")


def candidate() -> dict[str, Any]:
    document: dict[str, Any] = yaml.safe_load(READ_ALL.read_text())
    return document


def test_it_differs_from_global_only_in_the_readers_and_their_rules() -> None:
    read_all, current = candidate(), global_document(version=2)
    assert read_all["detectors"]["image"]["required"] == ["media_check", "nsfw_image", "ocr_text"]
    assert read_all["detectors"]["video"]["required"][-2:] == ["ocr_text", "speech_text"]
    assert read_all["detectors"]["audio"]["required"] == ["media_check", "speech_text"]
    assert read_all["detectors"]["audio"]["gate"] == ["media_check"]
    rules = [rule for rule in read_all["rules"] if rule["id"] not in MEDIA_RULES]
    assert rules == current["rules"]  # the existing rules, unchanged and in order
    rest = {k: v for k, v in read_all.items() if k not in ("detectors", "rules")}
    assert rest == {k: v for k, v in current.items() if k not in ("detectors", "rules")}
    for modality in ("text", "image", "video"):
        theirs = copy.deepcopy(read_all["detectors"][modality])
        theirs["required"] = [d for d in theirs["required"] if d not in ("ocr_text", "speech_text")]
        assert theirs == current["detectors"][modality]


def test_every_detector_it_asks_for_is_one_the_scan_job_serves() -> None:
    named = {d for spec in candidate()["detectors"].values() for d in spec["required"]}
    assert named <= set(FACTORIES)


@pytest.mark.parametrize(
    ("modality", "detector", "score", "outcome", "rule"),
    [
        ("image", "ocr_text", 0.99, "BLOCK", "offensive-in-media-block"),
        ("image", "ocr_text", 0.9, "RESTRICT", "offensive-in-media-limit"),
        ("audio", "speech_text", 0.99, "BLOCK", "offensive-in-media-block"),
        ("video", "speech_text", 0.9, "RESTRICT", "offensive-in-media-limit"),
        ("image", "ocr_text", 0.1, "ALLOW", None),
    ],
)
def test_offence_read_in_media_is_decided_like_offensive_text(
    modality: str, detector: str, score: float, outcome: str, rule: str | None
) -> None:
    policy = load_policy(candidate())
    facts = ContentFacts(
        modality=modality,
        surface="public_post",
        mime_type={"image": "image/jpeg", "audio": "audio/mpeg", "video": "video/mp4"}[modality],
        size_bytes=50_000,
    )
    verdict = policy.evaluate(facts, evidence(**{f"{detector}__offensive": score}), ts=0)
    assert verdict.outcome == outcome
    assert (rule in verdict.matched_rules) if rule else not verdict.matched_rules
