"""modstream/contract/json/ is the contract's JSON Schema; it must match the models."""

from __future__ import annotations

import json
from pathlib import Path

from modstream.contract import export
from modstream.contract.registry import INPUT_TOPICS, OUTPUT_TOPICS


def test_committed_json_schema_is_fresh() -> None:
    assert export.stale() == [], (
        "run `modstream schemas export` and commit modstream/contract/json/"
    )


def test_stale_detects_a_changed_file(tmp_path: Path) -> None:
    export.export(tmp_path)
    assert export.stale(tmp_path) == []
    target = tmp_path / "content.versions.schema.json"
    target.write_text(target.read_text().replace('"author_id"', '"writer_id"'))
    (tmp_path / "gone.schema.json").write_text("{}")
    assert export.stale(tmp_path) == [
        "content.versions.schema.json: differs from the models",
        "gone.schema.json: no topic produces it",
    ]


def test_every_topic_has_a_schema_with_its_required_fields() -> None:
    files = export.render()
    assert set(files) == {f"{topic}.schema.json" for topic in {**INPUT_TOPICS, **OUTPUT_TOPICS}}
    decision = json.loads(files["moderation.decisions.schema.json"])
    assert set(decision["required"]) == {
        "decision_id",
        "content_id",
        "content_version",
        "decision_revision",
        "outcome",
        "reasons",
        "matched_rules",
        "policy_id",
        "policy_version",
        "evidence",
        "completeness",
        "trigger",
        "state",
        "ts",
    }
    assert "restriction" not in decision["required"]
    dlq = json.loads(files["moderation.dlq.schema.json"])
    assert dlq["properties"]["error_class"]["enum"] == [
        "schema",
        "policy",
        "signature",
        "conflict",
        "transient_exhausted",
        "permanent",
        "stale",
    ]
