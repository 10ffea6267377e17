"""A reader's best finding's time (`finding_ms`, issue 28 item 8): read from the result's
`findings`, kept on the version's evidence, cited by the decision's `evidence` entry, so a
reviewer goes to that moment of the audio or video (docs/contract-notes.md, "Findings")."""

from __future__ import annotations

from typing import Any

import msgspec
import yaml

from modstream.contract import parse
from modstream.contract.detector import DetectorResult
from modstream.moderation.state import Context, Evidence
from modstream.policy.store import PolicyStore
from modstream.testing.policies import GLOBAL_YAML
from modstream.testing.records import T0, evidence
from modstream.testing.versions import Version

READ_ALL = GLOBAL_YAML.parent / "examples" / "global-read-all.yaml"


def read_all_context() -> Context:
    store = PolicyStore()
    store.install(yaml.safe_load(READ_ALL.read_text()), ts=0)
    return Context(resolution=store.resolve("global", T0, "x"), hash_matches=frozenset())


def audio_upload() -> dict[str, Any]:
    return {
        "modality": "audio", "mime_type": "audio/wav", "size_bytes": 150_000,
        "media_ref": "file:///media/c-1.wav", "text": None,
    }  # fmt: skip


def result(detector: str, scores: dict[str, float], **fields: Any) -> dict[str, Any]:
    return evidence(
        at=T0 + 500, detector=detector, model_version=f"{detector}-1", scores=scores,
        event_id=f"det-{detector}", **fields,
    )  # fmt: skip


SPOKEN = [
    {"offensive": 0.9993, "confidence": 0.41, "start_ms": 2_480, "end_ms": 3_870},
    {"offensive": 0.02, "confidence": 0.5, "start_ms": 9_000, "end_ms": 9_800},
]


def test_the_best_findings_time_is_the_frame_else_the_start_of_speech() -> None:
    def parsed(findings: list[dict[str, Any]] | None) -> DetectorResult:
        return DetectorResult.model_validate(result("x", {"offensive": 1.0}, findings=findings))

    assert parsed(SPOKEN).finding_ms == 2_480
    assert parsed([{"offensive": 1.0, "box": [1, 2, 3, 4], "frame_ms": 3_000}]).finding_ms == 3_000
    assert parsed([{"offensive": 1.0, "box": [1, 2, 3, 4]}]).finding_ms is None  # a still image
    assert parsed(None).finding_ms is None and parsed([]).finding_ms is None


def test_an_offence_heard_in_audio_is_restricted_and_its_decision_cites_when() -> None:
    version = Version(read_all_context())
    version.upload(**audio_upload())
    version.send(
        "detector.results",
        result("media_check", {"mime_mismatch": 0.0, "corrupt": 0.0, "malware": 0.0}),
    )
    version.send("detector.results", result("speech_text", {"offensive": 0.9993}, findings=SPOKEN))
    decided = version.last
    assert decided["outcome"] in ("BLOCK", "RESTRICT")
    assert "offensive-in-media-limit" in decided["matched_rules"]
    cited = {entry["detector"]: entry for entry in decided["evidence"]}
    assert cited["speech_text"]["finding_ms"] == 2_480
    assert "finding_ms" not in cited["media_check"]
    parse("moderation.decisions", msgspec.json.encode(decided))  # within its schema


def test_evidence_stored_before_finding_times_were_kept_loads_without_one() -> None:
    before = ["speech_text", "m-1", 0, "ok", {"offensive": 0.1}, None, T0, "en", 0.9]
    loaded = msgspec.msgpack.decode(msgspec.msgpack.encode(before), type=Evidence)
    assert loaded.finding_ms is None
