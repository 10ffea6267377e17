"""The per-version code per event, in process, no Kafka and no Flink (modstream/bench/peer.py's
Engine, as `bench_compare.step_cost`), on the `modstream bench` workload:
- admit: the job's Decode for each record (strict JSON, schema, signature, trusted ts) and the
  record written on as Decode writes it;
- apply: the job's `Moderate.apply` (the record read back, `modstream.moderation.step.step` and
  `on_timer`, policy evaluation, the version's state read and written, outputs encoded);
- the version's stored state in bytes, averaged over the versions held at the end;
- fire: the step as the job runs it, `BatchedModerate.fire` (modstream/bench/fire.py): apply
  plus the adapter around it (its metrics, the payloads in and out), on the records Decode
  admits, one call per 200 ms of event time; the CPU time of the calls alone.

Run with `make bench-step` (pytest-benchmark): each round admits every record of the workload
into a fresh engine (timed apart, in the round's setup) and then applies every event once (the
timed part); one warm-up round first. Both are timed in CPU time (`time.process_time`; the
Makefile passes `--benchmark-timer time.process_time`), steadier than wall time on the shared
2-core machine, where other work takes the CPU away mid-round. It prints two lines: `step:`,
with the medians: admit and apply µs per event, their sum, and state bytes per version; and
`fire:`, the median CPU µs per event of the `fire` calls (the step with the job's adapter, its
metrics included), five fresh rounds after a warm-up. Goal (issue 26): admit at most 10 µs and
the sum at most 40 µs per event on the 2-core machine.
"""

from __future__ import annotations

import statistics
import time
from typing import Any

from modstream.bench.compare import step_engine
from modstream.bench.fire import FIRE_STEP_MS, NOW_MS, Driver, keyed_rows, step_records
from modstream.demo.workload import BENCH_MIX, generate

VERSIONS = 1500  # about 5,600 events: a round takes about a second
ROUNDS = 5


def workload() -> tuple[list[tuple[str, str]], int]:
    """The bench's seeded workload as consumed records, and the event time that fires it all."""
    started = NOW_MS - VERSIONS * 200 - 300_000
    lines = generate(
        seed=5, versions=VERSIONS, start_ts=started, extras=False, malformed=False, mix=BENCH_MIX
    )
    return step_records(lines), max(line["value"]["ts"] for line in lines)


def state_bytes(engine: Any) -> float:
    """The stored state's bytes per version held (bytes as stored; text as UTF-8)."""
    values = list(engine.states.values())
    sizes = [len(value) if isinstance(value, bytes) else len(value.encode()) for value in values]
    return sum(sizes) / max(len(sizes), 1)


def test_step_per_event(benchmark: Any) -> None:
    records, until = workload()
    admit_s: list[float] = []
    engines: list[Any] = []

    def admitted() -> tuple[tuple[Any, ...], dict[str, Any]]:
        engine = step_engine(now_ms=NOW_MS)
        started = time.process_time()
        for topic, raw in records:
            engine.admit(topic, raw, topic, 0)
        admit_s.append(time.process_time() - started)
        engines.append(engine)
        return (engine,), {}

    def apply(engine: Any) -> int:
        return sum(1 for _ in engine.drain(until))

    benchmark.group = "moderation step, every event of the bench workload"
    outputs = benchmark.pedantic(
        apply, setup=admitted, rounds=ROUNDS, iterations=1, warmup_rounds=1
    )
    events = len(records)
    info = benchmark.extra_info
    info["events"] = events
    info["outputs_per_event"] = round(outputs / events, 2)
    info["admit_us_per_event"] = round(statistics.median(admit_s[-ROUNDS:]) / events * 1e6, 1)
    info["state_bytes_per_version"] = round(state_bytes(engines[-1]))
    if benchmark.stats is not None:  # None under --benchmark-disable
        stats = benchmark.stats.stats
        info["min_apply_us_per_event"] = round(stats.min / events * 1e6, 1)
        info["apply_us_per_event"] = round(stats.median / events * 1e6, 1)
        info["sum_us_per_event"] = round(info["admit_us_per_event"] + info["apply_us_per_event"], 1)
        print(f"\nstep: {info}")
    assert outputs > events
    assert info["state_bytes_per_version"] > 0


def test_fire_per_event(benchmark: Any) -> None:
    records, until = workload()
    config = step_engine(now_ms=NOW_MS).config
    rows = keyed_rows(config, records)
    drivers: list[Driver] = []

    def fresh() -> tuple[tuple[Any, ...], dict[str, Any]]:
        drivers.append(Driver(config))
        return (drivers[-1],), {}

    def run(driver: Driver) -> int:
        driver.run(rows, until, FIRE_STEP_MS)
        return driver.outputs

    benchmark.group = "moderation step as the job runs it (BatchedModerate.fire)"
    outputs = benchmark.pedantic(run, setup=fresh, rounds=ROUNDS, iterations=1, warmup_rounds=1)
    events = len(records)
    cpu = sorted(driver.cpu_s for driver in drivers[-ROUNDS:])
    info = benchmark.extra_info
    info["events"] = events
    info["calls"] = drivers[-1].calls
    info["outputs_per_event"] = round(outputs / events, 2)
    info["fire_us_per_event"] = round(statistics.median(cpu) / events * 1e6, 1)
    info["min_fire_us_per_event"] = round(cpu[0] / events * 1e6, 1)
    print(f"\nfire: {info}")
    assert outputs > events
    assert len(drivers[-1].values) == VERSIONS
