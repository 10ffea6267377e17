"""A task page's words and video frames from real files (modstream/console/kept_media.py):
a video rendered here with words shown and said (modstream/demo/media.py), read by the real
readers (RapidOCR, PocketSphinx), kept by the scan job's raw-output store; the console shows
the lines read and heard with their times and confidences, and the frame at each finding,
through the web layer (Starlette's TestClient; the broker-backed `Console` is exercised in
tests/integration/test_console.py)."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image

from modstream.console.kept_media import KeptMedia, MediaText
from modstream.console.media_text import ReaderResults, moment_at, reader_result
from modstream.core.limits import Limits
from modstream.demo import media as demo_media
from modstream.detectors.detector import Evidence, Item
from modstream.detectors.raw_output import RawOutputStore
from modstream.detectors.registry import detector
from modstream.testing.console import FakeConsole, client, logged_in

SEGMENTS = 3  # 3 s each: the words are shown in the middle one and said within it
SHOWN_FROM_MS, SAID_FROM_MS = 3_000, 3_500


def written_and_spoken() -> bytes:
    """Nine seconds: blank frames but for the middle segment's words; silence but for the
    spoken offence from 3.5 s."""
    fps, rate = demo_media.FPS, demo_media.RATE
    blank, shown = Image.new("RGB", demo_media.CARD, "white"), demo_media.card(
        demo_media.WRITTEN_OFFENCE
    )  # fmt: skip
    frames = [shown if SHOWN_FROM_MS <= n * 1000 // fps < 6_000 else blank for n in range(9 * fps)]
    speech = demo_media.spoken_pcm(demo_media.SPOKEN_OFFENCE)
    before = b"\0\0" * (rate * SAID_FROM_MS // 1000)
    after = b"\0\0" * max(0, 9 * rate - len(before) // 2 - len(speech) // 2)
    return demo_media.mp4(frames, before + speech + after)


@pytest.fixture(scope="module")
def version(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The video in a media store, read by both readers, each result's raw output kept as
    the scan job keeps it; the results as the console keeps them."""
    root = tmp_path_factory.mktemp("kept")
    media, raw = root / "media", root / "raw-output"
    media.mkdir()
    path = media / "c-1.v1.mp4"
    path.write_bytes(written_and_spoken())
    store, held = RawOutputStore(raw), ReaderResults()
    for name in ("ocr_text", "speech_text"):
        reader: Any = detector(name, intra_op_threads=1)
        items = [
            Item(data=path.read_bytes(), mime_type="video/mp4", segment=s, segments=SEGMENTS)
            for s in range(SEGMENTS)
        ]  # fmt: skip
        for segment, found in enumerate(reader.detect(items)):
            assert isinstance(found, Evidence), found
            record = {
                "event_id": f"det-c-1-{name}-{segment}", "detector": name, "status": "ok",
                "model_version": reader.model_version, "ts": 1_764_460_800_000,
                "content_id": "c-1", "content_version": 1, "segment_id": segment,
                "evidence_ref": path.as_uri(), "findings": list(found.findings),
            }  # fmt: skip
            record["raw_output_ref"] = store.keep(record, found.raw)
            kept = reader_result(record)
            if kept is not None:
                held.add(kept)
    return {"media": media, "raw": raw, "ref": path.as_uri(), "results": held.of("c-1", 1)}


def shown(version: dict[str, Any], raw_output_dir: Path | None) -> MediaText:
    kept = KeptMedia(version["media"], raw_output_dir, Limits())
    return kept.media_text(version["results"], [version["ref"]])


def test_the_words_read_and_heard_are_shown_with_their_times_and_confidence(
    version: dict[str, Any],
) -> None:
    text = shown(version, version["raw"])
    written = [line for line in text.lines if line.detector == "ocr_text"]
    said = [line for line in text.lines if line.detector == "speech_text"]
    assert written and all("stupid" in line.text for line in written), written
    assert {line.start_ms for line in written} <= {3_000, 4_000, 5_000}  # one frame a second
    assert all(line.box is not None and 0.5 < line.confidence <= 1.0 for line in written)
    [heard] = said
    assert "bastard" in heard.text and heard.start_ms is not None and heard.end_ms is not None
    assert SAID_FROM_MS - 300 <= heard.start_ms < heard.end_ms <= SAID_FROM_MS + 3_000
    assert 0.0 < heard.confidence <= 1.0
    starts = [line.start_ms or 0 for line in text.lines]
    assert starts == sorted(starts)
    # every kept file read (the blank segments' too: empty), none missing
    assert len(text.read) == 2 * SEGMENTS and text.missing == []


def test_without_the_store_no_words_are_shown_and_the_files_are_listed_missing(
    version: dict[str, Any],
) -> None:
    text = shown(version, None)
    assert text.lines == [] and text.read == [] and len(text.missing) == 2 * SEGMENTS
    assert text.moments  # the moments come from the results: the frames are still shown


def test_the_frame_at_each_finding_is_rendered_from_the_video(version: dict[str, Any]) -> None:
    text = shown(version, version["raw"])
    by_reader = {m.detectors: m for m in text.moments}
    ocr = next(m for m in text.moments if "ocr_text" in m.detectors)
    assert SHOWN_FROM_MS <= ocr.at_ms < 6_000, by_reader
    assert any("speech_text" in m.detectors for m in text.moments), by_reader
    kept = KeptMedia(version["media"], version["raw"], Limits())
    png = kept.frame(ocr)
    with Image.open(io.BytesIO(png)) as frame:
        assert frame.format == "PNG" and frame.size == demo_media.CARD
        assert float((np.asarray(frame.convert("L")) < 128).mean()) > 0.01  # the words


class VideoConsole(FakeConsole):
    """The web layer's console for a task on the video, its words and frames from the files
    (carol is granted the task's queue, `adult`: blurred until revealed)."""

    def __init__(self, version: dict[str, Any]) -> None:
        super().__init__()
        self.version = version
        self.kept = KeptMedia(version["media"], version["raw"], Limits())
        self.video_task = {
            "task_id": "review-v", "kind": "review", "queue": "adult", "content_id": "c-1",
            "content_version": 1, "decision_revision": 1, "policy_version": 1,
            "reasons": ["offensive-in-media"], "evidence": [version["ref"]],
        }  # fmt: skip

    def view(self, reviewer: str, task_id: str) -> tuple[dict[str, Any], list[Any]]:
        from modstream.console.evidence import evidence_items

        self._granted(reviewer)
        return self.video_task, evidence_items(self.video_task)

    def media_text(self, reviewer: str, task_id: str) -> MediaText:
        self._granted(reviewer)
        text = self.kept.media_text(self.version["results"], self.video_task["evidence"])
        for ref in text.read:
            self.audit(reviewer, "raw_output", evidence_ref=ref)
        return text

    def frame(self, reviewer: str, task_id: str, index: int, at_ms: int) -> tuple[bytes, str]:
        self._granted(reviewer)
        moment = moment_at(self.media_text(reviewer, task_id).moments, index, at_ms)
        assert moment is not None
        self.audit(reviewer, "evidence", evidence_ref=moment.fragment_ref)
        return self.kept.frame(moment), "image/png"

    def reveal_frame(self, reviewer: str, task_id: str, index: int, at_ms: int) -> None:
        self._granted(reviewer)
        self.audit(reviewer, "reveal", evidence_ref=f"{self.version['ref']}#t={at_ms}")


def test_the_task_page_shows_the_transcript_and_the_blurred_frames(
    version: dict[str, Any],
) -> None:
    console = VideoConsole(version)
    with client(console) as browser:  # type: ignore[arg-type]
        token = logged_in(browser, "carol", "carol-passphrase")
        page = browser.get("/tasks/review-v")
        assert page.status_code == 200
        assert "Text read and speech heard" in page.text and "bastard" in page.text
        assert 'data-detector="speech_text"' in page.text and "0:03." in page.text
        frames = console.media_text("carol", "review-v").moments
        src = f"/tasks/review-v/evidence/0/frame/{frames[0].at_ms}"
        assert f'src="{src}"' in page.text and 'class="evidence-image blurred"' in page.text
        image = browser.get(src)
        assert image.status_code == 200 and image.headers["content-type"] == "image/png"
        assert image.headers["cache-control"] == "no-store"
        revealed = browser.post(f"{src}/reveal", headers={"X-CSRF-Token": token})
        assert revealed.json() == {"revealed": 0, "at_ms": frames[0].at_ms}
    actions = [action for _, action, _ in console.log]
    assert actions.count("raw_output") >= 2 * SEGMENTS  # each kept file read is logged
    assert "evidence" in actions and "reveal" in actions
