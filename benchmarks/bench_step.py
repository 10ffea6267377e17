"""The moderation step per event: the job's per-version code (`Moderate.apply`: record parsing,
`operators.moderation.step` and `on_timer`, policy evaluation, state as JSON, outputs encoded)
on the `modstream bench` workload, in process, no Kafka and no Flink (benchmarks/peer.py's
Engine, as `bench_compare.step_cost`). Admission (decode, validate, signatures) is done before
each round and not timed.

Run with `make bench-step` (pytest-benchmark): each round applies every event of the workload
once; µs per event are in `extra_info`, printed. Goal (issue 14): at most 40 µs per event on
the 2-core dev machine.
"""

from __future__ import annotations

from typing import Any

from benchmarks.bench_compare import step_engine, step_records
from modstream.workload import BENCH_MIX, generate

VERSIONS = 1500  # about 4,900 events: a round takes about a second
# A fixed processing clock and workload start, so every round decides the same way.
NOW_MS = 1_760_000_000_000


def workload() -> tuple[list[tuple[str, str]], int]:
    """The bench's seeded workload as consumed records, and the event time that fires it all."""
    started = NOW_MS - VERSIONS * 200 - 300_000
    lines = generate(
        seed=5, versions=VERSIONS, start_ts=started, extras=False, malformed=False, mix=BENCH_MIX
    )
    return step_records(lines), max(line["value"]["ts"] for line in lines)


def test_step_per_event(benchmark: Any) -> None:
    records, until = workload()

    def admitted() -> tuple[tuple[Any, ...], dict[str, Any]]:
        engine = step_engine(now_ms=NOW_MS)
        for topic, raw in records:
            engine.admit(topic, raw, topic, 0)
        return (engine,), {}

    def apply(engine: Any) -> int:
        return sum(1 for _ in engine.drain(until))

    benchmark.group = "moderation step, every event of the bench workload"
    outputs = benchmark.pedantic(apply, setup=admitted, rounds=5, iterations=1)
    benchmark.extra_info["events"] = len(records)
    benchmark.extra_info["outputs_per_event"] = round(outputs / len(records), 2)
    if benchmark.stats is not None:  # None under --benchmark-disable
        stats = benchmark.stats.stats
        benchmark.extra_info["min_us_per_event"] = round(stats.min / len(records) * 1e6, 1)
        benchmark.extra_info["median_us_per_event"] = round(stats.median / len(records) * 1e6, 1)
        print(f"\nstep: {benchmark.extra_info}")
    assert outputs > len(records)
