"""`modstream demo`: the stack, the topics, the ingest job on a generated workload, a summary.

The workload is seeded (same seed, same records apart from the run id) and mixes valid uploads
and deletes with malformed records of every kind the contract names. Records of this run carry
its run id, so the summary counts only them even when earlier demos left records behind.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

from modstream import kafkaio, stack, topics
from modstream.config import Settings
from schemas.common import MAX_RECORD_BYTES

WAIT_TIMEOUT_S = 240.0
MODALITIES = ("text", "image", "audio", "video")
MIME = {"text": "text/plain", "image": "image/jpeg", "audio": "audio/mpeg", "video": "video/mp4"}
SURFACES = ("public_post", "comment", "profile", "dm")


def generate(run_id: str, count: int, seed: int) -> tuple[list[tuple[str, bytes]], dict[str, int]]:
    """(key, value) records for content.versions and how many of each kind they hold."""
    rng = random.Random(seed)
    kinds: Counter[str] = Counter()
    records: list[tuple[str, bytes]] = []
    base_ts = 1_764_460_800_000
    for index in range(count):
        content_id = f"demo-{run_id}-c{index}"
        modality = rng.choice(MODALITIES)
        ts = base_ts + index * 250
        record: dict[str, Any] = {
            "event_id": f"demo-{run_id}-e{index}",
            "type": "upsert",
            "content_id": content_id,
            "content_version": 1,
            "ts": ts,
            "author_id": f"user-{rng.randrange(50)}",
            "modality": modality,
            "surface": rng.choice(SURFACES),
            "region": rng.choice(("DE", "US", "BR", "IN", "JP")),
            "audience": rng.choice(("all", "all", "adult", "minor")),
            "account_risk": round(rng.random(), 3),
            "size_bytes": rng.randrange(100, 5_000_000),
            "mime_type": MIME[modality],
            "sha256": f"{rng.getrandbits(256):064x}",
            "segments": rng.choice((1, 1, 1, 4)) if modality == "video" else 1,
        }
        if modality == "text":
            record["text"] = f"demo text {index}"
        if modality == "image":
            record["phash"] = f"{rng.getrandbits(64):016x}"
        if rng.random() < 0.1:  # an author deletes it again
            kinds["valid delete"] += 1
            delete = {
                "event_id": f"demo-{run_id}-d{index}",
                "type": "delete",
                "content_id": content_id,
                "content_version": 1,
                "ts": ts + 100,
            }
            records.append((content_id, json.dumps(record).encode()))
            records.append((content_id, json.dumps(delete).encode()))
        else:
            records.append((content_id, json.dumps(record).encode()))
        kinds["valid upsert"] += 1

    template = json.loads(records[0][1])
    bad_count = max(1, count // 40)
    for index in range(bad_count):
        content_id = f"demo-{run_id}-bad{index}"
        bad = dict(template, content_id=content_id, event_id=f"demo-{run_id}-b{index}")
        malformed = {
            "missing field": json.dumps({k: v for k, v in bad.items() if k != "author_id"}),
            "wrong type": json.dumps(dict(bad, content_version=str(index + 1))),
            "unknown enum": json.dumps(dict(bad, modality="hologram")),
            "not JSON": f"<upload id={content_id}>",
            "over-long": json.dumps(dict(bad, text="x" * (MAX_RECORD_BYTES + 1))),
        }
        for kind, value in malformed.items():
            records.append((content_id, value.encode()))
            kinds[f"malformed: {kind}"] += 1
    rng.shuffle(records)
    return records, dict(kinds)


def _start_job(settings: Settings, log_path: Path) -> subprocess.Popen[bytes]:
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "wb") as log:
        return subprocess.Popen(
            [sys.executable, "-m", "jobs.ingest_check", "--checkpoint-interval-ms", "2000"],
            cwd=settings.project_root,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=dict(os.environ),
        )


def _wait_running(job: subprocess.Popen[bytes], log_path: Path) -> None:
    deadline = time.monotonic() + 180
    while " running" not in log_path.read_text(errors="replace"):
        if job.poll() is not None or time.monotonic() > deadline:
            raise stack.StackError(f"ingest_check did not start; see {log_path}")
        time.sleep(0.5)


def _outputs(settings: Settings, run_id: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    marker = f"demo-{run_id}-"
    valid = [
        json.loads(r.value)
        for r in kafkaio.read_to_end(settings.bootstrap_servers, "content.validated")
        if marker in r.value.decode()
    ]
    letters = [
        json.loads(r.value)
        for r in kafkaio.read_to_end(settings.bootstrap_servers, "moderation.dlq")
        if marker in r.value.decode()
    ]
    return valid, letters


def run(settings: Settings, count: int = 200, seed: int = 7) -> int:
    started = time.monotonic()
    print("demo: starting the local stack")
    stack.up(settings)
    topics.create_topics(settings.bootstrap_servers, say=lambda _: None)

    run_id = uuid.uuid4().hex[:8]
    records, kinds = generate(run_id, count, seed)
    valid_expected = sum(n for kind, n in kinds.items() if kind.startswith("valid"))
    bad_expected = sum(n for kind, n in kinds.items() if kind.startswith("malformed"))
    kafkaio.produce(settings.bootstrap_servers, "content.versions", records)
    print(
        f"demo: run {run_id}: sent {len(records)} records to content.versions "
        f"({valid_expected} valid, {bad_expected} malformed)"
    )

    log_path = settings.run_dir / "demo" / f"ingest_check-{run_id}.log"
    job = _start_job(settings, log_path)
    try:
        _wait_running(job, log_path)
        print(f"demo: ingest_check running (log {log_path}); waiting for committed output")
        deadline = time.monotonic() + WAIT_TIMEOUT_S
        while True:
            valid, letters = _outputs(settings, run_id)
            if len(valid) >= valid_expected and len(letters) >= bad_expected:
                break
            if time.monotonic() > deadline or job.poll() is not None:
                print(
                    f"demo: FAILED: {len(valid)}/{valid_expected} valid and "
                    f"{len(letters)}/{bad_expected} dead letters committed; see {log_path}"
                )
                return 1
            print(f"demo:   committed so far: {len(valid)} valid, {len(letters)} dead letters")
            time.sleep(2)
    finally:
        if job.poll() is None:
            job.send_signal(signal.SIGTERM)
            job.wait(timeout=90)

    duplicates = sum(n - 1 for n in Counter(v["event_id"] for v in valid).values())
    by_class = Counter(letter["error_class"] for letter in letters)
    print()
    print(f"modstream demo summary (run {run_id}, seed {seed})")
    print(f"  sent to content.versions     {len(records):>6}")
    print(
        f"  valid -> content.validated   {len(valid):>6}   "
        + ", ".join(
            f"{m} {n}"
            for m, n in sorted(Counter(v.get("modality", "delete") for v in valid).items())
        )
    )
    print(f"  rejected -> moderation.dlq   {len(letters):>6}")
    for error_class, n in sorted(by_class.items()):
        print(f"    error_class {error_class:<16} {n:>4}")
    for kind, n in sorted(kinds.items()):
        if kind.startswith("malformed"):
            print(f"      {kind[11:]:<24} {n:>4}")
    print(f"  duplicates seen by read_committed consumer: {duplicates}")
    print(
        f"  elapsed {time.monotonic() - started:.1f}s; the stack is still up (`make down` stops it)"
    )
    return 0 if duplicates == 0 and len(valid) == valid_expected else 1
