"""The policy's frame sampling for video (`detectors.video.sample_ms`, issue 28 item 4): it
validates for video only, travels on the video's scan requests and reaches the detector as the
item's `sample_ms` (modstream/detectors/video.py: Sampling)."""

from __future__ import annotations

from pathlib import Path

import pytest

from modstream.core.limits import Limits
from modstream.policy.evaluate import PolicyError, load_policy
from modstream.scanning.batch import load_media
from modstream.scanning.plan import sample_ms
from modstream.testing.policies import global_document
from modstream.testing.versions import Version, context

MEDIA_CHECK_OK = {"mime_mismatch": 0.0, "corrupt": 0.0, "malware": 0.0}


def with_sampling(modality: str, sample_ms: int) -> dict[str, object]:
    detectors = global_document()["detectors"]
    detectors[modality] = {**detectors[modality], "sample_ms": sample_ms}
    return detectors


def test_sample_ms_is_a_video_setting() -> None:
    policy = load_policy(global_document(detectors=with_sampling("video", 1000)))
    assert sample_ms(policy, "video") == 1000
    assert sample_ms(policy, "image") is None
    assert sample_ms(load_policy(global_document()), "video") is None  # absent: every frame
    with pytest.raises(PolicyError, match="only video is sampled"):
        load_policy(global_document(detectors=with_sampling("image", 1000)))
    with pytest.raises(PolicyError, match="sample_ms"):
        load_policy(global_document(detectors=with_sampling("video", -1)))


def video_requests(ctx: object) -> list[dict[str, object]]:
    version = Version(ctx)  # type: ignore[arg-type]
    version.upload(
        modality="video", mime_type="video/mp4", size_bytes=90_000, segments=2, text=None,
        media_ref="file:///media/c-1.mp4",
    )  # fmt: skip
    for segment in (0, 1):
        version.evidence(
            detector="media_check", model_version="media_check-1", scores=MEDIA_CHECK_OK,
            segment_id=segment, event_id=f"mc-{segment}",
        )  # fmt: skip
    return version.of("scan.requests.video")


def test_video_requests_carry_the_policys_sampling_and_nothing_else_does() -> None:
    sampled = video_requests(context(detectors=with_sampling("video", 1000)))
    models = [r for r in sampled if r["detector"] == "nsfw_image"]
    assert len(models) == 2 and all(r["sample_ms"] == 1000 for r in sampled)
    assert all("sample_ms" not in r for r in video_requests(context()))


def test_the_scan_job_hands_a_requests_sampling_to_the_detector(tmp_path: Path) -> None:
    (tmp_path / "v.mp4").write_bytes(b"\0" * 64)
    request = {
        "media_ref": (tmp_path / "v.mp4").as_uri(), "mime_type": "video/mp4", "segments": 2,
        "segment_id": 1, "size_bytes": 64, "sample_ms": 500,
    }  # fmt: skip
    assert load_media(request, tmp_path, Limits()).sample_ms == 500
    del request["sample_ms"]
    assert load_media(request, tmp_path, Limits()).sample_ms is None
