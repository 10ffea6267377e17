"""ocr_text on real images rendered here with Pillow: RapidOCR reads the words, offensive_text
scores them, the findings say where (box, frame time) and how sure the reader was."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from PIL import Image

from modstream.core.limits import Limits
from modstream.detectors import video
from modstream.detectors.detector import Evidence, Item, MediaError
from modstream.detectors.ocr_text import OcrText
from modstream.detectors.registry import detector
from modstream.jobs.scan.job import ScanConfig
from modstream.scanning.batch import handle_batch
from modstream.testing.media import AT, card
from modstream.testing.media import WRITTEN_OFFENSIVE as OFFENSIVE
from modstream.testing.records import T0, TEST_KEYRING
from modstream.testing.scans import request
from modstream.trust import signing

CLEAN = "lovely weather today"


def encoded(image: Image.Image, fmt: str = "PNG", **options: object) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, format=fmt, **options)
    return buffer.getvalue()


@pytest.fixture(scope="module")
def ocr() -> OcrText:
    built = detector("ocr_text", intra_op_threads=1)
    assert isinstance(built, OcrText)
    return built


def evidence(result: Evidence | MediaError) -> Evidence:
    assert isinstance(result, Evidence), result
    return result


def test_written_offence_is_read_and_scored_and_clean_words_are_not(ocr: OcrText) -> None:
    offensive, clean, blank = (
        evidence(r)
        for r in ocr.detect(
            [
                Item(data=encoded(card(OFFENSIVE)), mime_type="image/png"),
                Item(data=encoded(card(CLEAN), "JPEG"), mime_type="image/jpeg"),
                Item(data=encoded(card()), mime_type="image/png"),
            ]
        )
    )
    assert offensive.scores["offensive"] >= 0.85  # global.yaml's offensive-in-media-limit
    [finding] = offensive.findings
    left, top, right, bottom = finding["box"]
    assert left <= AT[0] + 10 and top <= AT[1] + 15 and right > 300 and bottom > AT[1] + 30
    assert finding["confidence"] > 0.8 and "frame_ms" not in finding
    assert clean.scores["offensive"] < 0.5 and len(clean.findings) == 1
    assert blank.scores == {"offensive": 0.0} and blank.findings == ()
    # The language of what was read (issue 28 item 3); nothing read, none named.
    assert clean.language is not None and clean.language.code == "en"
    assert blank.language is None


def test_a_large_image_is_scaled_for_the_finder_and_boxes_stay_in_its_own_pixels(
    ocr: OcrText,
) -> None:
    big = card(OFFENSIVE, size=(2400, 600), font_size=120)
    [result] = ocr.detect([Item(data=encoded(big), mime_type="image/png")])
    found = evidence(result)
    assert found.scores["offensive"] >= 0.85
    [finding] = found.findings
    assert finding["box"][2] > 800  # the 2400 px image's pixels, not the 960 px finder's


def test_video_segments_are_read_per_frame_time(ocr: OcrText) -> None:
    """Three one-second segments at 10 fps; the offence is shown in the second only."""
    frames = [card("hello there")] * 10 + [card(OFFENSIVE)] * 10 + [card("good morning")] * 10
    data = video.encode(frames, fps=10)
    results = ocr.detect(
        [Item(data=data, mime_type="video/mp4", segment=s, segments=3) for s in range(3)]
    )
    first, second, third = (evidence(r) for r in results)
    assert second.scores["offensive"] >= 0.85
    assert first.scores["offensive"] < 0.5 and third.scores["offensive"] < 0.5
    assert [f["frame_ms"] for f in second.findings] == [1000]  # one frame a second


def test_undecodable_media_is_an_error_for_that_item_only(ocr: OcrText) -> None:
    broken, fine = ocr.detect(
        [
            Item(data=b"\x89PNG\r\n\x1a\nnot really", mime_type="image/png"),
            Item(data=encoded(card(CLEAN)), mime_type="image/png"),
        ]
    )
    assert isinstance(broken, MediaError) and isinstance(fine, Evidence)
    [truncated] = ocr.detect([Item(data=video.encode([card()] * 3)[:200], mime_type="video/mp4")])
    assert isinstance(truncated, MediaError)


def test_an_animation_is_read_on_at_most_max_ocr_frames_frames(ocr: OcrText) -> None:
    bounded = OcrText(
        ocr.score_texts, "text-1", intra_op_threads=1, limits=Limits(max_ocr_frames=3)
    )
    seen: list[int] = []
    real = bounded.read

    def counting(frame: Image.Image, *, group: int, frame_ms: int | None = None) -> list:  # type: ignore[type-arg]
        seen.append(group)
        return real(frame, group=group, frame_ms=frame_ms)

    bounded.read = counting  # type: ignore[method-assign]
    frames = [card(f"{CLEAN} {n}" if n < 9 else OFFENSIVE) for n in range(10)]  # all distinct
    gif = encoded(frames[0], "GIF", save_all=True, append_images=frames[1:], duration=100)
    [result] = bounded.detect([Item(data=gif, mime_type="image/gif")])
    assert seen == [0, 4, 8]  # evenly over the ten frames, not the first three
    assert evidence(result).scores["offensive"] < 0.5  # frame 9 is the price of the bound


def test_a_scan_request_for_ocr_text_becomes_a_signed_result_with_findings(
    ocr: OcrText, tmp_path: Path
) -> None:
    """The scan job's batch path (modstream/scanning/batch.py) with the registry's detector: the
    media read from the media root, the findings in the result, the signature over them."""
    image = encoded(card(OFFENSIVE))
    (tmp_path / "caption.png").write_bytes(image)
    config = ScanConfig(
        topics={"scan.requests.image": "p.image", "detector.results": "p.results"},
        media_root=str(tmp_path),
        keyring=TEST_KEYRING,
    )
    ask = request(
        "ocr-1", None, detector="ocr_text", modality="image", mime_type="image/png",
        media_ref=(tmp_path / "caption.png").as_uri(), size_bytes=len(image),
    )  # fmt: skip
    handled = handle_batch(config, [("p.image", "c-ocr-1", json.dumps(ask))], T0, detector)
    [(topic, value)] = zip(handled.topics, handled.values, strict=True)
    result = json.loads(value)
    assert topic == "p.results" and result["status"] == "ok"
    assert result["model_version"] == ocr.model_version
    assert result["scores"]["offensive"] >= 0.85 and result["findings"][0]["box"]
    assert signing.check("detector.results", result, TEST_KEYRING) is None
    result["findings"][0]["box"] = [0, 0, 1, 1]  # the findings are signed too
    assert signing.check("detector.results", result, TEST_KEYRING) is not None
