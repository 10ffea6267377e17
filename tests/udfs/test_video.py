"""Video through PyAV and the image detector: segments, sampling, corrupt input."""

from __future__ import annotations

import pytest

from tests.udfs.frames import background, flagged
from udfs.detector import MediaError
from udfs.nsfw_image import NsfwImage
from udfs.video import encode, frames, sample, score_segments


@pytest.fixture(scope="module")
def detector() -> NsfwImage:
    return NsfwImage(intra_op_threads=2)


def test_sampling_picks_frames_of_each_segment() -> None:
    assert sample(20, 2, 0, 1) == list(range(10))
    assert sample(20, 2, 1, 5) == [10, 15]
    assert sample(7, 3, 2, 1) == [6]


def test_the_flagged_frame_raises_only_its_segment(detector: NsfwImage) -> None:
    images = [background(i) for i in range(20)]
    images[13] = flagged()
    video = encode(images)
    assert len(frames(video)) == 20
    first, second = score_segments(detector, video, segments=2, sample_every=1)
    assert second > 0.05 > first
    # Sampling every 5th frame of segment 2 looks at frames 10 and 15: it misses frame 13.
    _, sampled = score_segments(detector, video, segments=2, sample_every=5)
    assert sampled < 0.05


def test_a_corrupt_video_is_a_media_error(detector: NsfwImage) -> None:
    video = encode([background(i) for i in range(5)])
    with pytest.raises(MediaError):
        score_segments(detector, video[: len(video) // 4] + b"\x00" * 100)
    with pytest.raises(MediaError):
        frames(b"not a video at all")


def test_a_video_segment_request_is_scored_from_its_frames(detector: NsfwImage) -> None:
    from udfs.detector import Item

    images = [background(i) for i in range(20)]
    images[13] = flagged()
    video = encode(images)
    first, second, broken = detector.detect(
        [
            Item(data=video, mime_type="video/mp4", segment=0, segments=2),
            Item(data=video, mime_type="video/mp4", segment=1, segments=2),
            Item(data=b"garbage", mime_type="video/mp4", segment=0, segments=2),
        ]
    )
    assert isinstance(first, dict) and isinstance(second, dict)
    assert second["nsfw"] > 0.05 > first["nsfw"]
    assert isinstance(broken, MediaError)
