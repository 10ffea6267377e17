"""`modstream bench`: the moderation job beside the engine's floors and the service a team
would write by hand, on the same generated workload, topics and partitions and the real broker,
one variant after the other in one run (issue 26, point 3; docs/BENCHMARKS.md).

Each variant gets the same backlog loaded into its own topics before it starts, runs in its own
process, and is timed from when it says it runs (a Flink job deployed, a peer's clients made) to
the output for the closing marker visible to a read_committed consumer; its start-up before that
is reported apart, and so is its warm-up (JIT, first checkpoints): the steady rate and CPU are
taken after the first 20% of its outputs (modstream/bench/measure.py). CPU is read from
/proc: every process of the variant's session (a job's JVM with its embedded Python; a peer's
process with librdkafka's threads), the broker apart. Then every variant runs at the same
absolute rate, half the confluent-kafka peer's steady rate, for the latency from event `ts` to
committed output. The variants: modstream/bench/variants.py.

    modstream bench [--quick | --steady] [--json] [--plot PNG] [--variants a,b]
"""

from __future__ import annotations

import argparse
import json
import shlex
import time
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from modstream.bench.fire import FIRE_STEP_MS, Driver, bench_config, keyed_rows, step_records
from modstream.bench.measure import Result, backlog_figures, steady_start, summary_line
from modstream.bench.moderation import now_ms
from modstream.bench.run import Window, run_variant
from modstream.bench.tasks import machine_busy, task_shares
from modstream.bench.variants import (
    CHECKPOINT_INTERVAL_MS,
    EQUAL_LOAD_FROM,
    EQUAL_LOAD_SHARE,
    JOB_ARGS,
    VARIANTS,
    Variant,
)
from modstream.core.config import Settings
from modstream.core.progress import Progress
from modstream.demo.workload import BENCH_MIX, generate, marker

if TYPE_CHECKING:
    from modstream.bench.peer import Engine

# `--steady`: 212,308 events with the markers (BENCH_MIX, seed 5): over 200,000 per variant.
STEADY_VERSIONS = 55_000
STEADY_EVENTS = 200_000


# Closing markers at one ts, each its own version: a run ends when every one's output is
# visible. A marker is decided only once its keyed subtask's watermark passed the backlog, so
# with the job's keyed operators at parallelism N the run waits for the slowest subtask that
# got a marker, not only the one a single marker hit. The ids are fixed, so which subtasks get
# one is too; at parallelism 2 every run counts as many outputs as at 1 (docs/BENCHMARKS.md,
# "A Python process per operator"), so both subtasks had finished.
END_MARKERS = 16


def workload(versions: int) -> tuple[list[dict[str, Any]], list[str]]:
    """The seeded backlog and its closing markers; the ids whose outputs end a run."""
    start_ts = now_ms() - versions * 200 - 300_000
    lines = generate(
        seed=5, versions=versions, start_ts=start_ts, extras=False, malformed=False, mix=BENCH_MIX
    )
    last_ts = max(line["value"]["ts"] for line in lines)
    end = [marker(last_ts + 60_000, f"marker-end-{n}") for n in range(END_MARKERS)]
    return [*lines, *end, marker(last_ts + 120_000)], [m["value"]["content_id"] for m in end]


def step_engine(now_ms: int | None = None) -> Engine:
    """modstream/bench/peer.py's Engine (the job's per-version code, no Kafka) under the bench
    policy; `now_ms` fixes its processing clock (None: the wall clock, as the job's)."""
    from modstream.bench.peer import Engine

    return Engine(bench_config(now_ms), sanctions_stage=False)  # the per-version code alone


def step_cost(lines: list[dict[str, Any]]) -> dict[str, float]:
    """The per-version code in process, no Kafka: µs per event to admit (decode, validate, check
    signatures) and to apply (the job's `Moderate.apply`: step, timers, state, outputs encoded),
    on the same workload (modstream/bench/peer.py's Engine), in CPU time (`time.process_time`,
    as `make bench-step`). Steady state, start-up apart (issue 26): a first pass on one engine
    (first calls, caches, the interpreter's specialisation) is reported as `cold_*`; the figures
    are a second pass on a fresh engine. `fire_us_per_event`: the step as the job runs it, with
    its adapter and metrics (modstream/bench/fire.py, one call per 200 ms of event time), after
    those passes."""
    records = step_records(lines)
    until = max(line["value"]["ts"] for line in lines)
    passes = [_step_pass(records, until) for _ in range(2)]
    (cold_admit, cold_apply, _, _), (admit_s, apply_s, outputs, engine) = passes
    events = len(records)
    state_bytes = sum(len(value) for value in engine.states.values())
    driver = Driver(engine.config)
    driver.run(keyed_rows(engine.config, records), until, FIRE_STEP_MS)
    return {
        "fire_us_per_event": round(driver.cpu_s / events * 1e6, 1),
        "events": events,
        "admit_us_per_event": round(admit_s / events * 1e6, 1),
        "step_us_per_event": round(apply_s / events * 1e6, 1),
        "cold_admit_us_per_event": round(cold_admit / events * 1e6, 1),
        "cold_step_us_per_event": round(cold_apply / events * 1e6, 1),
        "outputs_per_event": round(outputs / events, 2),
        "state_bytes_per_version": round(state_bytes / max(len(engine.states), 1)),
    }


def _step_pass(records: list[tuple[str, str]], until: int) -> tuple[float, float, int, Engine]:
    """One pass of the workload through a fresh engine: admit s, apply s, outputs, the engine."""
    engine = step_engine()
    started = time.process_time()
    for topic, raw in records:
        engine.admit(topic, raw, topic, 0)
    admitted = time.process_time()
    outputs = sum(1 for _ in engine.drain(until))
    applied = time.process_time()
    return admitted - started, applied - admitted, outputs, engine


def options() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="modstream bench",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--versions", type=int, default=6000, help="content versions (backlog)")
    size = parser.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_true", help="1,500 versions, 10 s of latency (CI)")
    size.add_argument(
        "--steady",
        action="store_true",
        help=f"{STEADY_VERSIONS:,} versions: at least {STEADY_EVENTS:,} events per variant",
    )
    parser.add_argument("--json", action="store_true", help="one JSON line last")
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--timeout-s", type=float, default=1800.0)
    parser.add_argument("--plot", help="write a PNG of throughput, CPU and latency here")
    parser.add_argument(
        "--latency-s",
        type=float,
        default=20.0,
        help="seconds of the latency phase at the equal rate (0: none)",
    )
    parser.add_argument(
        "--rate",
        type=float,
        help="the equal rate, versions/s (default: half the confluent-kafka peer's steady rate)",
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    args = options().parse_args(argv)
    if args.quick:
        args.versions = 1500
        args.latency_s = min(args.latency_s, 10.0)
    if args.steady:
        args.versions = STEADY_VERSIONS
    names = [name for name in args.variants.split(",") if name]
    unknown = sorted(set(names) - set(VARIANTS))
    if unknown:
        raise SystemExit(f"bench: no variant {', '.join(unknown)} (known: {', '.join(VARIANTS)})")
    variants = [VARIANTS[name] for name in VARIANTS if name in names]  # the table's order
    # Progress on stderr (modstream/core/progress.py): a bar on a terminal, else a line every 15 s.
    with Progress("bench", live=False if args.json else None, every_s=15.0) as shown:
        with shown.waiting(f"generating {args.versions} versions, the step in process"):
            lines, end_ids = workload(args.versions)
            step = step_cost(lines)
        if args.steady and len(lines) < STEADY_EVENTS:
            raise SystemExit(f"bench: {len(lines)} events, fewer than {STEADY_EVENTS:,}")
        print(f"bench: step in process {json.dumps(step)}", flush=True)
        results, rate = run_all(variants, lines, end_ids, args, shown)
    print_table(results)
    print_tasks(results)
    if args.plot:
        from modstream.bench.plot import write_plot, write_task_plot

        write_plot(results, rate, Path(args.plot))
        print(f"bench: plot {args.plot}", flush=True)
        for result in results.values():
            if result.tasks and result.variant == "modstream":
                tasks_png = Path(args.plot).with_name(f"{Path(args.plot).stem}-tasks.png")
                write_task_plot(result, tasks_png)
                print(f"bench: tasks plot {tasks_png}", flush=True)
    if args.json:
        keys = {variant.name: variant.key for variant in VARIANTS.values()}
        line = summary_line({n: asdict(r) for n, r in results.items()}, keys, step, rate)
        print(json.dumps({**line, "checkpoint_interval_ms": CHECKPOINT_INTERVAL_MS,
                          "job_args": shlex.join(JOB_ARGS), "events": len(lines),
                          "versions": args.versions, "step": step}))  # fmt: skip
    return 0


def run_all(
    variants: list[Variant],
    lines: list[dict[str, Any]],
    end_ids: list[str],
    args: argparse.Namespace,
    shown: Any,
) -> tuple[dict[str, Result], float | None]:
    """Each variant in turn: its backlog, then the latency phase at the equal rate (the
    first variant's, the confluent-kafka peer, sets it unless `--rate` does)."""
    bootstrap = Settings.from_env().bootstrap_servers
    results: dict[str, Result] = {}
    rate: float | None = args.rate
    for number, variant in enumerate(variants, 1):
        print(
            f"bench: {variant.name} on {args.versions} versions ({len(lines)} events)", flush=True
        )
        with shown.waiting(f"variant {number}/{len(variants)}: {variant.name}"):
            window, running = run_variant(
                variant, bootstrap, lines, end_ids, args.partitions, args.timeout_s
            )
            try:
                result = to_result(variant, window, args.versions, len(lines))
                if rate is None and variant.name == EQUAL_LOAD_FROM:
                    versions_per_event = args.versions / len(lines)
                    steady_vps = result.steady_events_per_s * versions_per_event
                    rate = round(EQUAL_LOAD_SHARE * steady_vps, 1)
                if rate and args.latency_s > 0:
                    result.latency = running.latency(rate, args.latency_s)
            finally:
                result_checkpoints = running.stop()
        result.checkpoints = result_checkpoints
        results[variant.name] = result
        print(f"bench: {json.dumps(asdict(result))}", flush=True)
    return results, rate


def to_result(variant: Variant, window: Window, versions: int, events: int) -> Result:
    figures = backlog_figures(
        events=events,
        started=window.started,
        ready=window.ready,
        done=window.done,
        arrivals=window.arrivals,
        committed=window.committed,
        cpu_samples=window.cpu.samples,
        jit_samples=window.cpu.jit_samples,
        broker_cpu=window.broker_cpu,
        python_calls=window.python_calls,
    )
    steady_from, _ = steady_start(window.committed, window.arrivals, window.ready)
    return Result(
        variant=variant.name,
        versions=versions,
        events=events,
        peak_rss_mib=round(window.peak_rss_kib / 1024, 1),
        outputs=len(window.arrivals),
        python_calls_per_event_by_operator=None
        if window.python_calls_by_operator is None
        else {
            name: round(count / events, 4)
            for name, count in sorted(window.python_calls_by_operator.items())
        },
        tasks=task_shares(window.task_samples, steady_from) or None,
        machine_busy=machine_busy(window.task_samples, steady_from),
        **figures,
    )


def print_tasks(results: dict[str, Result]) -> None:
    """Each Flink variant's tasks in the steady window (modstream/bench/tasks.py): shares of
    wall time busy, back-pressured and idle, a CPU's share its thread used, and that CPU over
    its busy time."""
    for r in results.values():
        if not r.tasks:
            continue
        print(
            f"{r.variant}: tasks in the steady window (shares of each task's time; the machine "
            f"{r.machine_busy} busy)"
        )
        print(f"  {'task':<44}{'busy':>6}{'bp':>6}{'idle':>6}{'CPU':>6}{'CPU/busy':>9}")
        for task, t in r.tasks.items():
            on_cpu = t.get("on_cpu_of_busy")
            print(
                f"  {task[:44]:<44}{t['busy']:>6}{t['backpressured']:>6}{t['idle']:>6}"
                f"{t['cpu']:>6}{'-' if on_cpu is None else on_cpu:>9}"
            )


def print_table(results: dict[str, Result]) -> None:
    print(
        f"{'variant':<20}{'steady ev/s':>12}{'all ev/s':>10}{'start s':>8}{'warm s':>8}"
        f"{'CPU µs/ev':>10}{'JIT':>6}{'broker':>8}{'p50 ms':>8}{'p99 ms':>8}"
    )
    for r in results.values():
        print(
            f"{r.variant:<20}{r.steady_events_per_s:>12}{r.events_per_s:>10}{r.startup_s:>8}"
            f"{r.warmup_s:>8}{r.steady_cpu_us_per_event:>10}{r.steady_jit_cpu_us_per_event:>6}"
            f"{r.broker_cpu_us_per_event or '-':>8}"
            f"{r.latency.get('p50_ms') or '-':>8}{r.latency.get('p99_ms') or '-':>8}"
        )


if __name__ == "__main__":
    raise SystemExit(main())
