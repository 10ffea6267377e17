"""The real media of `modstream demo --detectors real` (modstream/demo/media.py): which uploads
get which kind, the files each kind makes, every media upload real, and the check of how the
kinds were decided (demo_checks.read_media_outcomes)."""

from __future__ import annotations

import io
import wave
from pathlib import Path
from typing import Any

import pytest

from modstream.demo import checks as demo_checks
from modstream.demo import media as demo_media
from modstream.demo.demo_workload import real_content, upserts
from modstream.demo.workload import T0, generate
from modstream.detectors import video
from modstream.detectors.media_check import magic_matches, structurally_sound


def test_each_kind_goes_to_the_first_upload_of_its_modality_past_the_scenario() -> None:
    uploads = upserts(generate(seed=7, versions=60))
    kinds = demo_media.kinds_of(uploads)
    assert sorted(k.name for k in kinds.values()) == sorted(k.name for k in demo_media.KINDS)
    modality = {u.get("content_id"): u.get("modality") for u in uploads}
    for content_id, kind in kinds.items():
        assert modality[content_id] == kind.modality
        assert (demo_media.content_index(content_id) or 0) >= demo_media.FIRST_INDEX
    # the run id prefix changes nothing: the same indexes
    prefixed = demo_media.kinds_of(upserts(generate(seed=7, versions=60, prefix="demo1a2b3c-")))
    assert {c.removeprefix("demo1a2b3c-") for c in prefixed} == set(kinds)


@pytest.mark.parametrize("kind", demo_media.KINDS, ids=lambda kind: kind.name)
def test_each_kind_is_a_sound_file_of_its_declared_type(kind: demo_media.MediaKind) -> None:
    data, mime_type = demo_media.body(kind, kind.modality, 0, 3)
    assert magic_matches(data, mime_type) and structurally_sound(data, mime_type)
    if kind.modality == "video":
        assert video.frame_counts(data, mime_type, video.Limits())[0] >= 3


def test_spoken_words_fall_inside_the_middle_segment() -> None:
    """speech_text cuts a file into equal shares of time: the words must not straddle two."""
    data = demo_media.spoken_video(demo_media.SPOKEN_OFFENCE, 3)
    speech = demo_media.spoken_pcm(demo_media.SPOKEN_OFFENCE)
    from modstream.detectors.speech_text import decode_pcm

    [pcm] = decode_pcm(data, "video/mp4", video.Limits()).values()
    third = len(pcm) // 3
    loud = [i for i, sample in enumerate(pcm) if abs(int(sample)) > 500]
    assert third <= loud[0] and loud[-1] < 2 * third, (loud[0], loud[-1], third)
    assert len(speech) // 2 < third


def test_a_real_run_gives_every_media_upload_a_real_file(tmp_path: Path) -> None:
    lines, scanned = real_content(generate(seed=7, versions=30), tmp_path, T0)
    media = [u for u in upserts(lines) if u.get("modality") in ("image", "video", "audio")]
    assert media and all(u["content_id"] in scanned for u in media)
    for upload in media:
        path = Path(upload["media_ref"].removeprefix("file://"))
        data = path.read_bytes()
        assert len(data) == upload["size_bytes"] and magic_matches(data, upload["mime_type"])
    audio = next(u for u in media if u["modality"] == "audio")
    with wave.open(io.BytesIO(Path(audio["media_ref"][7:]).read_bytes())) as clip:
        assert clip.getframerate() == demo_media.RATE
    # no generated evidence is left for what the scan job answers
    assert not [
        line for line in lines
        if line["topic"] == "detector.results" and line["value"]["content_id"] in scanned
    ]  # fmt: skip


def decision(outcome: str, *cited: dict[str, Any]) -> dict[str, Any]:
    return {"outcome": outcome, "evidence": list(cited)}


def test_read_media_outcomes_want_the_labels_outcome_and_a_time_where_there_is_one() -> None:
    kinds = {k.name: k for k in demo_media.KINDS}
    heard = {"detector": "speech_text", "finding_ms": 480}
    read = {"detector": "ocr_text"}  # a still image: no time
    latest = {
        ("a", 1): decision("RESTRICT", heard),
        ("b", 1): decision("ALLOW", read),
        ("c", 1): decision("ALLOW", heard),  # offensive, allowed: wrong
        ("d", 1): decision("BLOCK", {"detector": "speech_text"}),  # no time for audio: wrong
        ("e", 1): decision("BLOCK", read),
    }
    checked = demo_checks.read_media_outcomes(
        latest,
        {
            "a": kinds["audio-spoken-offence"],
            "b": kinds["image-written-benign"],
            "c": kinds["video-written-offence"],
            "d": kinds["audio-spoken-offence"],
            "e": kinds["image-written-offence"],
            "f": kinds["video-spoken-offence"],  # never decided: wrong
        },
    )
    assert {row["content_id"]: row["ok"] for row in checked} == {
        "a": True, "b": True, "c": False, "d": False, "e": True, "f": False,
    }  # fmt: skip
    assert checked[0]["finding_ms"] == [480] and checked[0]["wanted"] == "BLOCK|RESTRICT"
