"""modstream/contract/own.py: a record this job admitted and wrote on reads back as its Struct with
every field, value and type pydantic would give; a text missing a field is refused as pydantic
refuses it."""

from __future__ import annotations

import json
from typing import Any

import pytest

from modstream.contract import SchemaError, parse
from modstream.contract.registry import parse_own
from modstream.testing.records import T0, appeal_record, delete, evidence, review_decision, upload

REPORT = {
    "event_id": "rep-1",
    "report_id": "r-1",
    "content_id": "c-1",
    "content_version": 1,
    "reporter_id": "u-9",
    "reason": "spam",
    "ts": T0,
}
REEVALUATE = {
    "event_id": "re-1",
    "content_id": "c-1",
    "content_version": 1,
    "reason": "policy v2",
    "ts": T0,
}
RECORDS: list[tuple[str, dict[str, Any]]] = [
    ("content.versions", upload(text="héllo ✓", segments=3, account_risk=1)),
    ("content.versions", upload(modality="image", mime_type="image/jpeg", phash="ab" * 8)),
    ("content.versions", delete()),
    ("detector.results", evidence(scores={"nsfw": 1, "other": 0.25}, segment_id=2)),
    ("detector.results", evidence(status="error", scores=None)),
    ("moderation.reports", {**REPORT, "_modstream_weight": 0.5}),
    ("review.decisions", review_decision()),
    ("moderation.appeals", appeal_record()),
    ("moderation.reevaluate", REEVALUATE),
]


@pytest.mark.parametrize(("topic", "record"), RECORDS)
def test_a_record_written_on_reads_back_as_pydantic_reads_it(
    topic: str, record: dict[str, Any]
) -> None:
    model = parse(topic, json.dumps(record))
    written = model.model_dump_json()
    read = parse_own(topic, written)
    assert not hasattr(read, "model_dump")  # the Struct, not the pydantic model
    for field in type(model).model_fields:
        ours, theirs = getattr(read, field), getattr(model, field)
        assert (ours, type(ours)) == (theirs, type(theirs)), field


def test_a_text_missing_a_field_is_refused_naming_it() -> None:
    record = evidence()
    del record["detector"]
    with pytest.raises(SchemaError) as refused:
        parse_own("detector.results", json.dumps(record))
    assert "detector" in str(refused.value)
