"""Which evidence the console serves as an image, and the access-log records it writes (valid
review.access records, one id per event)."""

from __future__ import annotations

import json

from modstream.console.evidence import access_record, evidence_items
from modstream.contract.registry import parse
from modstream.testing.records import T0

TASK = {
    "task_id": "review-abc",
    "queue": "adult",
    "content_id": "c-1",
    "content_version": 2,
    "evidence": [
        "file:///media/c-1.png",
        "evidence://c-1/offensive_text/0",
        "https://cdn.example/c-1.jpg",
        "file:///media/c-1.mp4",
        "file:///media/C-1.JPEG",
        "file:///media/c-1.png",  # a second detector's result on the same file
    ],
}


def test_only_file_images_are_served_by_the_console_each_once() -> None:
    items = evidence_items(TASK)
    assert [item.index for item in items] == [0, 1, 2, 3, 4]
    assert [item.image for item in items] == [True, False, False, False, True]
    assert evidence_items({"evidence": []}) == []


def test_access_records_are_valid_and_name_what_was_seen() -> None:
    view = access_record("carol", "view", T0, TASK)
    reveal = access_record("carol", "reveal", T0, TASK, evidence_ref=TASK["evidence"][0])
    decide = access_record("carol", "decide", T0 + 1, TASK, outcome="BLOCK", note="private")
    refused = access_record("dave", "refused", T0, None, queue="adult", detail="no grant")
    for record in (view, reveal, decide, refused):
        parse("review.access", json.dumps(record).encode())
    assert reveal["evidence_ref"] == "file:///media/c-1.png" and reveal["task_id"] == "review-abc"
    assert len({r["event_id"] for r in (view, reveal, decide, refused)}) == 4
    assert "note" not in view and decide["note"] == "private"
    assert refused["queue"] == "adult" and "task_id" not in refused


def test_a_long_reviewer_id_still_makes_a_valid_record() -> None:
    record = access_record("r" * 256, "reveal", T0, TASK, evidence_ref="file:///" + "x" * 1500)
    parse("review.access", json.dumps(record).encode())
