"""Video segments through the image detector: decode with PyAV (its wheel ships FFmpeg),
sample frames, score them with nsfw_image; a segment's score is its highest frame score.

Segments are equal runs of frames (`segments` from the upload); within a segment every
`sample_every`-th frame is scored. Sampling trades compute for recall: docs/BENCHMARKS.md has
the measured recall against the sampling rate.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from typing import Any

import av
from PIL import Image

from udfs.detector import MediaError
from udfs.nsfw_image import NsfwImage


def frames(data: bytes, max_frames: int = 100_000) -> list[Image.Image]:
    """Every frame of a video, decoded."""
    try:
        container: Any
        with av.open(io.BytesIO(data)) as container:
            stream = container.streams.video[0]
            decoded = []
            for frame in container.decode(stream):
                decoded.append(frame.to_image())
                if len(decoded) >= max_frames:
                    break
            return decoded
    except (av.error.FFmpegError, IndexError, ValueError) as error:
        raise MediaError(f"video does not decode ({type(error).__name__})") from None


def sample(count: int, segments: int, segment: int, sample_every: int) -> list[int]:
    """Frame indices of `segment` (0-based) that get scored."""
    size = max(1, -(-count // segments))
    start, end = segment * size, min(count, (segment + 1) * size)
    return list(range(start, end, max(1, sample_every)))


def score_segments(
    detector: NsfwImage, data: bytes, segments: int = 1, sample_every: int = 1
) -> list[float]:
    """The highest sampled frame score of each segment."""
    decoded = frames(data)
    if not decoded:
        raise MediaError("video has no frames")
    scores: list[float] = []
    for segment in range(segments):
        picked = [decoded[i] for i in sample(len(decoded), segments, segment, sample_every)]
        scores.append(max(detector.score_frames(picked), default=0.0))
    return scores


def encode(images: Sequence[Image.Image], fps: int = 10, codec: str = "mpeg4") -> bytes:
    """Frames -> an MP4 (for tests and benchmarks)."""
    buffer = io.BytesIO()
    container: Any
    stream: Any
    with av.open(buffer, mode="w", format="mp4") as container:
        stream = container.add_stream(codec, rate=fps)
        stream.width, stream.height = images[0].size
        stream.pix_fmt = "yuv420p"
        for image in images:
            for packet in stream.encode(av.VideoFrame.from_image(image)):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)
    return buffer.getvalue()
