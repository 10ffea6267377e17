"""One variant of `modstream bench` on the real broker: its topics loaded with the backlog, its
process started in its own session, the clock from when it says it runs to the closing marker's
output as a read_committed consumer sees it, CPU read from /proc along the way (benchmarks/
bench_measure.py), then the latency phase at the equal rate. modstream/bench/compare.py runs
one after the other.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import threading
import time
import urllib.request
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from modstream.bench import measure, tasks
from modstream.bench.moderation import ActionWatcher, now_ms, steady_latency
from modstream.bench.variants import OUT_OF_ORDERNESS_MS, Variant
from modstream.core import kafkaio
from modstream.core.config import PROJECT_ROOT, Settings
from modstream.core.topics import TopicSpec, create_topics, physical
from modstream.demo.workload import BENCH_MIX, for_kafka, marker
from modstream.jobs.moderation.python_calls import METRIC as PYTHON_CALLS
from modstream.moderation.step import ALL_TOPICS, KEYED_TOPICS
from modstream.stack.local import Kafka

READY = re.compile(rb"^(job \S+ \S+ running|peer \S+: running)$", re.MULTILINE)


@dataclass
class Window:
    """What was read at the two ends of a variant's backlog run."""

    started: int  # ms: the process started
    ready: int  # ms: it said it runs
    done: int  # ms: the closing marker's output (or the last floor output) visible
    arrivals: list[int]  # ms: when each output of the backlog became visible
    committed: list[tuple[int, int]]  # (ms, input records its group had committed)
    cpu: measure.CpuSampler
    broker_cpu: tuple[float, float] | None  # the broker's CPU s at ready and at done
    python_calls: float | None
    peak_rss_kib: int
    python_calls_by_operator: dict[str, float] | None = None
    # A Flink variant's task times and threads' CPU through the run (modstream/bench/tasks.py).
    task_samples: list[tasks.Sample] = field(default_factory=list)


def load(
    bootstrap: str, prefix: str, lines: list[dict[str, Any]], partitions: int
) -> dict[str, str]:
    """The variant's own topics (same names and partitions for every variant), the backlog in."""
    topics = {name: physical(name, prefix) for name in ALL_TOPICS}
    topics["floor.out"] = physical("floor.out", prefix)
    create_topics(
        bootstrap,
        [TopicSpec(t, 1 if "policy" in t else partitions) for t in topics.values()],
        say=lambda _: None,
    )
    for topic, records in for_kafka(lines, topics).items():
        kafkaio.produce(bootstrap, topic, records)
    return topics


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def scrape(port: int | None) -> dict[str, float] | None:
    """The job's `python_calls` counters by operator, from its Prometheus reporter."""
    if port is None:
        return None
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as page:
            return measure.prometheus_by_operator(page.read().decode(), PYTHON_CALLS)
    except OSError:
        return None


def run_backlog(
    variant: Variant,
    process: subprocess.Popen[bytes],
    watcher: ActionWatcher,
    ready: Ready,
    events: int,
    end_ids: list[str],
    metrics_port: int | None,
    timeout_s: float,
    started: int,
    offsets: OffsetSampler,
) -> Window:
    """Wait for the variant to say it runs, then for its last backlog output; read CPU, Python
    calls and memory at both ends."""
    alive = lambda: process.poll() is None  # noqa: E731
    ready_at = ready.wait(timeout_s, alive)
    pids = [process.pid] if variant.is_peer else measure.session_pids(process.pid)
    sampler = measure.CpuSampler(pids, session=None if variant.is_peer else process.pid)
    sampler.sample()
    sampler.start()
    broker = Kafka(Settings.from_env()).pid()
    broker_ready = measure.cpu_seconds([broker]) if broker else None
    calls_ready = scrape(metrics_port)
    offsets.start()
    task_sampler = None
    if metrics_port is not None:
        task_sampler = tasks.TaskSampler(metrics_port, lambda: sampler.pids)
        task_sampler.start()
    if variant.per_input:
        done = wait_count(watcher, events, timeout_s, process)
    else:
        deadline = time.monotonic() + timeout_s  # one for every marker
        done = max(
            watcher.wait_for(end, timeout_s=max(deadline - time.monotonic(), 0.1), alive=alive)
            for end in end_ids
        )
    # The tasks' window ends with the backlog: later samples would count the idle tail.
    task_samples = task_sampler.last() if task_sampler is not None else []
    sampler.stop.set()
    sampler.join()
    sampler.sample()
    committed = offsets.last()
    broker_done = measure.cpu_seconds([broker]) if broker else None
    calls_done = scrape(metrics_port)
    arrivals = sorted(arrived for arrived, _ in watcher.seen if arrived <= done)
    calls = measure.calls_between(calls_ready, calls_done)
    return Window(
        started=started,
        ready=ready_at,
        done=done,
        arrivals=arrivals[:events] if variant.per_input else arrivals,
        committed=committed,
        cpu=sampler,
        broker_cpu=None if broker_ready is None else (broker_ready, broker_done or 0.0),
        python_calls=None if calls is None else sum(calls.values()),
        peak_rss_kib=measure.peak_rss_kib(sampler.pids),
        python_calls_by_operator=calls,
        task_samples=task_samples,
    )


def start(
    variant: Variant, prefix: str, topics: dict[str, str], run_dir: Path, log: Any
) -> tuple[subprocess.Popen[bytes], int | None, int]:
    """The variant's process in its own session (its JVM with it); a Flink variant serves its
    metrics on a port of its own, read for its Python calls."""
    argv = variant.command(prefix, topics, run_dir)
    port = None if variant.is_peer else free_port()
    if port is not None:
        argv += ["--metrics-port", str(port)]
    started = now_ms()
    process = subprocess.Popen(
        argv,
        cwd=PROJECT_ROOT,
        stdout=log,
        stderr=subprocess.STDOUT,
        env=dict(os.environ),
        start_new_session=True,
    )
    return process, port, started


def run_variant(
    variant: Variant,
    bootstrap: str,
    lines: list[dict[str, Any]],
    end_ids: list[str],
    partitions: int,
    timeout_s: float,
) -> tuple[Window, Running]:
    """Load, start, time the backlog; the window, and the variant still running (for the
    latency phase, then stopped)."""
    prefix = f"bench-{variant.key.replace('_', '-')}-{uuid.uuid4().hex[:6]}"
    run_dir = Settings.from_env().run_dir / "bench" / prefix
    run_dir.mkdir(parents=True, exist_ok=True)
    topics = load(bootstrap, prefix, lines, partitions)
    watcher = ActionWatcher(bootstrap, topics[variant.output])
    watcher.start()
    log = open(run_dir / "process.log", "wb")  # noqa: SIM115 - open for the process's life
    ready = Ready(run_dir / "process.log")
    ready.start()
    process, port, started = start(variant, prefix, topics, run_dir, log)
    running = Running(variant, process, watcher, ready, log, bootstrap, topics, run_dir, port)
    inputs = [topics[name] for name in KEYED_TOPICS]
    offsets = OffsetSampler(bootstrap, prefix, inputs, partitions)
    try:
        window = run_backlog(
            variant, process, watcher, ready, len(lines), end_ids, port, timeout_s, started, offsets
        )
    except BaseException:
        offsets.stop.set()
        running.stop()
        raise
    return window, running


@dataclass
class Running:
    """A variant still running after its backlog: the latency phase, then stopped."""

    variant: Variant
    process: subprocess.Popen[bytes]
    watcher: ActionWatcher
    ready: Ready
    log: Any
    bootstrap: str
    topics: dict[str, str]
    run_dir: Path
    metrics_port: int | None = None

    def latency(self, rate: float, seconds: float) -> dict[str, Any]:
        """`rate` versions/s for `seconds`, each stamped `ts` = when produced: event to output;
        a Flink variant's Python calls per event over the phase too (live input: a watermark
        readies a version or two, where a backlog's readies many)."""
        settle_s = None if self.variant.per_input else self.settle()
        print(f"bench: {self.variant.name} at {rate} versions/s", flush=True)
        before = scrape(self.metrics_port)
        figures = steady_latency(
            self.bootstrap, self.topics, self.watcher, rate, seconds, OUT_OF_ORDERNESS_MS,
            tag=f"live-{self.variant.key}", mix=BENCH_MIX,
        )  # fmt: skip
        figures["settle_s"] = settle_s
        calls = measure.calls_between(before, scrape(self.metrics_port))
        if calls is not None and figures["events"]:
            figures["python_calls_per_event"] = round(sum(calls.values()) / figures["events"], 4)
            figures["python_calls_per_event_by_operator"] = {
                name: round(count / figures["events"], 4) for name, count in sorted(calls.items())
            }
        return figures

    def settle(self, timeout_s: float = 600) -> float:
        """Between the backlog and the latency phase: a version stamped now, one a second
        later (a peer's watermark passes the first only on a newer record), and the wait for
        the first one's action; the seconds it took. The job may still be deciding the
        backlog's last versions when its end marker is out, and event time jumps here from the
        backlog's end to now, readying what is left of it and every timer due in between at
        once (a run that began its latency phase without this decided 40,413 versions in one
        call 8 s into the phase, after calls of up to 12 s). The latency phase is to measure
        live input, not that catch-up."""
        started = now_ms()
        content_id = f"settle-{self.variant.key}-{started}"
        lines = [marker(started, content_id), marker(started + 1_000)]
        for topic, records in for_kafka(lines, self.topics).items():
            kafkaio.produce(self.bootstrap, topic, records)
        alive = lambda: self.process.poll() is None  # noqa: E731
        arrived = self.watcher.wait_for(content_id, timeout_s=timeout_s, alive=alive)
        return round((arrived - started) / 1000, 2)

    def stop(self) -> dict[str, int]:
        """SIGTERM, wait, and the Flink job's checkpoint figures from its log."""
        self.process.send_signal(signal.SIGTERM)
        self.process.wait(timeout=120)
        self.watcher.stop.set()
        self.ready.stop.set()
        self.log.close()
        if self.variant.flink_job is None:
            return {}
        logs = Settings.from_env().run_dir / "flink" / "logs"
        pattern = f"flink-{self.variant.flink_job}-{self.process.pid}-*.log"
        return checkpoint_stats(next(logs.glob(pattern), logs))


def checkpoint_stats(log: Path) -> dict[str, int]:
    """From a Flink job's log (CheckpointCoordinator's "Completed checkpoint N ... (B bytes,
    checkpointDuration=D ms"): how many, duration p50 and max, the last one's bytes."""
    if not log.is_file():
        return {}
    found = re.findall(
        r"Completed checkpoint \d+ .*?\((\d+) bytes, checkpointDuration=(\d+) ms",
        log.read_text(errors="replace"),
    )
    if not found:
        return {}
    durations = sorted(int(duration) for _, duration in found)
    return {
        "count": len(found),
        "duration_p50_ms": durations[len(durations) // 2],
        "duration_max_ms": durations[-1],
        "last_bytes": int(found[-1][0]),
    }


class OffsetSampler(threading.Thread):
    """The input records a variant's consumer group has committed, every `every_s`: its
    progress through the backlog as the broker sees it, the same for every variant (a peer
    commits after each poll, a Flink job when a checkpoint completes)."""

    def __init__(
        self, bootstrap: str, group: str, topics: list[str], partitions: int, every_s: float = 0.5
    ) -> None:
        from confluent_kafka import Consumer, TopicPartition

        super().__init__(daemon=True)
        self.consumer = Consumer(
            {"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False}
        )
        self.partitions = [TopicPartition(t, p) for t in topics for p in range(partitions)]
        self.every_s = every_s
        self.samples: list[tuple[int, int]] = []
        self.stop = threading.Event()

    def sample(self) -> None:
        try:
            committed = self.consumer.committed(self.partitions, timeout=5)
        except Exception:  # the broker busy: the next sample will do
            return
        self.samples.append((now_ms(), sum(max(tp.offset, 0) for tp in committed)))

    def run(self) -> None:
        while not self.stop.wait(self.every_s):
            self.sample()

    def last(self) -> list[tuple[int, int]]:
        """Stop, take the last sample, close; the samples."""
        self.stop.set()
        if self.is_alive():
            self.join()
        self.sample()
        self.consumer.close()
        return self.samples


class Ready(threading.Thread):
    """When a variant said it runs: `job NAME ID running` (modstream/jobs/runtime.py, the job
    deployed) or `peer CLIENT: running` (modstream/bench/peer.py, its clients made), in its log."""

    def __init__(self, log: Path) -> None:
        super().__init__(daemon=True)
        self.log = log
        self.at: int | None = None
        self.stop = threading.Event()

    def run(self) -> None:
        while self.at is None and not self.stop.is_set():
            if self.log.exists() and READY.search(self.log.read_bytes()):
                self.at = now_ms()
            time.sleep(0.05)

    def wait(self, timeout_s: float, alive: Any) -> int:
        deadline = time.monotonic() + timeout_s
        while self.at is None:
            if not alive() or time.monotonic() > deadline:
                raise RuntimeError(f"the variant never said it runs: {self.log}")
            time.sleep(0.05)
        return self.at


def wait_count(
    watcher: ActionWatcher, count: int, timeout_s: float, process: subprocess.Popen[bytes]
) -> int:
    """When the `count`-th output became visible (a floor writes one per input)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if len(watcher.seen) >= count:
            return sorted(arrived for arrived, _ in watcher.seen)[count - 1]
        watcher.check()
        if process.poll() is not None:
            raise RuntimeError(f"the floor job exited with {process.returncode}")
        time.sleep(0.2)
    raise TimeoutError(f"the floor wrote {len(watcher.seen)} of {count} outputs")
