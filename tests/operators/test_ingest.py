"""modstream.moderation.ingest.check: valid records are normalized and keyed; the rest go to the
DLQ."""

from __future__ import annotations

import json

import pytest

from modstream.moderation.ingest import check
from modstream.testing.records import SECRET_TEXT, T0, upload, without

ROUTE = {"valid_topic": "content.validated", "dlq_topic": "moderation.dlq"}


def test_valid_record_is_normalized_and_keyed_by_content_id() -> None:
    routed = check("content.versions", "some-key", json.dumps(upload("c-9", unknown=1)), 0, **ROUTE)
    assert not routed.rejected
    assert routed.topic == "content.validated"
    assert routed.key == "c-9"
    value = json.loads(routed.value)
    assert value["segments"] == 1
    assert "unknown" not in value
    assert "phash" not in value  # absent optionals stay absent


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        (json.dumps(without(upload(), "sha256")), "sha256"),
        (json.dumps(upload(size_bytes="52")), "size_bytes"),
        (json.dumps(upload(surface=None)), "surface"),
        ("\x00\x01binary", "Invalid JSON"),
        (None, "Invalid JSON"),
    ],
)
def test_invalid_record_becomes_a_dlq_record(raw: str | None, field: str) -> None:
    routed = check("content.versions", "k", raw, 42, **ROUTE)
    assert routed.rejected
    assert routed.topic == "moderation.dlq"
    assert routed.key == "k"
    letter = json.loads(routed.value)
    assert letter["error_class"] == "schema"
    assert field in letter["message"]
    assert SECRET_TEXT not in letter["message"]


def test_dlq_time_is_the_inputs_ts_when_it_has_one_else_the_record_timestamp() -> None:
    with_ts = check("content.versions", None, json.dumps(upload(at=T0, modality="x")), 42, **ROUTE)
    assert json.loads(with_ts.value)["ts"] == T0
    without_ts = check("content.versions", None, json.dumps({"ts": "soon"}), 42, **ROUTE)
    assert json.loads(without_ts.value)["ts"] == 42


def test_same_input_gives_the_same_output() -> None:
    raw = json.dumps(upload(modality="smell"))
    assert check("content.versions", "k", raw, 1, **ROUTE) == check(
        "content.versions", "k", raw, 1, **ROUTE
    )
