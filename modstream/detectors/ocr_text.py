"""ocr_text: text written in images and video frames, read by RapidOCR and scored by the text
detector, so an image whose only offence is its caption is found.

RapidOCR (`rapidocr-onnxruntime`, pinned in pyproject.toml) runs PP-OCRv4's text finder, angle
classifier and recogniser on ONNX Runtime; the three .onnx files ship in its wheel (nothing is
fetched at run time). Its `onnxruntime` requirement is not installed (`make setup` installs it
with --no-deps: the CPU package would overwrite onnxruntime-gpu, which provides the same module).

Cost bounds (modstream/core/limits.py): the text finder sees at most `max_ocr_side` pixels on the
longest side (a larger image or frame is scaled down: small print in a large photo is missed);
a video is read one frame per `MODSTREAM_OCR_EVERY_MS` (1,000 ms) of each segment, and an
animated image or a video never gets more than `max_ocr_frames` frames read (sampled evenly).
The text of every frame of a batch goes to `offensive_text` in one call
(modstream/detectors/text_in_media.py). Findings: the line's box `[left, top, right, bottom]` in the
pixels of the frame as uploaded, the recogniser's confidence and, for video, the frame's time
`frame_ms`.
"""

from __future__ import annotations

import hashlib
import io
import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from PIL import Image

from modstream.core.limits import Limits
from modstream.detectors import language, media, video
from modstream.detectors.detector import Evidence, Item, MediaError, file_digest
from modstream.detectors.text_in_media import Reading, ScoreTexts, evidence_of

ADAPTER_VERSION = "a1"  # P(offensive) of the text read, as offensive_text scores it
FrameReadings = list[list[Reading]]  # per segment: the lines read in its sampled frames


class OcrText:
    name: str = "ocr_text"
    modalities: tuple[str, ...] = ("image", "video")
    labels: tuple[str, ...] = ("offensive",)

    def __init__(
        self,
        score_texts: ScoreTexts,
        text_model_version: str,
        *,
        intra_op_threads: int | None = None,
        limits: Limits | None = None,
    ) -> None:
        from rapidocr_onnxruntime import RapidOCR

        self.limits = limits or Limits()
        threads = intra_op_threads or int(os.environ.get("MODSTREAM_ONNX_THREADS") or 0)
        self.engine = RapidOCR(
            intra_op_num_threads=threads or max(1, (os.cpu_count() or 2) // 2),
            inter_op_num_threads=1,
            det_limit_type="max",  # scale down to the bound, never up (the default scales up)
            det_limit_side_len=self.limits.max_ocr_side,
            rec_batch_num=16,  # the lines of one frame per recogniser call
        )
        self.score_texts = score_texts
        self.languages = language.identifier()  # names the language of what was read
        self.every_ms = max(1, int(os.environ.get("MODSTREAM_OCR_EVERY_MS") or 1000))
        self.model_version = f"rapidocr-{_models_digest()}+{text_model_version}-{ADAPTER_VERSION}"
        self.videos: video.OncePerVideo[FrameReadings] = video.OncePerVideo()

    def detect(self, items: Sequence[Item]) -> list[Evidence | MediaError]:
        """Each item's lines read, then all of them scored in one text-model call."""
        readings: list[list[Reading] | MediaError] = []
        for item in items:
            try:
                if (item.mime_type or "").startswith("video/"):
                    readings.append(self._segment(item))
                else:
                    readings.append(self._image(item.data or b""))
            except MediaError as error:
                readings.append(error)
        return evidence_of(readings, self.score_texts, self.languages.identify)

    def _image(self, data: bytes) -> list[Reading]:
        """The lines of an image's frames (an animation: at most `max_ocr_frames`, evenly)."""
        media.pillow_limit(self.limits)  # before the header is read for the frame count
        step = -(-_frame_count(data) // self.limits.max_ocr_frames)
        lines: list[Reading] = []
        for index, frame in enumerate(media.image_frames(data, self.limits)):
            if index % step == 0:
                lines += self.read(frame, group=index)
        return lines

    def _segment(self, item: Item) -> list[Reading]:
        data = item.data or b""
        key = (hashlib.sha256(data).digest(), item.mime_type, item.segments, self.every_ms)
        per_segment = self.videos.get(
            key, lambda: self._video(data, item.mime_type, item.segments)
        )  # fmt: skip
        if isinstance(per_segment, MediaError):
            raise per_segment
        segment = item.segment or 0
        if segment >= len(per_segment):
            raise MediaError(f"segment {segment} of {len(per_segment)}")
        return per_segment[segment]

    def _video(self, data: bytes, mime_type: str | None, segments: int) -> FrameReadings:
        """Every segment's lines, the file decoded once."""
        per_segment: FrameReadings = [[] for _ in range(segments)]
        for segment, frame_ms, frame in sampled_frames(
            data, mime_type, segments, self.every_ms, self.limits
        ):
            per_segment[segment] += self.read(frame, group=frame_ms, frame_ms=frame_ms)
        return per_segment

    def read(self, frame: Image.Image, *, group: int, frame_ms: int | None = None) -> list[Reading]:
        """The lines RapidOCR reads in one frame, with their boxes and confidences."""
        try:
            lines, _elapsed = self.engine(frame)
        except Exception as error:  # OpenCV or the library on a frame it cannot take
            raise MediaError(f"ocr failed on a frame ({type(error).__name__})") from None
        where_frame = {} if frame_ms is None else {"frame_ms": frame_ms}
        return [
            Reading(str(text), float(confidence), group, {"box": _box(points)} | where_frame)
            for points, text, confidence in lines or []
        ]


def sampled_frames(
    data: bytes, mime_type: str | None, segments: int, every_ms: int, limits: Limits
) -> Iterator[tuple[int, int, Image.Image]]:
    """(segment, frame time in ms, frame) of the frames OCR reads: each segment's first frame
    of every stream, then one each `every_ms`, and never more than about `max_ocr_frames` in
    the file (a frame-number step over all streams; bounded, not cut short: a later frame is
    sampled as sparsely as an early one)."""
    counts = video.frame_counts(data, mime_type, limits)
    step = max(1, -(-sum(counts.values()) // limits.max_ocr_frames))
    last_ms: dict[tuple[int, int], int] = {}
    for stream, number, frame in video.decoded(data, mime_type, limits):
        size = max(1, -(-counts[stream] // segments))
        segment = min(segments - 1, number // size)
        if (number - segment * size) % step:
            continue
        frame_ms = round(frame.time * 1000) if frame.time is not None else number
        previous = last_ms.get((stream, segment))
        if previous is not None and frame_ms - previous < every_ms:
            continue
        last_ms[(stream, segment)] = frame_ms
        yield segment, frame_ms, frame.to_image()


def _frame_count(data: bytes) -> int:
    """Frames of a still or animated image, from its header (1 when it does not say)."""
    try:
        with Image.open(io.BytesIO(data), formats=media.IMAGE_FORMATS) as image:
            return max(1, int(getattr(image, "n_frames", 1)))
    except Exception:
        return 1  # image_frames refuses what does not open, with its reason


def _box(points: Any) -> list[int]:
    """A text line's four corners -> `[left, top, right, bottom]` in whole pixels."""
    xs = [float(point[0]) for point in points]
    ys = [float(point[1]) for point in points]
    return [int(min(xs)), int(min(ys)), round(max(xs)), round(max(ys))]


def _models_digest() -> str:
    """The three shipped .onnx files' identity (12 hex of a sha256 over theirs)."""
    import rapidocr_onnxruntime

    models = sorted((Path(rapidocr_onnxruntime.__file__).parent / "models").glob("*.onnx"))
    return hashlib.sha256("".join(file_digest(path) for path in models).encode()).hexdigest()[:12]
