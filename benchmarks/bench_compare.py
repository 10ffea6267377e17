"""`modstream bench`: the moderation job beside the engine's floor and the service a team would
write by hand, on the same generated workload and the real broker, in one run.

Each variant gets the same workload loaded into its own topics before it starts (a backlog), runs
in its own process, and is timed from its first committed output to the output for the closing
marker (ordered after every other input in event time); its start-up is left out of the rate and
reported apart. CPU seconds and peak memory are summed over the variant's processes (its
Python process and its JVM), read from /proc when its last output appeared.

- floor: benchmarks/floor_job.py (decode, key, keyed state, encode; exactly-once sink);
- modstream: jobs/moderation.py, exactly-once, checkpoint interval 1 s;
- kafka-python, confluent-kafka: benchmarks/peer.py, the same per-version code, at-least-once.

    modstream bench [--quick] [--json] [--variants floor,modstream,kafka-python]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchmarks.bench_moderation import ActionWatcher, now_ms
from modstream import kafkaio
from modstream.config import PROJECT_ROOT, Settings
from modstream.topics import TopicSpec, create_topics
from modstream.workload import for_kafka, generate, marker
from operators.moderation import ALL_TOPICS

if TYPE_CHECKING:
    from benchmarks.peer import Engine

VARIANTS = ("floor", "modstream", "kafka-python", "confluent-kafka")
POLICY = PROJECT_ROOT / "policy_rules" / "global.yaml"
CHECKPOINT_INTERVAL_MS = 1_000


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


def workload(versions: int) -> tuple[list[dict[str, Any]], str]:
    """The seeded backlog and its closing markers; the id whose output ends a run."""
    start_ts = now_ms() - versions * 200 - 300_000
    lines = generate(seed=5, versions=versions, start_ts=start_ts, extras=False, malformed=False)
    last_ts = max(line["value"]["ts"] for line in lines)
    end = [marker(last_ts + 60_000), marker(last_ts + 120_000)]
    return lines + end, end[0]["value"]["content_id"]


def load(
    bootstrap: str, prefix: str, lines: list[dict[str, Any]], partitions: int
) -> dict[str, str]:
    topics = {name: f"{prefix}.{name}" for name in ALL_TOPICS}
    topics["floor.out"] = f"{prefix}.floor.out"
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
        "--out-of-orderness-ms", "500", "--idleness-ms", "1000",
        # No faults here: a backlog that falls silent is complete after 2 s, not 60 s.
        "--drained-after-ms", "2000",
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
    with open(run_dir / "process.log", "wb") as log:
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
                done = watcher.wait_for(end_id, timeout_s=args.timeout_s)
            cpu_s, peak_rss_kib = session_usage(process.pid)
        finally:
            process.send_signal(signal.SIGTERM)
            process.wait(timeout=120)
            watcher.stop.set()
    first = min(arrived for arrived, _ in watcher.seen)
    processing_s = max((done - first) / 1000, 1e-3)
    versions = args.versions
    return Result(
        variant=variant,
        versions=versions,
        events=events,
        startup_s=round((first - started) / 1000, 2),
        processing_s=round(processing_s, 2),
        versions_per_s=round(versions / processing_s, 1),
        events_per_s=round(events / processing_s, 1),
        cpu_s=round(cpu_s, 1),
        peak_rss_mib=round(peak_rss_kib / 1024, 1),
        outputs=len(watcher.seen),
    )


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
        if process.poll() is not None:
            raise RuntimeError(f"the floor job exited with {process.returncode}")
        time.sleep(0.2)
    raise TimeoutError(f"the floor wrote {len(watcher.seen)} of {count} outputs")


def step_engine(now_ms: int | None = None) -> Engine:
    """benchmarks/peer.py's Engine (the job's per-version code, no Kafka) under the bench
    policy; `now_ms` fixes its processing clock (None: the wall clock, as the job's)."""
    import yaml

    from benchmarks.peer import Engine
    from jobs.moderation import ModerationConfig
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
    state_bytes = sum(len(value.encode()) for value in engine.states.values())
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
    return parser


def main(argv: list[str] | None = None) -> int:
    args = options().parse_args(argv)
    if args.quick:
        args.versions = 1500
    bootstrap = Settings.from_env().bootstrap_servers
    lines, end_id = workload(args.versions)
    step = step_cost(lines)
    print(f"bench: step in process {json.dumps(step)}", flush=True)
    results: dict[str, Result] = {}
    for variant in [name for name in args.variants.split(",") if name]:
        print(f"bench: {variant} on {args.versions} versions ({len(lines)} events)", flush=True)
        results[variant] = run_variant(variant, bootstrap, lines, end_id, args)
        print(f"bench: {json.dumps(asdict(results[variant]))}", flush=True)
    print_table(results)
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
        "peer_vps": vps("kafka-python"),
        "peer_ck_vps": vps("confluent-kafka"),
        "checkpoint_interval_ms": CHECKPOINT_INTERVAL_MS,
    }
    mod = vps("modstream")
    for name, key in (
        ("floor", "vs_floor"),
        ("kafka-python", "vs_peer"),
        ("confluent-kafka", "vs_peer_ck"),
    ):
        other = vps(name)
        line[key] = round(mod / other, 2) if mod and other else None
    return line


if __name__ == "__main__":
    raise SystemExit(main())
