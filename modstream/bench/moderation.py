"""The moderation job on the real broker: sustained throughput and event-to-action latency.

    make bench-moderation            # or: python -m modstream.bench.moderation --help

Phase 1 (throughput): a generated backlog (content versions with all their evidence) is
produced while the job runs; throughput is measured until a marker record, ordered after
every backlog record in event time, has its action committed.
Phase 2 (latency): versions and their evidence are produced at a fixed rate with `ts` = now; a
read_committed consumer records when each action becomes visible; latency = that time - the
action's event `ts` (so it includes the watermark delay and the checkpoint that commits it).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from modstream.bench.measure import latency_summary
from modstream.core import kafkaio
from modstream.core.config import PROJECT_ROOT, Settings
from modstream.core.topics import TopicSpec, create_topics, physical
from modstream.demo.workload import DEFAULT_MIX, Mix, for_kafka, generate, marker
from modstream.moderation.step import ALL_TOPICS

TOPICS = ALL_TOPICS
# Records a generated workload carries once for its whole run (the reviewers' grants): the
# steady-rate phase generates one workload per version and sends them with the first only.
AUTHORITY_ONCE = ("review.grants", "policy.rules", "hash.bank")


def now_ms() -> int:
    return int(time.time() * 1000)


class ActionWatcher(threading.Thread):
    """Reads committed actions as they appear and notes when each became visible.

    It shares the machine with the variant it measures, so it is kept cheap: confluent-kafka
    (librdkafka) reads the records, each partition assigned from its start (no group to join),
    and `wait_for` looks a content id up in `first` instead of scanning every action seen. On
    the 2-core machine the kafka-python reader and that scan took 21 to 32% of a core while the
    job's backlog ran, machine time a job that fills both cores pays for and a one-thread peer
    does not (docs/BENCHMARKS.md, "The harness's own CPU")."""

    def __init__(self, bootstrap: str, topic: str, *, poll_s: float = 0.1) -> None:
        from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

        super().__init__(daemon=True)
        self.consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": f"bench-watcher-{uuid.uuid4().hex[:8]}",  # never joined: assigned
                "isolation.level": "read_committed",
                "enable.auto.commit": False,
                "enable.partition.eof": False,
            }
        )
        partitions = self._partitions(topic)
        self.consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
        self.poll_s = poll_s
        self.seen: list[tuple[int, dict[str, Any]]] = []
        # Each seen action's record timestamp, in the order of `seen`: when its writer produced
        # it (the producers stamp the time of writing), before its transaction committed (the
        # latency phase splits the two).
        self.written: list[int] = []
        self.first: dict[str, int] = {}  # content id -> when its first action became visible
        self.stop = threading.Event()
        self.error: Exception | None = None

    def _partitions(self, topic: str, timeout_s: float = 30.0) -> list[int]:
        """The topic's partitions, once the broker knows them all (just created: a moment)."""
        deadline = time.monotonic() + timeout_s
        while True:
            found = self.consumer.list_topics(topic, timeout=10).topics.get(topic)
            if found is not None and found.error is None and found.partitions:
                return sorted(found.partitions)
            if time.monotonic() > deadline:
                self.consumer.close()
                raise RuntimeError(f"bench: no partitions of {topic} to read")
            time.sleep(0.2)

    def run(self) -> None:
        try:
            while not self.stop.is_set():
                # Wait for one record, then take what else is there without waiting: each
                # arrival stamped as soon as it is read (consume() with a timeout would wait
                # out the whole timeout unless it filled its count).
                first = self.consumer.poll(self.poll_s)
                if first is None:
                    continue
                messages = [first, *self.consumer.consume(num_messages=10_000, timeout=0)]
                arrived = now_ms()
                for message in messages:
                    error = message.error()
                    if error is not None:
                        if error.fatal():
                            raise RuntimeError(str(error))
                        continue  # a broker restarting: librdkafka retries
                    action = json.loads(message.value() or b"null")
                    if not isinstance(action, dict):
                        raise ValueError(f"not a JSON object at offset {message.offset()}")
                    self.seen.append((arrived, action))
                    self.written.append(message.timestamp()[1])
                    self.first.setdefault(str(action.get("content_id")), arrived)
        except Exception as error:  # the wait ends at once (check)
            self.error = error
        finally:
            self.consumer.close()

    def check(self) -> None:
        """Raise what stopped the reader, if anything did (never wait for a dead reader)."""
        if self.error is not None:
            raise RuntimeError(f"the output reader failed: {self.error!r}") from self.error

    def wait_for(
        self, content_id: str, timeout_s: float, alive: Callable[[], bool] = lambda: True
    ) -> int:
        """When the first action for `content_id` became visible; an error as soon as `alive()`
        says what should write it has gone."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            arrived = self.first.get(content_id)
            if arrived is not None:
                return arrived
            self.check()
            if not alive():
                raise RuntimeError(f"its writer ended before the action for {content_id}")
            time.sleep(0.05)
        raise TimeoutError(f"no committed action for {content_id} within {timeout_s}s")


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    settings = Settings.from_env()
    bootstrap = settings.bootstrap_servers
    prefix = f"bench-{uuid.uuid4().hex[:8]}"
    topics = {name: physical(name, prefix) for name in TOPICS}
    create_topics(
        bootstrap,
        [TopicSpec(t, args.partitions if "policy" not in t else 1) for t in topics.values()],
        say=lambda _: None,
    )
    run_dir = settings.run_dir / "bench" / prefix
    run_dir.mkdir(parents=True, exist_ok=True)
    log = open(run_dir / "job.log", "wb")  # noqa: SIM115 - open for the job's lifetime
    job = subprocess.Popen(
        _job_command(args, run_dir, prefix, topics),
        cwd=PROJECT_ROOT,
        stdout=log,
        stderr=subprocess.STDOUT,
        env=dict(os.environ),
    )
    watcher = ActionWatcher(bootstrap, topics["moderation.actions"])
    watcher.start()
    try:
        while b" running" not in (run_dir / "job.log").read_bytes():
            if job.poll() is not None:
                raise RuntimeError(f"job exited; see {run_dir / 'job.log'}")
            time.sleep(0.2)
        time.sleep(3)  # the sources are assigned their splits

        throughput = backlog_throughput(bootstrap, topics, watcher, args.versions)
        print(f"throughput: {json.dumps(throughput)}", flush=True)

        # Phase 2: steady rate, latency from event ts to committed action.
        latency = steady_latency(
            bootstrap, topics, watcher, args.rate, args.duration, args.out_of_orderness_ms
        )
        print(f"latency: {json.dumps(latency)}", flush=True)
        result = {
            "throughput": throughput,
            "latency": latency,
            "layout": {
                "parallelism": args.parallelism,
                "taskmanagers": 1,
                "partitions": args.partitions,
                "checkpoint_interval_ms": args.checkpoint_interval_ms,
                "out_of_orderness_ms": args.out_of_orderness_ms,
                "execution_mode": "thread",
            },
        }
        (run_dir / "result.json").write_text(json.dumps(result, indent=2))
        print(f"result: {run_dir / 'result.json'}")
        return 0
    finally:
        watcher.stop.set()
        if job.poll() is None:
            job.send_signal(signal.SIGTERM)
            job.wait(timeout=90)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--versions", type=int, default=3000, help="backlog content versions")
    parser.add_argument("--rate", type=float, default=100.0, help="latency phase versions/s")
    parser.add_argument("--duration", type=float, default=30.0, help="latency phase seconds")
    parser.add_argument("--parallelism", type=int, default=1)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--checkpoint-interval-ms", type=int, default=1000)
    parser.add_argument("--out-of-orderness-ms", type=int, default=500)
    return parser


def _job_command(
    args: argparse.Namespace, run_dir: Path, prefix: str, topics: dict[str, str]
) -> list[str]:
    """The moderation job's argv on this run's topics, groups and checkpoints."""
    command = [
        sys.executable,
        "-m",
        "modstream.jobs.moderation.job",
        "--checkpoint-dir",
        str(run_dir / "ckpt"),
        "--checkpoint-interval-ms",
        str(args.checkpoint_interval_ms),
        "--transactional-id-prefix",
        prefix,
        "--group-id",
        prefix,
        "--parallelism",
        str(args.parallelism),
        "--out-of-orderness-ms",
        str(args.out_of_orderness_ms),
        "--idleness-ms",
        "1000",
        "--policy",
        str(PROJECT_ROOT / "policy_rules" / "global.yaml"),
    ]
    for name, deployed in topics.items():
        command += ["--topic", f"{name}={deployed}"]
    return command


def backlog_throughput(
    bootstrap: str, topics: dict[str, str], watcher: ActionWatcher, versions: int
) -> dict[str, Any]:
    """Phase 1: backlog throughput."""
    # The whole backlog, markers included, lies in the past: the steady phase that follows
    # must not start behind the watermark.
    start_ts = now_ms() - versions * 200 - 300_000
    backlog = generate(seed=5, versions=versions, start_ts=start_ts, extras=False, malformed=False)
    last_ts = max(line["value"]["ts"] for line in backlog)
    end = [marker(last_ts + 60_000), marker(last_ts + 120_000)]
    events = len(backlog)
    started = now_ms()
    for topic, records in for_kafka(backlog + end, topics).items():
        kafkaio.produce(bootstrap, topic, records)
    produced_s = (now_ms() - started) / 1000
    arrived = watcher.wait_for(end[0]["value"]["content_id"], timeout_s=900)
    elapsed_s = (arrived - started) / 1000
    # From the first committed action of the backlog to the marker's: the job's own pace,
    # without the time the producer took (both ends rounded to a checkpoint).
    first = min(when for when, action in watcher.seen if action["content_id"] != "")
    processing_s = max((arrived - first) / 1000, 1e-3)
    return {
        "versions": versions,
        "events": events,
        "seconds": round(elapsed_s, 2),
        "produce_seconds": round(produced_s, 2),
        "processing_seconds": round(processing_s, 2),
        "versions_per_s": round(versions / elapsed_s, 1),
        "events_per_s": round(events / elapsed_s, 1),
        "processing_versions_per_s": round(versions / processing_s, 1),
        "processing_events_per_s": round(events / processing_s, 1),
    }


def steady_latency(
    bootstrap: str,
    topics: dict[str, str],
    watcher: ActionWatcher,
    rate: float,
    duration: float,
    out_of_orderness_ms: int,
    *,
    tag: str = "live",
    mix: Mix = DEFAULT_MIX,
) -> dict[str, Any]:
    """`rate` versions/s for `duration` s, each stamped when produced (evidence with its
    upload), then the latency from that `ts` to each committed action: p50, p95, p99, max."""
    seen_before = len(watcher.seen)
    count = int(rate * duration)
    versions = []
    for index in range(count):  # made before the clock starts: the producer's CPU stays low
        lines = generate(seed=1000 + index, versions=1, extras=False, malformed=False, mix=mix)
        if index:  # each workload grants its reviewers (20 broadcast records): once is a stream
            lines = [line for line in lines if line["topic"] not in AUTHORITY_ONCE]
        for line in lines:
            line["value"]["content_id"] = f"{tag}-{index}"
        versions.append(lines)
    events = sum(len(lines) for lines in versions)
    producer = kafkaio_producer(bootstrap)
    phase_started = now_ms()
    next_at = time.monotonic()
    for lines in versions:
        ts = now_ms()
        for line in lines:
            line["value"]["ts"] = ts  # evidence in real time, with the upload
        for topic, records in for_kafka(lines, topics).items():
            for key, value in records:
                producer.send(topic, key=key.encode() if key else None, value=value)
        next_at += 1.0 / rate
        delay = next_at - time.monotonic()
        if delay > 0:
            time.sleep(delay)
    producer.flush()
    # Records produced in the last second wait for the closing marker to move the watermark;
    # their latency measures the benchmark's end, not the job: leave them out.
    cutoff = now_ms() - 1000
    time.sleep(5 + out_of_orderness_ms / 1000)
    for topic, records in for_kafka([marker(now_ms() + 5_000)], topics).items():
        kafkaio.produce(bootstrap, topic, records)
    time.sleep(3)
    read = min(len(watcher.seen), len(watcher.written))  # the reader may be between the two
    figures = phase_latency(
        watcher.seen[seen_before:read],
        watcher.written[seen_before:read],
        f"{tag}-",
        phase_started,
        cutoff,
    )
    return {"rate_versions_per_s": rate, "seconds": duration, "events": events, **figures}


def phase_latency(
    seen: list[tuple[int, dict[str, Any]]],
    stamps: list[int],
    prefix: str,
    started: int,
    cutoff: int,
) -> dict[str, Any]:
    """p50, p95, p99 and max from each action's `ts` to when it became visible (`seen`:
    (arrival, action), as `ActionWatcher` keeps them), for the actions whose content id starts
    with `prefix` and whose `ts` lies in [started, cutoff); and `written_p50_ms`,
    `written_p99_ms`: from `ts` to when the writer produced the action (`stamps`: each one's
    record timestamp), the part before a transaction waited for its checkpoint and the reader
    polled."""
    latencies, written = [], []
    for (arrival, action), stamped in zip(seen, stamps, strict=True):
        if action["content_id"].startswith(prefix) and started <= action["ts"] < cutoff:
            latencies.append(arrival - action["ts"])
            written.append(stamped - action["ts"])
    split = latency_summary(written)
    return {
        **latency_summary(latencies),
        **{f"written_{name}": split[name] for name in ("p50_ms", "p99_ms")},
    }


_PRODUCER: Any = None


def kafkaio_producer(bootstrap: str) -> Any:
    """One shared producer for the steady-rate phase (a new one per record would dominate)."""
    global _PRODUCER
    if _PRODUCER is None:
        from kafka import KafkaProducer

        _PRODUCER = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=1)
    return _PRODUCER


if __name__ == "__main__":
    raise SystemExit(main())
