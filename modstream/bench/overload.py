"""Admission under overload: the image scan pool at three times its measured capacity.

    make bench-overload              # or: python -m modstream.bench.overload --help

Needs the local stack (`make up`). Two phases in one run:
1. capacity: a backlog of image scan requests through a scan job (`bench_detectors.scan_job`),
   committed results per second from the first to the last: the pool's capacity C;
2. overload: a fresh scan job for the pool (`--pool image=image`, admission measuring its own
   capacity as shipped; `--pin-capacity` passes `--capacity-rps C` instead) while requests
   arrive at 3 × C for `--seconds` (120): a fifth live high-risk, two fifths live (on
   `scan.requests.image`), two fifths backfill (on `scan.requests.image.backfill`), each with the
   image deadline of policy_rules/global.yaml (30 s). A read_committed consumer notes when each
   answer becomes visible (the job commits every second, so that is in the figure).

Prints one JSON object: per class, requests sent, answers by status (`ok`, `timeout`), and the
answer latency (send to visible) p50 / p99 / max for all answers and for `ok` ones, against the
deadline; `lost` (requests never answered) and `duplicates`. A benchmark, not a test: it
prints figures and asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from kafka import KafkaConsumer, KafkaProducer

from modstream.bench.detectors import images, scan_job
from modstream.core.config import PROJECT_ROOT, Settings
from modstream.core.topics import TopicSpec, create_topics, physical
from modstream.scanning.pools import REPORTS

DEADLINE_MS = 30_000  # the image deadline in policy_rules/global.yaml
MIX = (("live_high_risk", 1), ("live", 2), ("backfill", 2))  # fifths of the arrivals


def percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 1)


def request(index: int, kind: str, ref: str, now: int) -> dict[str, Any]:
    fields: dict[str, Any] = {
        "request_id": f"{kind[0]}{'h' if kind == 'live_high_risk' else ''}{index}",
        "content_id": f"c{index}",
        "content_version": 1,
        "detector": "nsfw_image",
        "segment_id": None,
        "segments": 1,
        "modality": "image",
        "mime_type": "image/jpeg",
        "priority": "backfill" if kind == "backfill" else "live",
        "attempt": 1,
        "deadline_ts": now + DEADLINE_MS,
        "media_ref": ref,
        "ts": now,
    }
    if kind == "live_high_risk":
        fields["high_risk"] = True
    return fields


class Answers(threading.Thread):
    """Reads detector.results (read_committed) and notes when each request's answer appeared."""

    def __init__(self, settings: Settings, topic: str) -> None:
        super().__init__(daemon=True)
        self.consumer = KafkaConsumer(
            topic,
            bootstrap_servers=settings.bootstrap_servers,
            isolation_level="read_committed",
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            group_id=None,
        )
        self.seen: dict[str, list[tuple[float, str]]] = {}
        self.stopping = threading.Event()

    def run(self) -> None:
        while not self.stopping.is_set():
            for records in self.consumer.poll(timeout_ms=200).values():
                now = time.time()
                for record in records:
                    result = json.loads(record.value)
                    # event_id: scan-<request_id>-<model_version>-<status>
                    request_id = result["event_id"].split("-")[1]
                    self.seen.setdefault(request_id, []).append((now, result["status"]))
        self.consumer.close()


def overload(
    settings: Settings, capacity: float, seconds: int, factor: float, *, pin: bool = False
) -> dict[str, Any]:
    prefix = f"bench-{uuid.uuid4().hex[:8]}"
    names = ["scan.requests.image", "scan.requests.image.backfill", REPORTS, "detector.results"]
    names.append("moderation.dlq")
    topics = {name: physical(name, prefix) for name in names}
    specs = [TopicSpec(name, 4, {"cleanup.policy": "delete"}, "bench") for name in topics.values()]
    create_topics(settings.bootstrap_servers, specs, say=lambda _: None)
    workdir = Path(tempfile.mkdtemp(prefix="bench-overload-"))
    refs = []
    for index, data in enumerate(images(64, seed=2)):
        path = workdir / f"{index}.jpg"
        path.write_bytes(data)
        refs.append(path.as_uri())
    args = [
        "--pool", "image=image", "--max-batch", "4",
        "--checkpoint-interval-ms", "1000", "--checkpoint-dir", str(workdir / "ckpt"),
        "--media-root", str(workdir), "--transactional-id-prefix", prefix, "--group-id", prefix,
    ]  # fmt: skip
    # Pinned, admission trusts a figure measured minutes earlier; on a shared machine whose
    # load moves, measured (the default) follows what the workers answer now.
    args += ["--capacity-rps", str(capacity)] if pin else []
    for name, deployed in topics.items():
        args += ["--topic", f"{name}={deployed}"]
    log = workdir / "scan.log"
    answers = Answers(settings, topics["detector.results"])
    answers.start()
    with open(log, "wb") as out:
        job = subprocess.Popen(
            [sys.executable, "-m", "modstream.jobs.scan.job", *args],
            cwd=PROJECT_ROOT, stdout=out, stderr=subprocess.STDOUT, env=dict(os.environ),
        )  # fmt: skip
    sent: dict[str, tuple[str, float]] = {}
    try:
        started = time.monotonic()
        while " running" not in log.read_text(errors="replace"):
            if job.poll() is not None or time.monotonic() - started > 180:
                raise RuntimeError(f"scan job did not start; see {log}")
            time.sleep(0.1)
        sent = _arrivals(settings, topics, refs, capacity * factor, seconds)
        last = time.monotonic() + DEADLINE_MS / 1000 + 30
        while time.monotonic() < last and not set(sent) <= set(answers.seen):
            time.sleep(0.5)
    finally:
        job.send_signal(signal.SIGTERM)
        job.wait(timeout=90)
        answers.stopping.set()
        answers.join(timeout=10)
    return _figures(sent, answers.seen, capacity, factor, seconds)


def _arrivals(
    settings: Settings, topics: dict[str, str], refs: list[str], rps: float, seconds: int
) -> dict[str, tuple[str, float]]:
    """Requests at `rps` for `seconds`, in ticks of 100 ms; request id -> (class, sent at)."""
    producer = KafkaProducer(bootstrap_servers=settings.bootstrap_servers, linger_ms=10)
    weights = [kind for kind, share in MIX for _ in range(share)]
    sent: dict[str, tuple[str, float]] = {}
    start, index, owed = time.monotonic(), 0, 0.0
    while time.monotonic() - start < seconds:
        owed += rps * 0.1
        now_ms = int(time.time() * 1000)
        while owed >= 1:
            kind = weights[index % len(weights)]
            record = request(index, kind, refs[index % len(refs)], now_ms)
            lane = "scan.requests.image" + (".backfill" if kind == "backfill" else "")
            producer.send(topics[lane], key=b"c%d" % index, value=json.dumps(record).encode())
            sent[record["request_id"]] = (kind, time.time())
            index, owed = index + 1, owed - 1
        producer.flush()
        time.sleep(max(0.0, start + (len(sent) / rps) - time.monotonic()))
    producer.close()
    return sent


def _figures(
    sent: dict[str, tuple[str, float]],
    seen: dict[str, list[tuple[float, str]]],
    capacity: float,
    factor: float,
    seconds: int,
) -> dict[str, Any]:
    classes: dict[str, Any] = {}
    for kind, _ in MIX:
        ids = [rid for rid, (k, _) in sent.items() if k == kind]
        answered = [(rid, seen[rid][0]) for rid in ids if rid in seen]
        latencies = [(at - sent[rid][1]) * 1000 for rid, (at, _) in answered]
        ok = [(at - sent[rid][1]) * 1000 for rid, (at, status) in answered if status == "ok"]
        statuses: dict[str, int] = {}
        for _, (_, status) in answered:
            statuses[status] = statuses.get(status, 0) + 1
        classes[kind] = {
            "sent": len(ids),
            "answered": statuses,
            "latency_ms": {"p50": percentile(latencies, 0.5), "p99": percentile(latencies, 0.99)},
            "ok_latency_ms": {
                "p50": percentile(ok, 0.5),
                "p99": percentile(ok, 0.99),
                "max": round(max(ok), 1) if ok else None,
            },
        }
    return {
        "capacity_rps": capacity,
        "arrival_rps": round(capacity * factor, 1),
        "seconds": seconds,
        "deadline_ms": DEADLINE_MS,
        "classes": classes,
        "lost": sum(1 for rid in sent if rid not in seen),
        "duplicates": sum(1 for rid in sent if len(seen.get(rid, [])) > 1),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=int, default=120)
    parser.add_argument("--factor", type=float, default=3.0)
    parser.add_argument("--capacity-images", type=int, default=400)
    parser.add_argument("--capacity-rps", type=float, default=None, help="skip phase 1")
    parser.add_argument(
        "--pin-capacity",
        action="store_true",
        help="run the pool with --capacity-rps at the measured capacity (default: it measures)",
    )
    args = parser.parse_args(argv)
    settings = Settings.from_env()
    capacity = args.capacity_rps
    if capacity is None:
        measured = scan_job(settings, "image", args.capacity_images, 4)
        print(json.dumps({"capacity_phase": measured}), flush=True)
        capacity = float(measured["job_pace_per_s"])
    figures = overload(settings, capacity, args.seconds, args.factor, pin=args.pin_capacity)
    print(json.dumps({**figures, "pinned_capacity": args.pin_capacity}), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
