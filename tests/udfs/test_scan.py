"""One scan batch: ok, transient (retried, then timeout), permanent (error + DLQ)."""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from typing import Any

import pytest

from modstream.contract.detector import DetectorResult
from modstream.core.limits import Limits
from modstream.detectors.detector import Evidence, Item, MediaError
from modstream.detectors.language import Language
from modstream.detectors.scan import order, scan_batch
from modstream.jobs.scan.job import ScanConfig
from modstream.scanning.batch import handle_batch, load_media
from modstream.testing.records import T0
from modstream.testing.scans import Counting, Reading, loader, request


def test_one_model_call_per_batch_and_every_request_answered_or_retried() -> None:
    scanner = Counting()
    batch = [
        request("a", "fine"),
        request("b", "corrupt"),
        request("c", "flaky"),
        request("d", None),
        request("e", "flaky", attempt=4),
    ]
    outcome = scan_batch(scanner, batch, loader, T0, rng=random.Random(3))
    assert scanner.calls == [2]  # "fine" and "corrupt" loaded; one session call
    statuses = {r["content_id"]: r["status"] for r in outcome.results}
    assert statuses == {"c-a": "ok", "c-b": "error", "c-d": "error", "c-e": "timeout"}
    [(retry, due)] = outcome.retries
    assert retry["request_id"] == "c" and retry["attempt"] == 2 and T0 < due <= T0 + 100
    assert sorted(r["request_id"] for r, _ in outcome.permanent) == ["b", "d"]
    ok = next(r for r in outcome.results if r["status"] == "ok")
    assert ok["scores"] == {"offensive": 0.25} and ok["model_version"] == "fake-1"


def test_a_retry_past_the_deadline_is_a_timeout() -> None:
    outcome = scan_batch(Counting(), [request("x", "flaky", deadline_ts=T0 + 1)], loader, T0)
    assert [r["status"] for r in outcome.results] == ["timeout"] and not outcome.retries


def test_results_are_stamped_in_the_uploads_time_frame_with_the_scanners_own_time() -> None:
    """A request from a backlog (uploaded an hour before the scanner got to it) is answered at
    its upload's ts plus the 40 ms the model took, not at the wall clock: waiting in a queue
    is not the detector's time (docs/moderation.md, "Time")."""
    hour_later = T0 + 3_600_000
    outcome = scan_batch(
        Counting(), [request("a", "fine")], loader, hour_later, clock=lambda: hour_later + 40
    )
    [result] = outcome.results
    assert result["status"] == "ok" and result["ts"] == T0 + 40


def test_retries_keep_their_first_start_and_time_out_after_the_deadline_once_asked() -> None:
    """The retry budget is the detector's deadline counted from its first attempt: a request
    reached an hour after its upload still gets its full deadline (5 s) of retries."""
    hour_later = T0 + 3_600_000
    first = request("x", "flaky", deadline_ts=T0 + 5_000)
    outcome = scan_batch(Counting(), [first], loader, hour_later, rng=random.Random(1))
    [(retry, due)] = outcome.retries
    assert retry["started"] == hour_later and retry["attempt"] == 2 and due > hour_later
    late = scan_batch(Counting(), [{**retry, "attempt": 3}], loader, hour_later + 4_990)
    [timeout] = late.results
    assert timeout["status"] == "timeout" and timeout["ts"] == T0 + 4_990


def test_live_requests_go_before_backfill() -> None:
    ordered = order(
        [
            request("1", "a", priority="backfill", ts=1),
            request("2", "b", ts=5),
            request("3", "c", ts=2),
        ]
    )
    assert [r["request_id"] for r in ordered] == ["3", "2", "1"]


def test_media_is_read_from_file_refs_inside_the_media_root_only(tmp_path: Any) -> None:
    path = tmp_path / "a.png"
    path.write_bytes(b"bytes")
    request = {"media_ref": path.as_uri(), "mime_type": "image/png", "size_bytes": 5}
    item = load_media(request, tmp_path, Limits())
    assert item.data == b"bytes" and item.ref == path.as_uri()
    for hostile in (
        {"media_ref": "s3://bucket/key"},
        {**request, "size_bytes": 4},  # more bytes than declared
        {"media_ref": (tmp_path / "..").as_uri()},
        {**request, "segments": Limits().max_segments + 1},
        {**request, "segments": 2, "segment_id": 2},
    ):
        with pytest.raises(MediaError):
            load_media(hostile, tmp_path, Limits())


def test_a_batch_is_grouped_by_each_requests_own_detector_and_bad_rows_are_dead_lettered() -> None:
    """The Java batcher keys by a detector hint only: a batch may mix detectors, hold
    unparseable rows, or name a detector this job does not serve."""
    scanners = {"offensive_text": Counting(), "media_check": Counting()}

    def lookup(name: str) -> Any:
        if name not in scanners:
            raise KeyError(f"unknown detector {name!r}")
        return scanners[name]

    config = ScanConfig(topics={"scan.requests.text": "p.text", "detector.results": "p.results"})
    rows = [
        ("p.text", "c-a", json.dumps(request("a", "fine"))),
        ("p.text", "c-b", json.dumps(request("b", "fine too", detector="media_check"))),
        ("p.text", "c-c", json.dumps(request("c", "also fine"))),
        ("p.text", "c-x", "{oops"),
        ("p.text", "c-u", json.dumps(request("u", "hm", detector="speech"))),
    ]
    handled = handle_batch(config, rows, T0, lookup)
    assert scanners["offensive_text"].calls == [2] and scanners["media_check"].calls == [1]
    rows_out = zip(handled.topics, handled.keys, handled.values, strict=True)
    out = [(t, k, json.loads(v)) for t, k, v in rows_out]
    results = {k: v["status"] for t, k, v in out if t == "p.results"}
    # A detector this job does not serve: no result (no model to cite), a permanent DLQ record;
    # the version's deadline answers it (docs/scanning.md).
    assert results == {"c-a": "ok", "c-b": "ok", "c-c": "ok"}
    letters = {k: v for t, k, v in out if t == "moderation.dlq"}
    assert set(letters) == {"c-x", "c-u"}
    assert letters["c-u"]["error_class"] == "permanent" and "speech" in letters["c-u"]["message"]
    assert letters["c-x"]["source_topic"] == "p.text" and not handled.retries


def test_an_ok_result_carries_its_share_of_the_batchs_model_call() -> None:
    """Cost per decision (issue 29 item 5): a batch of two whose model call took 30 ms gives
    each result 15 ms; the clock is read before and after the call."""
    times = iter([T0 + 10, T0 + 40])
    outcome = scan_batch(
        Counting(),
        [request("a", "fine"), request("b", "fine")],
        loader,
        T0,
        clock=lambda: next(times),
    )
    assert [result["inference_ms"] for result in outcome.results] == [15, 15]


def test_findings_are_an_extra_field_of_the_result_and_absent_without_them() -> None:
    [found] = scan_batch(Reading(), [request("a", "fine")], loader, T0).results
    assert found["scores"] == {"offensive": 0.9}
    assert found["findings"] == [{"box": [1, 2, 3, 4], "confidence": 0.8}]
    [plain] = scan_batch(Counting(), [request("b", "fine")], loader, T0).results
    assert "findings" not in plain
    DetectorResult.model_validate(found)  # consumers read it (inputs ignore extra fields)


class Naming(Counting):
    """A text detector that names the language it read (modstream/detectors/language.py)."""

    def detect(self, items: Sequence[Item]) -> list[Evidence | MediaError]:  # type: ignore[override]
        return [Evidence({"offensive": 0.1}, language=Language("de", 0.93)) for _ in items]


def test_the_language_named_is_an_extra_field_of_the_result_and_absent_without_one() -> None:
    """Issue 28 item 3: `language` and `language_confidence`, read by the moderation job."""
    [named] = scan_batch(Naming(), [request("a", "fine")], loader, T0).results
    assert (named["language"], named["language_confidence"]) == ("de", 0.93)
    parsed = DetectorResult.model_validate(named)
    assert (parsed.language, parsed.language_confidence) == ("de", 0.93)
    [plain] = scan_batch(Counting(), [request("b", "fine")], loader, T0).results
    assert "language" not in plain and "language_confidence" not in plain


@pytest.mark.parametrize("code", ["EN", "en-US", "e", "english", ""])
def test_a_result_naming_a_language_outside_iso_639_is_refused(code: str) -> None:
    [named] = scan_batch(Naming(), [request("a", "fine")], loader, T0).results
    with pytest.raises(ValueError, match="language"):
        DetectorResult.model_validate({**named, "language": code})
