"""`modstream bench`: the moderation job beside the engine's floor and the service a team would
write by hand, on the same generated workload and the real broker, in one run.

Each variant gets the same workload loaded into its own topics before it starts (a backlog), runs
in its own process, and is timed from when it says it runs (a Flink job deployed, a peer's
clients made) to the output for the closing marker visible to a read_committed consumer
(ordered after every other input in event time); its start-up before that is reported apart.
Not from its first output: a job buffers a backlog until the watermark passes it, and an
exactly-once job's output becomes visible only at a completed checkpoint, so work would be
counted as start-up. CPU seconds and peak memory are summed over
the variant's processes (its Python process and its JVM), read from /proc when its last output
appeared.

- floor: benchmarks/floor_job.py (decode, key, keyed state, encode; exactly-once sink);
- modstream: jobs/moderation.py, exactly-once, checkpoint interval 1 s;
- kafka-python, confluent-kafka: benchmarks/peer.py, the same per-version code, at-least-once.

    modstream bench [--quick] [--json] [--variants floor,modstream,kafka-python]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchmarks.bench_batched import batched_calls, batched_summary, engine_args
from benchmarks.bench_moderation import ActionWatcher, now_ms, steady_latency
from modstream import kafkaio
from modstream.config import PROJECT_ROOT, Settings
from modstream.progress import Progress
from modstream.topics import TopicSpec, create_topics, physical
from modstream.workload import BENCH_MIX, for_kafka, generate, marker
from operators.moderation import ALL_TOPICS

if TYPE_CHECKING:
    from benchmarks.peer import Engine

VARIANTS = ("floor", "modstream", "modstream-batched", "kafka-python", "confluent-kafka")
POLICY = PROJECT_ROOT / "policy_rules" / "global.yaml"
CHECKPOINT_INTERVAL_MS = 1_000
OUT_OF_ORDERNESS_MS = 500
# Extra options for the moderation job, to try a setting with the same harness, e.g.
# MODSTREAM_BENCH_JOB_ARGS="--sink-property linger.ms=20 --flink-conf k=v" (jobs/options.py).
JOB_ARGS = shlex.split(os.environ.get("MODSTREAM_BENCH_JOB_ARGS", ""))
LOADS = (0.5, 0.8)  # latency phases, as fractions of the variant's measured backlog rate


@dataclass
class Result:
    variant: str
    versions: int
    events: int
    startup_s: float
    processing_s: float
    versions_per_s: float
    events_per_s: float
    cpu_s: float
    peak_rss_mib: float
    outputs: int
    # At LOADS of this variant's own backlog rate: {"50%": {"p50_ms", "p95_ms", "p99_ms", ...}}.
    latency: dict[str, dict[str, Any]] = field(default_factory=dict)
    # The Flink variants' completed checkpoints: count, duration p50 and max, last size.
    checkpoints: dict[str, int] = field(default_factory=dict)


def workload(versions: int) -> tuple[list[dict[str, Any]], str]:
    """The seeded backlog and its closing markers; the id whose output ends a run."""
    start_ts = now_ms() - versions * 200 - 300_000
    lines = generate(
        seed=5, versions=versions, start_ts=start_ts, extras=False, malformed=False, mix=BENCH_MIX
    )
    last_ts = max(line["value"]["ts"] for line in lines)
    end = [marker(last_ts + 60_000), marker(last_ts + 120_000)]
    return lines + end, end[0]["value"]["content_id"]


def load(
    bootstrap: str, prefix: str, lines: list[dict[str, Any]], partitions: int
) -> dict[str, str]:
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


def command(variant: str, prefix: str, topics: dict[str, str], run_dir: Path) -> list[str]:
    mapping = [arg for name in ALL_TOPICS for arg in ("--topic", f"{name}={topics[name]}")]
    if variant in ("kafka-python", "confluent-kafka"):
        return [
            sys.executable, "-m", "benchmarks.peer", "--client", variant, "--group", prefix,
            "--policy", str(POLICY), *mapping,
        ]  # fmt: skip
    job = [
        "--checkpoint-dir", str(run_dir / "ckpt"),
        "--checkpoint-interval-ms", str(CHECKPOINT_INTERVAL_MS),
        "--transactional-id-prefix", prefix, "--group-id", prefix, *mapping,
    ]  # fmt: skip
    if variant == "floor":
        return [sys.executable, "-m", "benchmarks.floor_job", "--output", topics["floor.out"], *job]
    return [
        sys.executable, "-m", "jobs.moderation", *job, "--policy", str(POLICY),
        "--out-of-orderness-ms", str(OUT_OF_ORDERNESS_MS), "--idleness-ms", "1000",
        # No faults here: a backlog that falls silent is complete after 2 s, not 60 s.
        "--drained-after-ms", "2000",
        *engine_args(variant), *JOB_ARGS,
    ]  # fmt: skip


def run_variant(
    variant: str, bootstrap: str, lines: list[dict[str, Any]], end_id: str, args: argparse.Namespace
) -> Result:
    prefix = f"bench-{variant.split('-')[0]}-{uuid.uuid4().hex[:6]}"
    run_dir = Settings.from_env().run_dir / "bench" / prefix
    run_dir.mkdir(parents=True, exist_ok=True)
    topics = load(bootstrap, prefix, lines, args.partitions)
    output = topics["floor.out" if variant == "floor" else "moderation.actions"]
    watcher = ActionWatcher(bootstrap, output)
    watcher.start()
    events = len(lines)
    started = now_ms()
    ready = Ready(run_dir / "process.log")
    with open(run_dir / "process.log", "wb") as log:
        ready.start()
        process = subprocess.Popen(
            command(variant, prefix, topics, run_dir),
            cwd=PROJECT_ROOT,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=dict(os.environ),
            start_new_session=True,  # its JVM too: CPU and memory are summed over the session
        )
        try:
            if variant == "floor":
                done = wait_count(watcher, events, args.timeout_s, process)
            else:
                alive = lambda: process.poll() is None  # noqa: E731
                done = watcher.wait_for(end_id, timeout_s=args.timeout_s, alive=alive)
            cpu_s, peak_rss_kib = session_usage(process.pid)
            # From when the variant said it runs to the closing marker's output committed.
            if ready.at is None:
                raise RuntimeError(f"{variant} never said it runs: {run_dir / 'process.log'}")
            first = ready.at
            processing_s = max((done - first) / 1000, 1e-3)
            latency = {}
            if variant != "floor" and args.latency_s > 0:
                latency = latency_at_loads(variant, bootstrap, topics, watcher, args, processing_s)
        finally:
            process.send_signal(signal.SIGTERM)
            process.wait(timeout=120)
            watcher.stop.set()
            ready.stop.set()
    job = "floor" if variant == "floor" else "moderation"
    logs = Settings.from_env().run_dir / "flink" / "logs"
    checkpoints = checkpoint_stats(next(logs.glob(f"flink-{job}-{process.pid}-*.log"), logs))
    return Result(
        variant=variant,
        versions=args.versions,
        events=events,
        startup_s=round((first - started) / 1000, 2),
        processing_s=round(processing_s, 2),
        versions_per_s=round(args.versions / processing_s, 1),
        events_per_s=round(events / processing_s, 1),
        cpu_s=round(cpu_s, 1),
        peak_rss_mib=round(peak_rss_kib / 1024, 1),
        outputs=len(watcher.seen),
        latency=latency,
        checkpoints=checkpoints | batched_calls(variant, process.pid),
    )


def latency_at_loads(
    variant: str,
    bootstrap: str,
    topics: dict[str, str],
    watcher: ActionWatcher,
    args: argparse.Namespace,
    processing_s: float,
) -> dict[str, Any]:
    """Steady-rate latency at each of LOADS, a share of the variant's backlog pace."""
    latency: dict[str, Any] = {}
    for fraction in LOADS:
        rate = max(1.0, round(fraction * args.versions / processing_s, 1))
        print(f"bench: {variant} at {fraction:.0%} load ({rate} versions/s)", flush=True)
        latency[f"{fraction:.0%}"] = steady_latency(
            bootstrap, topics, watcher, rate, args.latency_s, OUT_OF_ORDERNESS_MS,
            tag=f"live{int(fraction * 100)}", mix=BENCH_MIX,
        )  # fmt: skip
    return latency


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


READY = re.compile(rb"^(job \S+ \S+ running|peer \S+: running)$", re.MULTILINE)


class Ready(threading.Thread):
    """When a variant said it runs: `job NAME ID running` (jobs/runtime.py, the job deployed)
    or `peer CLIENT: running` (benchmarks/peer.py, its clients made), in its log."""

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


def session_usage(session: int) -> tuple[float, int]:
    """CPU seconds (user + system, reaped children included) and the sum of each process's
    peak resident memory (KiB), over the processes of `session` still running: the variant's
    Python process and the JVM it started."""
    ticks = os.sysconf("SC_CLK_TCK")
    cpu, peak = 0.0, 0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            status = (entry / "status").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        if int(fields[3]) != session:  # field 6 of stat: the session id
            continue
        cpu += sum(int(value) for value in fields[11:15]) / ticks  # utime stime cutime cstime
        for line in status.splitlines():
            if line.startswith("VmHWM:"):
                peak += int(line.split()[1])
    return cpu, peak


def wait_count(
    watcher: ActionWatcher, count: int, timeout_s: float, process: subprocess.Popen[bytes]
) -> int:
    """When the `count`-th output became visible (the floor writes one per input)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if len(watcher.seen) >= count:
            return sorted(arrived for arrived, _ in watcher.seen)[count - 1]
        watcher.check()
        if process.poll() is not None:
            raise RuntimeError(f"the floor job exited with {process.returncode}")
        time.sleep(0.2)
    raise TimeoutError(f"the floor wrote {len(watcher.seen)} of {count} outputs")


def step_engine(now_ms: int | None = None) -> Engine:
    """benchmarks/peer.py's Engine (the job's per-version code, no Kafka) under the bench
    policy; `now_ms` fixes its processing clock (None: the wall clock, as the job's)."""
    import yaml

    from benchmarks.peer import Engine
    from jobs.moderation_config import ModerationConfig
    from modstream.limits import Limits
    from operators.signing import Keyring

    config = ModerationConfig(
        limits=Limits.from_env(),
        keyring=Keyring.from_env(),
        trusted_policy=yaml.safe_load(POLICY.read_text(encoding="utf-8")),
        now_ms=now_ms,
    )
    return Engine(config)


def step_records(lines: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """(topic, value) of every record of `lines`, topic by topic as a consumer reads them."""
    grouped = for_kafka(lines)
    return [(topic, value.decode()) for topic, pairs in grouped.items() for _, value in pairs]


def step_cost(lines: list[dict[str, Any]]) -> dict[str, float]:
    """The per-version code in process, no Kafka: µs per event to admit (decode, validate, check
    signatures) and to apply (the job's `Moderate.apply`: step, timers, state as JSON, outputs
    encoded), on the same workload (benchmarks/peer.py's Engine)."""
    engine = step_engine()
    records = step_records(lines)
    started = time.perf_counter()
    for topic, raw in records:
        engine.admit(topic, raw, topic, 0)
    admitted = time.perf_counter()
    outputs = sum(1 for _ in engine.drain(max(line["value"]["ts"] for line in lines)))
    applied = time.perf_counter()
    events = len(records)
    state_bytes = sum(len(value) for value in engine.states.values())
    return {
        "events": events,
        "admit_us_per_event": round((admitted - started) / events * 1e6, 1),
        "step_us_per_event": round((applied - admitted) / events * 1e6, 1),
        "outputs_per_event": round(outputs / events, 2),
        "state_bytes_per_version": round(state_bytes / max(len(engine.states), 1)),
    }


def options() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="modstream bench",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--versions", type=int, default=6000, help="content versions (backlog)")
    parser.add_argument("--quick", action="store_true", help="1,500 versions")
    parser.add_argument("--json", action="store_true", help="one JSON line last")
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--timeout-s", type=float, default=900.0)
    parser.add_argument("--plot", help="write a PNG of throughput and latency per variant here")
    parser.add_argument(
        "--latency-s",
        type=float,
        default=20.0,
        help="seconds of each steady phase after the backlog (50%% and 80%% of the variant's "
        "backlog rate; 0: none)",
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    args = options().parse_args(argv)
    if args.quick:
        args.versions = 1500
        args.latency_s = min(args.latency_s, 10.0)
    bootstrap = Settings.from_env().bootstrap_servers
    variants = [name for name in args.variants.split(",") if name]
    # Progress on stderr (modstream/progress.py): a bar on a terminal, else a line every 15 s.
    with Progress("bench", live=False if args.json else None, every_s=15.0) as shown:
        with shown.waiting(f"generating {args.versions} versions, the step in process"):
            lines, end_id = workload(args.versions)
            step = step_cost(lines)
        print(f"bench: step in process {json.dumps(step)}", flush=True)
        results: dict[str, Result] = {}
        for number, variant in enumerate(variants, 1):
            print(f"bench: {variant} on {args.versions} versions ({len(lines)} events)", flush=True)
            with shown.waiting(f"variant {number}/{len(variants)}: {variant}"):
                results[variant] = run_variant(variant, bootstrap, lines, end_id, args)
            print(f"bench: {json.dumps(asdict(results[variant]))}", flush=True)
    print_table(results)
    if args.plot:
        from benchmarks.bench_plot import write_plot

        write_plot(results, Path(args.plot))
        print(f"bench: plot {args.plot}", flush=True)
    if args.json:
        print(json.dumps({**summary(results), **step}))
    return 0


def print_table(results: dict[str, Result]) -> None:
    print(
        f"{'variant':<16}{'versions/s':>12}{'events/s':>10}{'start s':>9}{'CPU s':>8}{'RSS MiB':>9}"
    )
    for r in results.values():
        print(
            f"{r.variant:<16}{r.versions_per_s:>12}{r.events_per_s:>10}{r.startup_s:>9}"
            f"{r.cpu_s:>8}{r.peak_rss_mib:>9}"
        )


def summary(results: dict[str, Result]) -> dict[str, Any]:
    def vps(name: str) -> float | None:
        return results[name].versions_per_s if name in results else None

    line: dict[str, Any] = {
        "floor_vps": vps("floor"),
        "modstream_vps": vps("modstream"),
        "modstream_batched_vps": vps("modstream-batched"),
        "peer_vps": vps("kafka-python"),
        "peer_ck_vps": vps("confluent-kafka"),
        "checkpoint_interval_ms": CHECKPOINT_INTERVAL_MS,
        "job_args": shlex.join(JOB_ARGS),
    }
    at_half = results["modstream"].latency.get("50%", {}) if "modstream" in results else {}
    for name in ("p50_ms", "p95_ms", "p99_ms"):
        line[name] = at_half.get(name)
    mod = vps("modstream")
    for name, key in (
        ("floor", "vs_floor"),
        ("kafka-python", "vs_peer"),
        ("confluent-kafka", "vs_peer_ck"),
    ):
        other = vps(name)
        line[key] = round(mod / other, 2) if mod and other else None
    line.update(batched_summary(results))
    return line


if __name__ == "__main__":
    raise SystemExit(main())
