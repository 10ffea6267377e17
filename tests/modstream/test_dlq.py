"""The DLQ replay's re-check of current state (no broker)."""

from __future__ import annotations

import json

from modstream.dlq import recheck
from tests.conftest import evidence, upload


def letter(topic: str, record: dict[str, object] | str) -> dict[str, object]:
    raw = record if isinstance(record, str) else json.dumps(record)
    return {"source_topic": topic, "key": "c-1", "raw": raw, "error_class": "schema", "ts": 1}


def test_only_current_unblocked_content_is_replayed() -> None:
    fixed = letter("p.detector.results", evidence())
    assert recheck(fixed, lambda cid: {"version": "1", "visibility": "pending"}, "p").replay
    assert recheck(fixed, lambda cid: {}, "p").replay  # the content store has not seen it yet
    newer = recheck(fixed, lambda cid: {"version": "2", "visibility": "public"}, "p")
    assert (newer.replay, newer.reason) == (False, "superseded_version")
    blocked = recheck(fixed, lambda cid: {"version": "1", "visibility": "hidden"}, "p")
    assert (blocked.replay, blocked.reason) == (False, "blocked_or_deleted")
    old_upload = recheck(letter("content.versions", upload()), lambda cid: {"version": "3"})
    assert old_upload.reason == "superseded_version"


def test_a_record_that_is_still_invalid_stays() -> None:
    broken = letter("content.versions", "{not json")
    assert recheck(broken, lambda cid: {}).reason == "still_invalid"
