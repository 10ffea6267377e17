"""Video segments through a frame scorer: decode with PyAV (its wheel ships FFmpeg), sample
frames, score them; a segment's score is its highest frame score over every video stream.

Segments are equal runs of frames (`segments` from the upload) of each video stream. Which
frames of a segment are scored is a `Sampling`: every frame (the default), or shot-aware
(issue 28 item 4): the segment's first frame, every keyframe the encoder marked, every scene
change (a frame whose small grey thumbnail differs from the last scored one's by more than
`SCENE_CHANGE`) and, within a shot, one frame at least every `every_ms` of presentation time
(the policy's `detectors.video.sample_ms`). Sampling trades compute for recall: docs/scanning.md,
"Video", has the measured recall (`make bench-shots`).

Hostile video is bounded before it costs anything (docs/scanning.md, "Hostile media"): the
container format is fixed by the declared MIME type (FFmpeg never guesses, so a playlist or
concat file cannot make it open other files), a first pass only demuxes and counts the frames
of every video stream (more than `max_frames`, or `max_decoded_pixels` in all, is refused), the
declared size of each stream and of each decoded frame is checked against `max_image_pixels`,
and the second pass streams frames to the scorer in chunks, never holding the whole video.
One file is decoded once for all its segments; `OncePerVideo` keeps the scores of recent files
so that a version's segment requests in later batches do not decode it again.
"""

from __future__ import annotations

import io
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import av
import numpy as np
from PIL import Image

from modstream.core.limits import Limits
from modstream.detectors.detector import MediaError
from modstream.detectors.media import check_pixels

# Declared MIME type -> FFmpeg demuxer. Anything else is not decoded.
VIDEO_FORMATS = {
    "video/mp4": "mp4",
    "video/quicktime": "mov",
    "video/x-m4v": "mp4",
    "video/3gpp": "3gp",
    "video/webm": "webm",
    "video/x-matroska": "matroska",
    "video/x-msvideo": "avi",
    "video/mpeg": "mpeg",
    "video/mp2t": "mpegts",
    "video/ogg": "ogg",
    "video/x-flv": "flv",
}
CHUNK = 32  # frames per scorer call: bounds memory whatever the video's length
# A scene change: the mean absolute difference of two frames' 16x16 grey thumbnails, as a
# share of full scale, above this (a cut between two shots is 0.15 or more; compression noise
# and a moving camera within a shot stay under 0.05 on the benchmark's videos).
SCENE_CHANGE = 0.08
THUMBNAIL = 16
ScoreFrames = Callable[[Sequence[Image.Image]], list[float]]
T = TypeVar("T")  # what OncePerVideo keeps per file: segment scores, segment readings


@dataclass(frozen=True)
class Sampling:
    """Which frames of a segment are scored. `shots` off: every `sample_every`-th frame (1:
    every frame). `shots` on: the segment's first frame, keyframes, scene changes and, within a
    shot, at least one frame every `every_ms` ms (0: no floor: keyframes and cuts only)."""

    sample_every: int = 1
    shots: bool = False
    every_ms: int = 0

    @classmethod
    def of_request(cls, sample_ms: int | None, sample_every: int = 1) -> Sampling:
        """A request's `sample_ms` (the policy's `detectors.video.sample_ms`), or `sample_every`
        when it has none."""
        if sample_ms is None:
            return cls(sample_every=max(1, sample_every))
        return cls(shots=True, every_ms=max(0, sample_ms))


class ShotSampler:
    """The shot-aware choice, one stream and segment at a time: `take` says whether a frame is
    scored, fed every decoded frame in order."""

    def __init__(self, sampling: Sampling) -> None:
        self.sampling = sampling
        self.last: dict[tuple[int, int], tuple[Any, int]] = {}  # (stream, segment) -> taken

    def take(self, stream: int, segment: int, frame: Any, number: int) -> bool:
        at_ms = round(frame.time * 1000) if frame.time is not None else number
        thumbnail = (
            frame.reformat(width=THUMBNAIL, height=THUMBNAIL, format="gray")
            .to_ndarray()
            .astype(np.int16)
        )
        last = self.last.get((stream, segment))
        taken = (
            last is None
            or bool(getattr(frame, "key_frame", False))
            or float(np.abs(thumbnail - last[0]).mean()) / 255.0 > SCENE_CHANGE
            or (self.sampling.every_ms > 0 and at_ms - last[1] >= self.sampling.every_ms)
        )
        if taken:
            self.last[(stream, segment)] = (thumbnail, at_ms)
        return taken


def sample(count: int, segments: int, segment: int, sample_every: int) -> list[int]:
    """Frame indices of `segment` (0-based) that get scored, of a stream of `count` frames."""
    size = max(1, -(-count // segments))
    start, end = segment * size, min(count, (segment + 1) * size)
    return list(range(start, end, max(1, sample_every)))


def _open(data: bytes, mime_type: str | None) -> Any:
    fmt = VIDEO_FORMATS.get(mime_type or "")
    if fmt is None:
        raise MediaError(f"video: no decoder for the declared type {str(mime_type)[:64]!r}")
    return av.open(io.BytesIO(data), format=fmt)


def frame_counts(data: bytes, mime_type: str | None, limits: Limits) -> dict[int, int]:
    """Frames per video stream (by stream index), demuxed, not decoded; MediaError for a file
    without video, over a bound, or that does not demux."""
    try:
        with _open(data, mime_type) as container:
            streams = list(container.streams.video)
            if not streams:
                raise MediaError("video: no video stream")
            sizes = {}
            for stream in streams:
                width, height = stream.codec_context.width, stream.codec_context.height
                if width or height:  # 0: not in the headers; each decoded frame is checked
                    check_pixels(width, height, limits)
                sizes[stream.index] = width * height
            counts = dict.fromkeys(sizes, 0)
            total = pixels = 0
            for packet in container.demux(*streams):
                if not packet.size:
                    continue  # the flush packet at the end of each stream
                counts[packet.stream.index] += 1
                total += 1
                pixels += sizes[packet.stream.index]
                if total > limits.max_frames or pixels > limits.max_decoded_pixels:
                    raise MediaError(
                        f"video: more than {limits.max_frames} frames or "
                        f"{limits.max_decoded_pixels} pixels in all"
                    )
    except MediaError:
        raise
    except Exception as error:  # FFmpeg and PyAV raise many kinds on hostile input
        raise MediaError(f"video does not decode ({type(error).__name__})") from None
    if total == 0:
        raise MediaError("video has no frames")
    return counts


def decoded(
    data: bytes, mime_type: str | None, limits: Limits
) -> Iterator[tuple[int, int, Any]]:  # fmt: skip
    """(stream index, frame number in its stream, frame) for every frame of every video
    stream, one at a time, each frame's size checked before it is converted, and the frame
    and pixel totals again (a stream's size may change, or be unknown until decoded)."""
    total = pixels = 0
    try:
        with _open(data, mime_type) as container:
            streams = list(container.streams.video)
            seen = {stream.index: 0 for stream in streams}
            for packet in container.demux(*streams):
                for frame in packet.decode():
                    index = packet.stream.index
                    total += 1
                    pixels += frame.width * frame.height
                    if total > limits.max_frames or pixels > limits.max_decoded_pixels:
                        raise MediaError(
                            f"video: more than {limits.max_frames} frames or "
                            f"{limits.max_decoded_pixels} pixels in all"
                        )
                    check_pixels(frame.width, frame.height, limits)
                    yield index, seen[index], frame
                    seen[index] += 1
    except MediaError:
        raise
    except Exception as error:
        raise MediaError(f"video does not decode ({type(error).__name__})") from None


def frame_at(data: bytes, mime_type: str | None, at_ms: int, limits: Limits) -> Image.Image:
    """The frame of the first video stream shown at `at_ms` (the last one presented at or
    before it; the first frame for an earlier time), for a reviewer to see a finding's moment
    (the review console). Decoded with the same bounds as scanning; MediaError otherwise."""
    shown: Any = None
    first_stream: int | None = None
    for stream, _number, frame in decoded(data, mime_type, limits):
        first_stream = stream if first_stream is None else first_stream
        if stream != first_stream:
            continue
        frame_ms = round(frame.time * 1000) if frame.time is not None else None
        if shown is not None and (frame_ms is None or frame_ms > at_ms):
            break
        shown = frame
        if frame_ms is not None and frame_ms >= at_ms:
            break
    if shown is None:
        raise MediaError("video has no frames")
    return shown.to_image()


def segment_scores(
    data: bytes,
    mime_type: str | None,
    segments: int,
    score: ScoreFrames,
    *,
    sample_every: int = 1,
    sampling: Sampling | None = None,
    limits: Limits | None = None,
    scored: list[tuple[int, int]] | None = None,
) -> list[float]:
    """The highest sampled frame score of each segment, over every video stream; the file is
    decoded once, and frames go to `score` in chunks of `CHUNK`. `sampling` (default: every
    `sample_every`-th frame) chooses the frames; `scored`, when given, collects the (stream,
    frame number) of each frame scored (benchmarks and tests)."""
    limits = limits or Limits()
    sampling = sampling or Sampling(sample_every=sample_every)
    counts = frame_counts(data, mime_type, limits)
    every = max(1, sampling.sample_every)
    shots = ShotSampler(sampling) if sampling.shots else None
    best = [0.0] * segments
    frames: list[Image.Image] = []
    owners: list[int] = []

    def flush() -> None:
        for segment, value in zip(owners, score(frames), strict=True):
            best[segment] = max(best[segment], value)
        frames.clear()
        owners.clear()

    for stream, number, frame in decoded(data, mime_type, limits):
        size = max(1, -(-counts[stream] // segments))
        segment = min(segments - 1, number // size)
        if shots is not None:
            if not shots.take(stream, segment, frame, number):
                continue
        elif (number - segment * size) % every:
            continue
        frames.append(frame.to_image())
        owners.append(segment)
        if scored is not None:
            scored.append((stream, number))
        if len(frames) >= CHUNK:
            flush()
    if frames:
        flush()
    return best


class OncePerVideo(Generic[T]):
    """Segment scores of recently scanned videos, by content: a version's segment requests,
    in one batch or in batches close together, decode the file once. Bounded (least recently
    used out), shared by the model workers: a second worker asking for a video being decoded
    waits for the first one's result instead of decoding it again."""

    def __init__(self, size: int = 8) -> None:
        self.size = size
        self._done: OrderedDict[Hashable, T | MediaError] = OrderedDict()
        self._running: dict[Hashable, threading.Event] = {}
        self._lock = threading.Lock()

    def get(self, key: Hashable, compute: Callable[[], T]) -> T | MediaError:
        while True:
            with self._lock:
                if key in self._done:
                    self._done.move_to_end(key)
                    return self._done[key]
                running = self._running.get(key)
                if running is None:
                    self._running[key] = threading.Event()
            if running is None:
                break
            running.wait()  # then look again: the first one may have failed
        value: T | MediaError
        try:
            value = compute()
        except MediaError as error:
            value = error
        finally:
            with self._lock:
                self._running.pop(key).set()
        with self._lock:
            self._done[key] = value
            while len(self._done) > self.size:
                self._done.popitem(last=False)
        return value


def encode(images: Sequence[Image.Image], fps: int = 10, codec: str = "mpeg4") -> bytes:
    """Frames -> an MP4 (for tests and benchmarks)."""
    return encode_streams([images], fps, codec)


def encode_streams(
    streams: Sequence[Sequence[Image.Image]], fps: int = 10, codec: str = "mpeg4"
) -> bytes:
    """One MP4 with one video stream per list of frames (for tests: multi-stream video)."""
    buffer = io.BytesIO()
    container: Any
    with av.open(buffer, mode="w", format="mp4") as container:
        outputs: list[Any] = []
        for images in streams:
            stream: Any = container.add_stream(codec, rate=fps)
            stream.width, stream.height = images[0].size
            stream.pix_fmt = "yuv420p"
            outputs.append(stream)
        for images, stream in zip(streams, outputs, strict=True):
            for image in images:
                for packet in stream.encode(av.VideoFrame.from_image(image)):
                    container.mux(packet)
        for stream in outputs:
            for packet in stream.encode():
                container.mux(packet)
    return buffer.getvalue()
