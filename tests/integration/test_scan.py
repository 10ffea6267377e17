"""Content through the moderation job and the scan job on the real broker: decisions cite the
real models' model_version."""

from __future__ import annotations

import hashlib
import json
import os
import threading
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from modstream.demo import workload
from modstream.detectors import video
from modstream.detectors.media_check import MediaCheck
from modstream.detectors.nsfw_image import NsfwImage
from modstream.detectors.offensive_text import OffensiveText
from modstream.scanning.pools import Pool
from modstream.testing.media import GENERATED, card, encode, speak
from modstream.testing.media import SPOKEN_OFFENSIVE as SPOKEN
from modstream.testing.media import WRITTEN_OFFENSIVE as WRITTEN
from modstream.testing.records import upload
from modstream.testing.scans import request
from modstream.testing.stack import (
    JobProcess,
    Kafka,
    ModerationDeployment,
    completed_checkpoints,
    wait_for_checkpoint_after,
)

pytestmark = pytest.mark.integration


def test_decisions_cite_the_real_models(
    kafka: Kafka,
    start_job: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    moderation_deployment: ModerationDeployment,
) -> None:
    monkeypatch.setenv("MODSTREAM_POLICY_KEY", "it-policy-key")
    topics, args = moderation_deployment.topics, moderation_deployment.args
    media = tmp_path / "media"  # the scan job's media root
    media.mkdir()
    image_path = media / "noise.png"
    image_bytes = encode(GENERATED["noise"])
    image_path.write_bytes(image_bytes)
    fifo = media / "pipe.png"
    os.mkfifo(fifo)  # a worker that opened it for reading would wait forever
    text = "what a lovely afternoon in the park"
    now = int(time.time() * 1000)  # a live system: event time is about wall-clock time
    lines: list[dict[str, Any]] = [
        {"topic": "content.versions", "value": upload(
            "scan-text", at=now, modality="text", mime_type="text/plain", surface="comment",
            text=text, size_bytes=len(text), sha256=hashlib.sha256(text.encode()).hexdigest(),
        )},
        {"topic": "content.versions", "value": upload(
            "scan-image", at=now + 1, modality="image", mime_type="image/png", surface="comment",
            media_ref=image_path.as_uri(), size_bytes=len(image_bytes),
            sha256=hashlib.sha256(image_bytes).hexdigest(),
        )},
        {"topic": "content.versions", "value": upload(
            "scan-broken", at=now + 2, modality="image", mime_type="image/png", surface="comment",
            media_ref=(media / "gone.png").as_uri(), size_bytes=10, sha256="0" * 64,
        )},
    ]  # fmt: skip
    # Hostile media references: each fails permanently for its own requests, never the worker.
    hostile = {
        "scan-device": "file:///dev/zero",
        "scan-fifo": fifo.as_uri(),
        "scan-outside": (tmp_path / "outside.png").as_uri(),
        "scan-oversize": image_path.as_uri(),  # declares fewer bytes than the file has
    }
    (tmp_path / "outside.png").write_bytes(image_bytes)
    for offset, (content_id, ref) in enumerate(hostile.items(), start=3):
        lines.append({"topic": "content.versions", "value": upload(
            content_id, at=now + offset, modality="image", mime_type="image/png",
            surface="comment", media_ref=ref, size_bytes=100, sha256="0" * 64,
        )})  # fmt: skip
    moderation: JobProcess = start_job("moderation", *args)
    scan_args = [
        "--modalities", "text,image",
        "--checkpoint-dir", str(tmp_path / "ckpt-scan"),
        "--checkpoint-interval-ms", "1000",
        "--transactional-id-prefix", f"{moderation_deployment.prefix}-scan",
        "--group-id", f"{moderation_deployment.prefix}-scan",
        "--bootstrap-servers", kafka.bootstrap_servers,
        "--max-wait-ms", "50",
        "--max-attempts", "2",
        "--media-root", str(media),
    ]  # fmt: skip
    for name, physical in topics.items():
        scan_args += ["--topic", f"{name}={physical}"]
    scanner: JobProcess = start_job("scan", *scan_args)
    moderation.wait_running()
    scanner.wait_running()
    workload.produce(kafka.bootstrap_servers, lines, topics)
    # Live traffic moves event time on: a tiny upload every second, as a busy platform would.
    stop = threading.Event()

    def tick() -> None:
        while not stop.wait(1.0):
            at = int(time.time() * 1000)
            workload.produce(kafka.bootstrap_servers, [workload.marker(at, f"tick-{at}")], topics)

    ticker = threading.Thread(target=tick, daemon=True)
    ticker.start()
    try:
        expected = {"scan-text", "scan-image", "scan-broken", *hostile}
        results = kafka.wait_for(
            topics["detector.results"],
            lambda values: (
                {v["content_id"] for v in values} >= expected
                # the model follows its media_check (cost order, docs/scanning.md)
                and ("scan-image", "nsfw_image")
                in {(v["content_id"], v["detector"]) for v in values}
            ),
            timeout_s=120,
        )
        decisions = kafka.wait_for(
            topics["moderation.decisions"],
            lambda values: (
                {v["content_id"] for v in values if v["trigger"] == "evidence"}
                >= {"scan-text", "scan-image"}
            ),
            timeout_s=120,
        )
    finally:
        stop.set()
        ticker.join(timeout=5)
    results = [r for r in results if not r["content_id"].startswith("tick")]
    versions = {
        "offensive_text": OffensiveText().model_version,
        "nsfw_image": NsfwImage().model_version,
        "media_check": MediaCheck().model_version,
    }
    by_detector = {
        r["detector"]: r for r in results if r["content_id"] in ("scan-text", "scan-image")
    }
    assert {d: r["model_version"] for d, r in by_detector.items()} == versions
    # The text detector names the language it read (issue 28 item 3); the image models read no
    # text and name none.
    assert by_detector["offensive_text"]["language"] == "en"
    assert 0.5 <= by_detector["offensive_text"]["language_confidence"] <= 1.0
    assert "language" not in by_detector["nsfw_image"]
    broken = [r for r in results if r["content_id"] == "scan-broken"]
    assert broken and {r["status"] for r in broken} == {"timeout"}  # unreadable media: retried
    for content_id in hostile:
        answers = [r for r in results if r["content_id"] == content_id]
        assert answers and {r["status"] for r in answers} == {"error"}, content_id
        # media_check failed: the model is never asked for that media (cost order)
        assert {r["detector"] for r in answers} == {"media_check"}, content_id
    letters = kafka.wait_for(
        topics["moderation.dlq"],
        lambda values: (
            {v["key"] for v in values if v["error_class"] == "permanent"} >= set(hostile)
        ),
        timeout_s=60,
    )
    hostile_letters = Counter(letter["key"] for letter in letters if letter["key"] in hostile)
    answered_error = Counter(r["content_id"] for r in results if r["content_id"] in hostile)
    assert hostile_letters == answered_error  # one DLQ row per refused request, no more
    assert scanner.alive()
    decisions = kafka.wait_for(
        topics["moderation.decisions"],
        lambda values: (
            {v["content_id"] for v in values if v["trigger"] == "evidence"}
            >= {"scan-text", "scan-image"}
        ),
        timeout_s=120,
    )
    cited = {
        (d["content_id"], e["detector"], e["model_version"])
        for d in decisions
        if d["trigger"] == "evidence"
        for e in d["evidence"]
    }
    assert ("scan-text", "offensive_text", versions["offensive_text"]) in cited
    assert ("scan-image", "nsfw_image", versions["nsfw_image"]) in cited
    final_text = [d for d in decisions if d["content_id"] == "scan-text"][-1]
    assert final_text["outcome"] == "ALLOW"  # a benign text, scored by the real model
    assert final_text["language"] == "en"  # the version's language, as the rules read it
    final_image = [d for d in decisions if d["content_id"] == "scan-image"][-1]
    assert final_image["language"] == "und"  # no result of it named one


def test_results_exactly_once_across_cancel_and_restore(
    kafka: Kafka, start_job: Any, tmp_path: Path
) -> None:
    """A backlog of text requests; the job is cancelled after some checkpoints (each taken
    with batches in flight in the model workers) and restored from the latest: every request
    is answered exactly once, bad rows are dead-lettered exactly once."""
    prefix = f"it-scan-{uuid.uuid4().hex[:8]}"
    names = [*Pool("text", ("text",)).topics(), "detector.results", "moderation.dlq"]
    topics = {name: f"{prefix}.{name}" for name in names}
    kafka.create_topics(list(topics.values()), partitions=2)
    now = int(time.time() * 1000)
    total = 40_000
    records: list[tuple[str | None, bytes | None]] = []
    for index in range(total):
        value = request(f"{index}", f"comment number {index}", deadline_ts=now + 3_600_000, ts=now)
        records.append((f"c{index}", json.dumps(value).encode()))
    records[100] = ("bad-1", b"{not json")
    records[20_000] = ("bad-2", json.dumps({"detector": "offensive_text"}).encode())
    kafka.produce(topics["scan.requests.text"], records)
    checkpoints = tmp_path / "ckpt"
    args = [
        "--modalities", "text",
        "--max-batch", "64",
        "--checkpoint-dir", str(checkpoints),
        "--checkpoint-interval-ms", "300",
        "--transactional-id-prefix", prefix,
        "--group-id", prefix,
        "--bootstrap-servers", kafka.bootstrap_servers,
    ]  # fmt: skip
    for name, physical in topics.items():
        args += ["--topic", f"{name}={physical}"]
    first: JobProcess = start_job("scan", *args)
    first.wait_running()
    # Some results committed (the pool reads the backlog without waiting for its workers, so
    # checkpoints no longer wait behind them: a count of checkpoints says nothing of results),
    # then one more checkpoint, taken with batches in flight and requests waiting.
    kafka.wait_for(topics["detector.results"], lambda values: len(values) > 0, timeout_s=120)
    wait_for_checkpoint_after(checkpoints, completed_checkpoints(checkpoints))
    assert first.stop() == 0
    partial = len(kafka.read(topics["detector.results"]))
    assert 0 < partial < total - 2, f"the first run answered {partial}: not a mid-stream stop"

    restored: JobProcess = start_job("scan", *args, "--restore-from", "latest")
    restored.wait_running()
    assert "restoring from file:" in restored.output()
    results = kafka.wait_for(
        topics["detector.results"], lambda values: len(values) >= total - 2, timeout_s=240
    )
    wait_for_checkpoint_after(checkpoints, completed_checkpoints(checkpoints))
    results = kafka.values(topics["detector.results"])
    answered = Counter(result["content_id"] for result in results)
    assert len(answered) == total - 2 and set(answered.values()) == {1}
    assert {result["status"] for result in results} == {"ok"}
    letters = kafka.values(topics["moderation.dlq"])
    assert sorted(letter["key"] for letter in letters) == ["bad-1", "bad-2"]


def test_a_video_and_a_spoken_wav_through_the_av_pool(
    kafka: Kafka, start_job: Any, tmp_path: Path
) -> None:
    """The `av` pool (video and audio, one job) on the real broker: a 20-second video with one
    offensive two-second shot of written words, read per segment by `ocr_text`; a spoken WAV
    on the audio backfill topic, heard by `speech_text`. Needs the real stack: the pool's own
    source over live and backfill topics, its admission and its exactly-once sink are Flink
    and Kafka (the detectors alone are tests/udfs)."""
    prefix = f"it-av-{uuid.uuid4().hex[:8]}"
    names = [*Pool("av", ("video", "audio")).topics(), "detector.results", "moderation.dlq"]
    topics = {name: f"{prefix}.{name}" for name in names}
    kafka.create_topics(list(topics.values()), partitions=1)
    media = tmp_path / "media"
    media.mkdir()
    # 2 frames a second: seconds 0-7 and 10-19 say harmless words, seconds 8-9 the offence.
    frames = [card("hello there")] * 16 + [card(WRITTEN)] * 4 + [card("good morning")] * 20
    clip, wav = media / "clip.mp4", media / "speech.wav"
    clip.write_bytes(video.encode(frames, fps=2))
    wav.write_bytes(speak(SPOKEN, tmp_path))
    now = int(time.time() * 1000)

    def asked(request_id: str, **fields: Any) -> tuple[str, bytes]:
        value = request(request_id, None, ts=now, deadline_ts=now + 120_000, **fields)
        return value["content_id"], json.dumps(value).encode()

    segments = [
        asked(
            f"v{segment}", content_id="clip", detector="ocr_text", modality="video",
            mime_type="video/mp4", media_ref=clip.as_uri(), size_bytes=clip.stat().st_size,
            segment_id=segment, segments=4,
        )
        for segment in range(4)
    ]  # fmt: skip
    spoken = asked(
        "a0", content_id="speech", detector="speech_text", modality="audio",
        mime_type="audio/wav", media_ref=wav.as_uri(), size_bytes=wav.stat().st_size,
        priority="backfill",
    )  # fmt: skip
    kafka.produce(topics["scan.requests.video"], segments)
    kafka.produce(topics["scan.requests.audio.backfill"], [spoken])
    args = [
        "--pool", "av=video,audio",
        "--checkpoint-dir", str(tmp_path / "ckpt"),
        "--checkpoint-interval-ms", "500",
        "--media-root", str(media),
        "--transactional-id-prefix", prefix,
        "--group-id", prefix,
        "--bootstrap-servers", kafka.bootstrap_servers,
    ]  # fmt: skip
    for name, physical in topics.items():
        args += ["--topic", f"{name}={physical}"]
    job: JobProcess = start_job("scan", *args)
    job.wait_running()
    results = kafka.wait_for(
        topics["detector.results"], lambda values: len(values) >= 5, timeout_s=240
    )
    assert kafka.values(topics["moderation.dlq"]) == []
    by_segment = {r["segment_id"]: r for r in results if r["content_id"] == "clip"}
    assert sorted(by_segment) == [0, 1, 2, 3] and len(results) == 5
    assert {r["status"] for r in results} == {"ok"}
    assert by_segment[1]["scores"]["offensive"] >= 0.85  # seconds 5-9 hold the shot
    assert all(by_segment[s]["scores"]["offensive"] < 0.5 for s in (0, 2, 3))
    assert all(8_000 <= f["frame_ms"] < 10_000 for f in by_segment[1]["findings"][:1])
    [heard] = [r for r in results if r["content_id"] == "speech"]
    assert heard["detector"] == "speech_text" and heard["scores"]["offensive"] >= 0.85
    assert heard["findings"] and heard["findings"][0]["end_ms"] > heard["findings"][0]["start_ms"]
