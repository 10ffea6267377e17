"""Video through PyAV and the image detector: segments, sampling, every stream, one decode per
file, bounds, corrupt input."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest
from PIL import Image

from modstream.core.limits import Limits
from modstream.detectors import video
from modstream.detectors.detector import Item, MediaError
from modstream.detectors.nsfw_image import NsfwImage
from modstream.detectors.video import (
    CHUNK,
    OncePerVideo,
    encode,
    encode_streams,
    frame_counts,
    sample,
    segment_scores,
)
from modstream.testing.media import background, flagged

MP4 = "video/mp4"


@pytest.fixture(scope="module")
def detector() -> NsfwImage:
    return NsfwImage(intra_op_threads=2)


def flagged_at(index: int, count: int = 20, seed: int = 0) -> list[Image.Image]:
    images = [background(seed + i) for i in range(count)]
    images[index] = flagged()
    return images


def test_sampling_picks_frames_of_each_segment() -> None:
    assert sample(20, 2, 0, 1) == list(range(10))
    assert sample(20, 2, 1, 5) == [10, 15]
    assert sample(7, 3, 2, 1) == [6]


def test_the_flagged_frame_raises_only_its_segment(detector: NsfwImage) -> None:
    data = encode(flagged_at(13))
    assert frame_counts(data, MP4, Limits()) == {0: 20}
    first, second = segment_scores(data, MP4, 2, detector.score_frames)
    assert second > 0.05 > first
    # Sampling every 5th frame of segment 2 looks at frames 10 and 15: it misses frame 13.
    _, sampled = segment_scores(data, MP4, 2, detector.score_frames, sample_every=5)
    assert sampled < 0.05


def test_every_video_stream_is_scored(detector: NsfwImage) -> None:
    """A second video stream carries the flagged frame; the first is clean throughout."""
    clean = [background(100 + i) for i in range(10)]
    data = encode_streams([clean, flagged_at(7, count=10)])
    assert frame_counts(data, MP4, Limits()) == {0: 10, 1: 10}
    first, second = segment_scores(data, MP4, 2, detector.score_frames)
    assert second > 0.05 > first
    [only_first] = segment_scores(encode(clean), MP4, 1, detector.score_frames)
    assert only_first < 0.05


def test_frames_reach_the_scorer_in_chunks_not_all_at_once() -> None:
    seen: list[int] = []

    def score(frames: Sequence[Image.Image]) -> list[float]:
        seen.append(len(frames))
        return [0.0] * len(frames)

    data = encode([background(i, size=64) for i in range(CHUNK * 2 + 5)])
    assert segment_scores(data, MP4, 3, score) == [0.0, 0.0, 0.0]
    assert seen == [CHUNK, CHUNK, 5]


def test_bounds_refuse_a_video_before_it_is_decoded() -> None:
    data = encode([background(i, size=64) for i in range(12)])

    def never(_frames: Sequence[Image.Image]) -> list[float]:
        raise AssertionError("a refused video must not be scored")

    with pytest.raises(MediaError, match="frames"):
        segment_scores(data, MP4, 1, never, limits=Limits(max_frames=11))
    with pytest.raises(MediaError, match="pixels"):
        segment_scores(data, MP4, 1, never, limits=Limits(max_image_pixels=64 * 63))
    with pytest.raises(MediaError, match="pixels"):
        segment_scores(data, MP4, 1, never, limits=Limits(max_decoded_pixels=64 * 64 * 11))
    assert len(segment_scores(data, MP4, 1, lambda f: [0.0] * len(f), limits=Limits())) == 1


def test_a_corrupt_or_unsupported_video_is_a_media_error(detector: NsfwImage) -> None:
    data = encode([background(i) for i in range(5)])
    with pytest.raises(MediaError):
        segment_scores(data[: len(data) // 4] + b"\x00" * 100, MP4, 1, detector.score_frames)
    with pytest.raises(MediaError):
        frame_counts(b"not a video at all", MP4, Limits())
    with pytest.raises(MediaError):
        frame_counts(b"", MP4, Limits())
    with pytest.raises(MediaError, match="no decoder"):
        frame_counts(data, "video/x-unknown", Limits())
    # A concat playlist must never be opened as one: the declared type fixes the demuxer.
    playlist = b"ffconcat version 1.0\nfile '/etc/passwd'\n"
    with pytest.raises(MediaError):
        frame_counts(playlist, MP4, Limits())


def test_a_video_segment_request_is_scored_from_its_frames(detector: NsfwImage) -> None:
    data = encode(flagged_at(13, seed=300))
    first, second, broken = detector.detect(
        [
            Item(data=data, mime_type=MP4, segment=0, segments=2),
            Item(data=data, mime_type=MP4, segment=1, segments=2),
            Item(data=b"garbage", mime_type=MP4, segment=0, segments=2),
        ]
    )
    assert isinstance(first, dict) and isinstance(second, dict)
    assert second["nsfw"] > 0.05 > first["nsfw"]
    assert isinstance(broken, MediaError)


def test_a_version_is_decoded_once_for_all_its_segment_requests(
    detector: NsfwImage, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Segment requests of one version, in one batch or in later batches: one decode."""
    calls: list[int] = []
    real = video.segment_scores

    def counting(*args: Any, **kwargs: Any) -> list[float]:
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(video, "segment_scores", counting)
    data = encode(flagged_at(2, count=12, seed=500))
    batch = [Item(data=bytes(data), mime_type=MP4, segment=s, segments=4) for s in range(3)]
    results = detector.detect(batch)
    assert len(calls) == 1 and all(isinstance(r, dict) for r in results)
    [last] = detector.detect([Item(data=bytes(data), mime_type=MP4, segment=3, segments=4)])
    assert len(calls) == 1 and isinstance(last, dict)
    [beyond] = detector.detect([Item(data=data, mime_type=MP4, segment=4, segments=4)])
    assert isinstance(beyond, MediaError)


def test_once_per_video_computes_once_across_threads_and_keeps_errors() -> None:
    cache = OncePerVideo(size=2)
    started, release = threading.Event(), threading.Event()
    calls: list[str] = []

    def slow() -> list[float]:
        calls.append("slow")
        started.set()
        release.wait(5)
        return [0.5]

    values: list[Any] = []
    first = threading.Thread(target=lambda: values.append(cache.get("a", slow)))
    first.start()
    started.wait(5)
    second = threading.Thread(target=lambda: values.append(cache.get("a", slow)))
    second.start()
    release.set()
    first.join(5)
    second.join(5)
    assert values == [[0.5], [0.5]] and calls == ["slow"]

    def broken() -> list[float]:
        raise MediaError("video does not decode")

    assert isinstance(cache.get("b", broken), MediaError)
    assert isinstance(cache.get("b", lambda: [1.0]), MediaError)  # remembered
    cache.get("c", lambda: [0.0])  # size 2: "a" goes
    assert cache.get("a", lambda: [0.25]) == [0.25]

    def bug() -> list[float]:
        raise RuntimeError("not a media problem")

    with pytest.raises(RuntimeError):
        cache.get("d", bug)
    assert cache.get("d", lambda: [0.75]) == [0.75]  # not remembered, nobody left waiting


def test_the_decode_pass_checks_the_bounds_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """A stream whose size the headers do not tell (or that changes) is bounded while it is
    decoded: the demux pass's figures are not trusted alone."""
    data = encode([background(i, size=64) for i in range(12)])
    monkeypatch.setattr(video, "frame_counts", lambda *_args: {0: 12})
    scored: list[int] = []

    def score(frames: Sequence[Image.Image]) -> list[float]:
        scored.append(len(frames))
        return [0.0] * len(frames)

    with pytest.raises(MediaError, match="pixels"):
        segment_scores(data, MP4, 1, score, limits=Limits(max_decoded_pixels=64 * 64 * 3))
    with pytest.raises(MediaError, match="frames"):
        segment_scores(data, MP4, 1, score, limits=Limits(max_frames=5))
    with pytest.raises(MediaError, match="over the"):
        segment_scores(data, MP4, 1, score, limits=Limits(max_image_pixels=64 * 63))
    assert scored == []  # refused before a chunk was full


def _h264(images: Sequence[Image.Image]) -> bytes:
    """H.264 at 25 fps, with libx264's own keyframe placement (its first frame, scene cuts)."""
    return encode(images, fps=25, codec="libx264")


def _scored(data: bytes, sampling: video.Sampling, segments: int = 1) -> list[int]:
    scored: list[tuple[int, int]] = []
    segment_scores(data, MP4, segments, lambda f: [0.0] * len(f), sampling=sampling, scored=scored)
    return [number for _, number in scored]


def _panning(seed: int, count: int) -> list[Image.Image]:
    """A shot: one backdrop, panning a pixel a frame (motion, no cut)."""
    backdrop = background(seed, size=160)
    return [backdrop.crop((i, i, i + 128, i + 128)) for i in range(count)]


def test_shot_sampling_scores_each_shots_cut_and_nothing_else_without_a_floor() -> None:
    """Two shots of 30 frames (25 fps): the first frame, the cut at frame 30, and whatever
    libx264 marked a keyframe (here the same two frames); the pan within a shot is no cut."""
    frames = [*_panning(1, 30), *_panning(2, 30)]
    data = _h264(frames)
    taken = _scored(data, video.Sampling(shots=True, every_ms=0))
    assert taken[0] == 0 and 30 in taken
    assert len(taken) <= 4, taken  # not every frame: the shots, not the motion
    assert _scored(data, video.Sampling()) == list(range(60))  # the default: every frame


def test_shot_sampling_adds_a_frame_every_sample_ms_within_a_shot() -> None:
    """One shot of 75 frames at 25 fps (3 s): with a 1,000 ms floor, a frame each second."""
    data = _h264(_panning(3, 75))
    assert _scored(data, video.Sampling(shots=True, every_ms=0)) == [0]
    assert _scored(data, video.Sampling(shots=True, every_ms=1000)) == [0, 25, 50]


def test_each_segment_starts_with_a_scored_frame() -> None:
    data = _h264(_panning(4, 60))
    taken = _scored(data, video.Sampling(shots=True, every_ms=0), segments=3)
    assert {0, 20, 40} <= set(taken)


def test_a_short_shot_between_two_samples_is_found_by_its_cut(detector: NsfwImage) -> None:
    """A 4-frame flagged shot inside 3 s of one backdrop: every 25th frame misses it; the
    shot sampler takes its cut."""
    frames = _panning(5, 75)
    for number in range(40, 44):
        frames[number] = flagged().resize((128, 128))
    data = _h264(frames)
    [every_25th] = segment_scores(data, MP4, 1, detector.score_frames, sample_every=25)
    [by_shots] = segment_scores(
        data, MP4, 1, detector.score_frames, sampling=video.Sampling(shots=True, every_ms=1000)
    )
    assert every_25th < 0.05 < by_shots


def test_a_requests_sample_ms_chooses_the_sampling() -> None:
    assert video.Sampling.of_request(None, 3) == video.Sampling(sample_every=3)
    assert video.Sampling.of_request(500) == video.Sampling(shots=True, every_ms=500)


def test_nsfw_image_samples_a_video_as_its_request_says(detector: NsfwImage) -> None:
    frames = _panning(6, 75)
    for number in range(40, 44):
        frames[number] = flagged().resize((128, 128))
    data = _h264(frames)
    every_frame, by_shots = detector.detect(
        [Item(data=data, mime_type=MP4), Item(data=data, mime_type=MP4, sample_ms=1000)]
    )
    assert isinstance(every_frame, dict) and isinstance(by_shots, dict)
    assert every_frame["nsfw"] > 0.05 and by_shots["nsfw"] > 0.05


def test_the_frame_at_a_time_is_the_one_shown_then() -> None:
    """The review console's frame at a finding: the frame presented at or before the time
    (a written video: blank, then the words for the middle segment's 3 s, then blank)."""
    from modstream.demo.media import written_video

    data = written_video("you stupid bitch", segments=3)

    def inked(at_ms: int) -> float:
        grey = np.asarray(video.frame_at(data, "video/mp4", at_ms, Limits()).convert("L"))
        return float((grey < 128).mean())  # share of dark (written) pixels

    assert inked(0) == inked(1_500) == 0.0
    assert inked(3_000) > 0.01 and inked(4_700) > 0.01  # 3.0 s: the middle segment's first
    assert inked(6_000) == inked(60_000) == 0.0  # past the end: the last frame, blank
    with pytest.raises(MediaError):
        video.frame_at(data, "video/x-unknown", 0, Limits())
    with pytest.raises(MediaError):
        video.frame_at(b"not a video", "video/mp4", 0, Limits())
