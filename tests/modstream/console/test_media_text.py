"""What a version's media says, as the task page shows it (modstream/console/media_text.py):
which detector results the console keeps, the readings of a kept file in time order (and
never a file kept for another result), and the video moments of the readers' findings."""

from __future__ import annotations

from typing import Any

import pytest

from modstream.console.media_text import (
    MAX_MOMENTS,
    ReaderResult,
    ReaderResults,
    TextLine,
    clock,
    moment_at,
    moments,
    reader_result,
    text_lines,
    video_type,
)

VIDEO = "file:///media/c-1.v1.mp4"


def result(detector: str = "speech_text", **fields: Any) -> dict[str, Any]:
    record: dict[str, Any] = {
        "event_id": f"det-c-1-{detector}", "detector": detector, "status": "ok",
        "content_id": "c-1", "content_version": 1, "segment_id": 0, "evidence_ref": VIDEO,
        "raw_output_ref": f"raw://2025-11-30/{detector}.json",
        "findings": [{"offensive": 0.9, "confidence": 0.8, "start_ms": 2_480, "end_ms": 3_100}],
    }  # fmt: skip
    return record | fields


def test_only_readers_ok_results_with_a_file_or_a_time_are_kept() -> None:
    kept = reader_result(result())
    assert kept is not None and (kept.raw_output_ref, kept.finding_ms) == (
        "raw://2025-11-30/speech_text.json", 2_480,
    )  # fmt: skip
    ocr = reader_result(result("ocr_text", findings=[{"box": [1, 2, 3, 4], "frame_ms": 4_000}]))
    assert ocr is not None and ocr.finding_ms == 4_000
    still = reader_result(result("ocr_text", findings=[{"box": [1, 2, 3, 4]}]))
    assert still is not None and still.finding_ms is None  # an image: its words, no moment
    assert reader_result(result("nsfw_image")) is None
    assert reader_result(result(status="timeout")) is None
    assert reader_result(result(raw_output_ref=None, findings=None)) is None


def test_results_are_held_per_version_newest_first_out_and_a_redelivery_replaces() -> None:
    held = ReaderResults(limit=2)
    first = ReaderResult("e-1", "ocr_text", "c-1", 1, 0, VIDEO, "raw://2025-11-30/a.json", None)
    held.add(first)
    held.add(first)  # delivered again: one copy
    assert held.of("c-1", 1) == [first] and len(held) == 1
    second = ReaderResult("e-2", "speech_text", "c-1", 1, 0, VIDEO, None, 10)
    other = ReaderResult("e-3", "speech_text", "c-2", 1, 0, None, None, 20)
    held.add(second)
    held.add(other)  # over the limit: the oldest result goes
    assert held.of("c-1", 1) == [second] and held.of("c-2", 1) == [other]
    assert held.of("c-1", 2) == [] and len(held) == 2


def speech(event_id: str = "det-c-1-speech_text") -> ReaderResult:
    kept = reader_result(result(event_id=event_id))
    assert kept is not None
    return kept


def test_a_kept_files_readings_are_shown_in_time_order_with_their_confidence() -> None:
    body = {
        "event_id": "det-c-1-speech_text", "detector": "speech_text", "model_version": "m",
        "raw": [
            {"text": "and then", "confidence": 0.5, "start_ms": 9_000, "end_ms": 9_800},
            {"text": "you are a bastard", "confidence": 0.81234, "start_ms": 2_480,
             "end_ms": 3_100},
            {"text": 7, "confidence": 0.5},  # not a reading: skipped
            {"text": "sure?", "confidence": 1.5},  # a confidence out of [0, 1]: skipped
        ],
    }  # fmt: skip
    lines = text_lines(speech(), body)
    assert [line.text for line in lines] == ["you are a bastard", "and then"]
    assert lines[0].confidence == 0.8123 and lines[0].when == "0:02.480–0:03.100"
    ocr = reader_result(result("ocr_text"))
    assert ocr is not None
    read = text_lines(ocr, body | {"detector": "ocr_text", "event_id": ocr.event_id, "raw": [
        {"text": "still", "confidence": 0.9, "box": [1, 2, 30, 40]},
        {"text": "framed", "confidence": 0.9, "box": [1, 2, 30, 40], "frame_ms": 61_250},
    ]})  # fmt: skip
    assert [(line.text, line.when, line.box) for line in read] == [
        ("still", "", (1, 2, 30, 40)), ("framed", "1:01.250", (1, 2, 30, 40)),
    ]  # fmt: skip


@pytest.mark.parametrize(
    "body",
    [
        {"event_id": "det-c-2-speech_text", "detector": "speech_text", "raw": []},
        {"event_id": "det-c-1-speech_text", "detector": "ocr_text", "raw": []},
        {"event_id": "det-c-1-speech_text", "detector": "speech_text", "raw": {"x": 1}},
    ],
)
def test_a_file_kept_for_another_result_is_never_shown(body: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        text_lines(speech(), body)


def test_moments_are_the_readers_findings_in_the_tasks_videos_each_once() -> None:
    evidence = ["file:///media/c-1.v1.mp4", "file:///media/c-1.v1.mp4", "file:///media/x.png"]
    results = [
        speech(),
        ReaderResult("o", "ocr_text", "c-1", 1, 1, VIDEO, None, 2_480),  # the same moment
        ReaderResult("p", "ocr_text", "c-1", 1, 0, VIDEO, None, 1_000),
        ReaderResult("i", "ocr_text", "c-1", 1, 0, "file:///media/x.png", None, 5),  # an image
        ReaderResult("z", "ocr_text", "c-1", 1, 0, "file:///elsewhere.mp4", None, 7),  # not cited
    ]
    shown = moments(results, evidence)
    assert [(m.index, m.at_ms, m.detectors) for m in shown] == [
        (0, 1_000, ("ocr_text",)), (0, 2_480, ("ocr_text", "speech_text")),
    ]  # fmt: skip
    assert shown[1].fragment_ref == f"{VIDEO}#t=2.480" and shown[1].when == "0:02.480"
    assert moment_at(shown, 0, 2_480) == shown[1] and moment_at(shown, 0, 2_000) is None
    many = [ReaderResult(f"m{n}", "ocr_text", "c-1", 1, 0, VIDEO, None, n) for n in range(20)]
    assert len(moments(many, evidence)) == MAX_MOMENTS


def test_video_types_come_from_the_file_name_of_a_file_reference_only() -> None:
    assert video_type("file:///media/a.MP4") == "video/mp4"
    assert video_type("file:///media/a.webm") == "video/webm"
    assert video_type("file:///media/a.png") is None
    assert video_type("https://cdn.example/a.mp4") is None


def test_times_read_as_minutes_seconds_and_ms() -> None:
    assert clock(0) == "0:00.000" and clock(61_250) == "1:01.250"
    assert TextLine("speech_text", "x", 1.0).when == ""
