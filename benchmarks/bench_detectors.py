"""Detector throughput: the bare model, the detector (decode + preprocessing + model), and the
scan job through Kafka, per record and batched, in one run.

    make bench-detectors              # or: python -m benchmarks.bench_detectors --help

The scan-job phase needs the local stack (`make up`): it produces scan requests to fresh topics,
runs `jobs.scan` with `--max-batch 64`, and measures committed detector.results per second
(read_committed), from the first result to the last (the job's pace) and from the first request
produced (end to end). Prints one JSON object; docs/BENCHMARKS.md records the figures.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import numpy as np
from kafka import KafkaConsumer
from PIL import Image

from modstream import kafkaio
from modstream.config import PROJECT_ROOT, Settings
from modstream.topics import TopicSpec, create_topics
from udfs.detector import Item
from udfs.nsfw_image import NsfwImage, preprocess
from udfs.offensive_text import OffensiveText

BATCHES = (1, 8, 32, 64)
WORDS = [
    "the",
    "a",
    "you",
    "are",
    "really",
    "great",
    "stupid",
    "day",
    "park",
    "lovely",
    "idiot",
    "this",
    "that",
    "what",
    "why",
    "never",
    "always",
    "friend",
    "hate",
    "love",
    "garbage",
    "coffee",
    "weather",
    "news",
    "game",
    "team",
    "play",
    "win",
    "lose",
    "shut",
    "up",
    "please",
]


def images(count: int, seed: int = 0) -> list[bytes]:
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(count):
        array = rng.integers(0, 256, (320, 320, 3), dtype=np.uint8)
        buffer = io.BytesIO()
        Image.fromarray(array).save(buffer, format="JPEG")
        out.append(buffer.getvalue())
    return out


def texts(count: int, seed: int = 0) -> list[str]:
    rng = np.random.default_rng(seed)
    return [" ".join(rng.choice(WORDS, size=int(rng.integers(4, 20)))) for _ in range(count)]


def rate(count: int, seconds: float) -> float:
    return round(count / seconds, 1) if seconds > 0 else 0.0


def bare_and_detector(
    total_images: int, total_texts: int
) -> dict[str, dict[str, dict[int, float]]]:
    # Two threads: the model's best on this machine (the scan job itself leaves one to Flink).
    nsfw, text = NsfwImage(intra_op_threads=2), OffensiveText(intra_op_threads=2)
    encoded = images(total_images)
    arrays = [preprocess(Image.open(io.BytesIO(data))) for data in encoded]
    sentences = texts(total_texts)
    result: dict[str, dict[str, dict[int, float]]] = {
        "nsfw_image": {"bare": {}, "detector": {}},
        "offensive_text": {"bare": {}, "detector": {}},
    }
    for batch in BATCHES:
        nsfw.session.run(None, {nsfw.input_name: np.stack(arrays[:batch])})  # warm-up
        started = time.perf_counter()
        for start in range(0, len(arrays), batch):
            nsfw.session.run(None, {nsfw.input_name: np.stack(arrays[start : start + batch])})
        result["nsfw_image"]["bare"][batch] = rate(len(arrays), time.perf_counter() - started)
        started = time.perf_counter()
        for start in range(0, len(encoded), batch):
            nsfw.detect([Item(data=d) for d in encoded[start : start + batch]])
        result["nsfw_image"]["detector"][batch] = rate(len(encoded), time.perf_counter() - started)
        text.scores(sentences[:batch])
        started = time.perf_counter()
        for start in range(0, len(sentences), batch):
            text.scores(sentences[start : start + batch])
        result["offensive_text"]["bare"][batch] = rate(
            len(sentences), time.perf_counter() - started
        )
        started = time.perf_counter()
        for start in range(0, len(sentences), batch):
            text.detect([Item(text=t) for t in sentences[start : start + batch]])
        result["offensive_text"]["detector"][batch] = rate(
            len(sentences), time.perf_counter() - started
        )
    return result


def scan_job(settings: Settings, modality: str, count: int, max_batch: int) -> dict[str, Any]:
    """Requests produced to fresh topics, the scan job on them, committed results per second."""
    prefix = f"bench-{uuid.uuid4().hex[:8]}"
    names = [f"scan.requests.{modality}", "detector.results", "moderation.dlq"]
    topics = {name: f"{prefix}.{name}" for name in names}
    create_topics(
        settings.bootstrap_servers,
        [
            TopicSpec(physical, 4, {"cleanup.policy": "delete"}, "bench")
            for physical in topics.values()
        ],
        say=lambda _: None,
    )
    workdir = Path(tempfile.mkdtemp(prefix="bench-scan-"))
    now = int(time.time() * 1000)
    records: list[tuple[str | None, bytes | None]] = []
    if modality == "text":
        for index, sentence in enumerate(texts(count, seed=1)):
            records.append(
                (f"c{index}", json.dumps(_request(index, modality, now, text=sentence)).encode())
            )
    else:
        for index, data in enumerate(images(count, seed=1)):
            path = workdir / f"{index}.jpg"
            path.write_bytes(data)
            records.append(
                (
                    f"c{index}",
                    json.dumps(_request(index, modality, now, media_ref=path.as_uri())).encode(),
                )
            )
    args = [
        "--modalities", modality,
        "--max-batch", str(max_batch),
        "--max-wait-ms", "20",
        "--checkpoint-interval-ms", "1000",
        "--checkpoint-dir", str(workdir / "ckpt"),
        "--transactional-id-prefix", prefix,
        "--group-id", prefix,
    ]  # fmt: skip
    for name, physical in topics.items():
        args += ["--topic", f"{name}={physical}"]
    produce_started = time.monotonic()
    kafkaio.produce(settings.bootstrap_servers, topics[f"scan.requests.{modality}"], records)
    produce_s = time.monotonic() - produce_started
    log = workdir / "scan.log"
    with open(log, "wb") as out:
        job = subprocess.Popen(
            [sys.executable, "-m", "jobs.scan", *args],
            cwd=PROJECT_ROOT, stdout=out, stderr=subprocess.STDOUT, env=dict(os.environ),
        )  # fmt: skip
    try:
        deadline = time.monotonic() + 180
        while " running" not in log.read_text(errors="replace"):
            if job.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"scan job did not start; see {log}")
            time.sleep(0.1)
        running = time.monotonic()
        first_seen: float | None = None
        seen = 0
        # One read_committed consumer, counting as results are committed (re-reading the
        # topic on every poll would take the CPU the job needs).
        consumer = KafkaConsumer(
            topics["detector.results"],
            bootstrap_servers=settings.bootstrap_servers,
            isolation_level="read_committed",
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            group_id=None,
        )
        try:
            while seen < count:
                for batch in consumer.poll(timeout_ms=500).values():
                    seen += len(batch)
                if seen and first_seen is None:
                    first_seen = time.monotonic()
                if time.monotonic() - running > 600:
                    raise RuntimeError(f"only {seen} of {count} results within 600 s")
        finally:
            consumer.close()
        done = time.monotonic()
    finally:
        job.send_signal(signal.SIGTERM)
        job.wait(timeout=90)
    assert first_seen is not None
    return {
        "items": count,
        "max_batch": max_batch,
        "backlog_produce_s": round(produce_s, 1),
        # From "job running" (sources assigned) to the last result committed: the backlog
        # drained through Kafka, the scan job and its exactly-once sink.
        "drain_per_s": rate(count, done - running),
        # From the first committed result to the last (excludes start-up).
        "job_pace_per_s": rate(count, done - first_seen),
    }


def _request(index: int, modality: str, now: int, **media: str) -> dict[str, Any]:
    return {
        "request_id": f"r{index}",
        "content_id": f"c{index}",
        "content_version": 1,
        "detector": "offensive_text" if modality == "text" else "nsfw_image",
        "segment_id": None,
        "segments": 1,
        "modality": modality,
        "mime_type": "text/plain" if modality == "text" else "image/jpeg",
        "priority": "live",
        "attempt": 1,
        "deadline_ts": now + 3_600_000,
        "ts": now,
        **media,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=256)
    parser.add_argument("--texts", type=int, default=20_000)
    parser.add_argument("--job-images", type=int, default=600)
    parser.add_argument("--job-texts", type=int, default=30_000)
    parser.add_argument("--skip-job", action="store_true", help="only the in-process figures")
    args = parser.parse_args(argv)
    report: dict[str, Any] = {"cpu_count": os.cpu_count()}
    report["in_process"] = bare_and_detector(args.images, args.texts)
    print(json.dumps(report["in_process"]), flush=True)
    if not args.skip_job:
        settings = Settings.from_env()
        report["scan_job"] = {
            "offensive_text": scan_job(settings, "text", args.job_texts, 256),
            "nsfw_image": scan_job(settings, "image", args.job_images, 8),
        }
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
