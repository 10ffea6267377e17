"""The demo summary's "model calls saved" line (modstream/demo/summary.py), from what the run's
topics hold, without the stack."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from modstream.demo import summary as demo_summary
from modstream.testing.policies import GLOBAL_YAML


def test_the_demo_counts_required_calls_neither_requested_nor_answered(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def upsert(cid: str, modality: str) -> dict[str, Any]:
        value = {"type": "upsert", "content_id": cid, "content_version": 1}
        return {"topic": "content.versions", "value": {**value, "modality": modality}}

    lines = [upsert("r-banked", "image"), upsert("r-ok", "image"), upsert("r-never", "image")]
    topics = {
        "p.scan.requests.image": [
            {"content_id": "r-ok", "content_version": 1, "detector": "media_check"},
            {"content_id": "r-ok", "content_version": 1, "detector": "nsfw_image"},
        ],
        "p.detector.results": [],
    }
    monkeypatch.setattr(demo_summary, "mine", lambda _settings, topic, _run: topics.get(topic, []))
    names = {
        name: f"p.{name}"
        for name in ("scan.requests.text", "scan.requests.image", "scan.requests.video",
                     "scan.requests.audio", "detector.results")
    }  # fmt: skip
    decided = {("r-banked", 1), ("r-ok", 1)}  # r-never was never decided: not counted
    policy = yaml.safe_load(GLOBAL_YAML.read_text())
    saved = demo_summary.scan_calls_saved(None, names, "r-", lines, decided, policy)  # type: ignore[arg-type]
    assert saved == {"required": 4, "models": 1, "checks": 1}
