"""Detector throughput: the bare model, the detector (decode + preprocessing + model), and the
scan job through Kafka, per record and batched, in one run.

    make bench-detectors              # or: python -m modstream.bench.detectors --help

The scan-job phase needs the local stack (`make up`): it produces a backlog of scan requests to
fresh topics, runs `modstream.jobs.scan.job` on it (max batch 256 for text, 4 for images; its
defaults otherwise), and measures committed detector.results per second (read_committed): `drain`
from the job running to the last result committed, `job pace` from the first committed result to the
last. Prints one JSON object; docs/BENCHMARKS.md records the figures.
"""

from __future__ import annotations

import argparse
import bisect
import io
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
from kafka import KafkaConsumer, TopicPartition
from PIL import Image

from modstream.core import kafkaio
from modstream.core.config import PROJECT_ROOT, Settings
from modstream.core.topics import TopicSpec, create_topics, physical
from modstream.detectors.detector import Item
from modstream.detectors.nsfw_image import NsfwImage, preprocess
from modstream.detectors.offensive_text import OffensiveText
from modstream.scanning.pools import REPORTS

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
    """Items/s per batch size: `bare` (session.run on prepared input) and `detector` (decode +
    preprocessing + model), one caller with 2 intra-op threads; then `bare_2_callers` and
    `detector_2_callers`: two threads calling at once with 1 intra-op thread each, how the
    scan job runs its models (`--model-workers`, `--onnx-threads`)."""
    encoded = images(total_images)
    sentences = texts(total_texts)
    result: dict[str, dict[str, dict[int, float]]] = {}
    for workers, threads in ((1, 2), (2, 1)):
        suffix = "" if workers == 1 else f"_{workers}_callers"
        nsfw, text = NsfwImage(intra_op_threads=threads), OffensiveText(intra_op_threads=threads)
        arrays = [preprocess(Image.open(io.BytesIO(data))) for data in encoded]
        cases = _cases(nsfw, text, encoded, arrays, sentences)
        with ThreadPoolExecutor(workers) as pool:
            for name, (bare, bare_input, full, full_input) in cases.items():
                figures = result.setdefault(name, {})
                for batch in BATCHES:
                    figures.setdefault(f"bare{suffix}", {})[batch] = _timed(
                        pool, bare, bare_input, batch
                    )
                    figures.setdefault(f"detector{suffix}", {})[batch] = _timed(
                        pool, full, full_input, batch
                    )
    return result


def _cases(
    nsfw: NsfwImage,
    text: OffensiveText,
    encoded: list[bytes],
    arrays: list[Any],
    sentences: list[str],
) -> dict[str, tuple[Any, list[Any], Any, list[Any]]]:
    """Per detector: (bare call, its input, detector call, its input)."""
    return {
        "nsfw_image": (
            lambda chunk: nsfw.session.run(None, {nsfw.input_name: np.stack(chunk)}),
            arrays,
            lambda chunk: nsfw.detect([Item(data=d) for d in chunk]),
            encoded,
        ),
        "offensive_text": (
            text.scores,
            sentences,
            lambda chunk: text.detect([Item(text=t) for t in chunk]),
            sentences,
        ),
    }


def _timed(pool: ThreadPoolExecutor, call: Any, inputs: list[Any], batch: int) -> float:
    """Items/s of `call` over `inputs` in chunks of `batch`, through `pool` (after a warm-up)."""
    chunks = [inputs[start : start + batch] for start in range(0, len(inputs), batch)]
    call(chunks[0])
    started = time.perf_counter()
    for _ in pool.map(call, chunks):
        pass
    return rate(len(inputs), time.perf_counter() - started)


def scan_job(
    settings: Settings, modality: str, count: int, max_batch: int, extra: tuple[str, ...] = ()
) -> dict[str, Any]:
    """Requests produced to fresh topics, the scan job on them, committed results per second."""
    prefix = f"bench-{uuid.uuid4().hex[:8]}"
    # The job reads the backfill topic and the reports too (modstream/scanning/pools.py); this run
    # leaves them empty.
    names = [f"scan.requests.{modality}", f"scan.requests.{modality}.backfill", REPORTS]
    names += ["detector.results", "moderation.dlq"]
    topics = {name: physical(name, prefix) for name in names}
    create_topics(
        settings.bootstrap_servers,
        [
            TopicSpec(physical, 4, {"cleanup.policy": "delete"}, "bench")
            for physical in topics.values()
        ],
        say=lambda _: None,
    )
    workdir = Path(tempfile.mkdtemp(prefix="bench-scan-"))
    records = _scan_requests(modality, count, int(time.time() * 1000), workdir)
    args = _scan_job_args(modality, max_batch, workdir, prefix, topics, extra)
    produce_started = time.monotonic()
    kafkaio.produce(settings.bootstrap_servers, topics[f"scan.requests.{modality}"], records)
    produce_s = time.monotonic() - produce_started
    log = workdir / "scan.log"
    with open(log, "wb") as out:
        job = subprocess.Popen(
            [sys.executable, "-m", "modstream.jobs.scan.job", *args],
            cwd=PROJECT_ROOT, stdout=out, stderr=subprocess.STDOUT, env=dict(os.environ),
        )  # fmt: skip
    try:
        deadline = time.monotonic() + 180
        while " running" not in log.read_text(errors="replace"):
            if job.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"scan job did not start; see {log}")
            time.sleep(0.1)
        running = time.monotonic()
        samples = committed_over_time(settings, topics["detector.results"], count, running)
    finally:
        job.send_signal(signal.SIGTERM)
        job.wait(timeout=90)
    first_seen = next(t for t, committed in samples if committed > 0)
    done = next(t for t, committed in samples if committed >= count)
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


def _scan_requests(
    modality: str, count: int, now: int, workdir: Path
) -> list[tuple[str | None, bytes | None]]:
    """`count` scan requests: seeded texts, or seeded images written under `workdir`."""
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
    return records


def _scan_job_args(
    modality: str,
    max_batch: int,
    workdir: Path,
    prefix: str,
    topics: dict[str, str],
    extra: tuple[str, ...],
) -> list[str]:
    """The scan job's options on this run's topics, groups and checkpoints."""
    args = [
        "--modalities", modality,
        "--max-batch", str(max_batch),
        "--max-wait-ms", "20",
        "--checkpoint-interval-ms", "1000",
        "--checkpoint-dir", str(workdir / "ckpt"),
        "--media-root", str(workdir),
        "--transactional-id-prefix", prefix,
        "--group-id", prefix,
        *extra,
    ]  # fmt: skip
    for name, deployed in topics.items():
        args += ["--topic", f"{name}={deployed}"]
    return args


def committed_over_time(
    settings: Settings, topic: str, count: int, since: float
) -> list[tuple[float, int]]:
    """(time, results committed by then) every 100 ms until `count` are committed.

    Watches the topic's last stable offsets (what read_committed consumers may read: one cheap
    ListOffsets call per sample) instead of consuming while the job runs: a kafka-python
    consumer counting records took a third of a core from the job on this 2-core machine.
    Offsets also count transaction markers, so when the offsets stop moving the records are
    read once and each sample's offsets are turned into a count of records.
    """
    consumer = KafkaConsumer(
        bootstrap_servers=settings.bootstrap_servers,
        isolation_level="read_committed",
        enable_auto_commit=False,
        group_id=None,
    )
    try:
        numbers = consumer.partitions_for_topic(topic)
        while not numbers:
            time.sleep(0.1)
            numbers = consumer.partitions_for_topic(topic)
        partitions = [TopicPartition(topic, p) for p in sorted(numbers)]
        offsets: list[tuple[float, dict[TopicPartition, int]]] = []
        while True:
            now = time.monotonic()
            stable = consumer.end_offsets(partitions)
            offsets.append((now, stable))
            moved = len(offsets) < 10 or offsets[-10][1] != stable
            if sum(stable.values()) >= count and not moved:
                break  # unchanged for a second, and enough offsets for `count` records
            if now - since > 600:
                raise RuntimeError(f"fewer than {count} results within 600 s")
            time.sleep(0.1)
        consumer.assign(partitions)
        consumer.seek_to_beginning(*partitions)
        records: dict[TopicPartition, list[int]] = {p: [] for p in partitions}
        last = offsets[-1][1]
        while any(consumer.position(p) < last[p] for p in partitions):
            for partition, batch in consumer.poll(timeout_ms=500).items():
                records[partition].extend(record.offset for record in batch)
    finally:
        consumer.close()
    samples = []
    for at, stable in offsets:
        committed = sum(bisect.bisect_left(records[p], stable[p]) for p in partitions)
        samples.append((at, committed))
    if samples[-1][1] < count:
        raise RuntimeError(f"only {samples[-1][1]} of {count} results committed")
    return samples


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


def against_goals(
    in_process: dict[str, dict[str, dict[int, float]]], jobs: dict[str, dict[str, Any]]
) -> dict[str, dict[str, float]]:
    """The job's pace against the bare model's best: one caller over the batch sizes (how the
    issue measures the bare model), and any way measured here (two callers included)."""
    out = {}
    for name, job in jobs.items():
        one = max(in_process[name]["bare"].values())
        best = max(
            max(figures.values())
            for key, figures in in_process[name].items()
            if key.startswith("bare")
        )
        out[name] = {
            "bare_best_one_caller": one,
            "bare_best": best,
            "job_pace": job["job_pace_per_s"],
            "job_vs_one_caller": round(job["job_pace_per_s"] / one, 3),
            "job_vs_best": round(job["job_pace_per_s"] / best, 3),
            "drain_per_s": job["drain_per_s"],
        }
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=256)
    parser.add_argument("--texts", type=int, default=20_000)
    parser.add_argument("--job-images", type=int, default=1_000)
    parser.add_argument("--job-texts", type=int, default=300_000)
    parser.add_argument("--skip-job", action="store_true", help="only the in-process figures")
    args = parser.parse_args(argv)
    report: dict[str, Any] = {"cpu_count": os.cpu_count()}
    report["in_process"] = bare_and_detector(args.images, args.texts)
    print(json.dumps(report["in_process"]), flush=True)
    if not args.skip_job:
        settings = Settings.from_env()
        report["scan_job"] = {
            "offensive_text": scan_job(settings, "text", args.job_texts, 256),
            "nsfw_image": scan_job(settings, "image", args.job_images, 4),
        }
        report["against_goals"] = against_goals(report["in_process"], report["scan_job"])
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
