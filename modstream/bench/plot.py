"""`modstream bench --plot`: steady throughput, CPU per event and latency at the equal rate per
variant as a PNG (matplotlib), from modstream/bench/compare.py's results."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from modstream.bench.variants import CHECKPOINT_INTERVAL_MS

if TYPE_CHECKING:
    from modstream.bench.measure import Result


def write_plot(results: dict[str, Result], rate: float | None, path: Path) -> None:
    """A PNG: steady events/s, CPU µs per event (the JIT compiler threads' and the broker's apart)
    and latency p50/p99."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(results)
    fig, (throughput, cpu, delay) = plt.subplots(1, 3, figsize=(16, 4.6))
    steady = [results[n].steady_events_per_s for n in names]
    throughput.bar(names, steady, color="#4c72b0")
    throughput.set_ylabel("events/s after warm-up (higher is better)")
    throughput.set_title("Throughput, steady backlog")
    for index, value in enumerate(steady):
        throughput.text(index, value, f"{value:,.0f}", ha="center", va="bottom", fontsize=8)
    own = [results[n].steady_cpu_us_per_event for n in names]
    jit = [results[n].steady_jit_cpu_us_per_event for n in names]
    broker = [results[n].broker_cpu_us_per_event or 0 for n in names]
    cpu.bar(names, own, color="#55a868", label="the variant's processes")
    cpu.bar(names, jit, bottom=own, color="#dd8452", label="their JIT compiler threads")
    above = [mine + compiling for mine, compiling in zip(own, jit, strict=True)]
    cpu.bar(names, broker, bottom=above, color="#c0c0c0", label="the broker")
    cpu.set_ylabel("CPU µs per event (lower is better)")
    cpu.set_title("CPU per event, steady backlog")
    cpu.legend(fontsize=8)
    timed = [name for name in names if results[name].latency.get("p99_ms") is not None]
    width = 0.38
    for offset, quantile in enumerate(("p50", "p99")):
        values = [(results[n].latency.get(f"{quantile}_ms") or 0) / 1000 for n in timed]
        positions = [i + (offset - 0.5) * width for i in range(len(timed))]
        delay.bar(positions, values, width, label=quantile)
    delay.axhline(CHECKPOINT_INTERVAL_MS / 1000 + 1, color="grey", linestyle="--", linewidth=1)
    delay.set_xticks(range(len(timed)), timed)
    delay.set_ylabel("seconds from event ts to committed output")
    delay.set_title(
        f"Latency, every variant at {rate} versions/s\n(dashed: checkpoint interval + 1 s)"
    )
    delay.legend(fontsize=8)
    for axis in (throughput, cpu, delay):
        axis.tick_params(axis="x", labelrotation=25, labelsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_task_plot(result: Result, path: Path) -> None:
    """A PNG of one Flink variant's tasks in the steady window (modstream/bench/tasks.py): per
    task, the shares of wall time its thread was on a CPU, busy off it (waiting inside its work:
    for a lock, a read or a core), back-pressured and idle."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    tasks = result.tasks or {}
    names = [" ".join(part for part in name.split("_") if part)[:40] for name in tasks]
    parts = task_bars(list(tasks.values()))
    fig, axis = plt.subplots(figsize=(11, 0.45 * len(names) + 2.0))
    left = [0.0] * len(names)
    for label, values, color in parts:
        axis.barh(names, values, left=left, color=color, label=label)
        left = [a + b for a, b in zip(left, values, strict=True)]
    axis.invert_yaxis()
    axis.set_xlim(0, 1)
    axis.set_xlabel("share of each task's time in the steady window")
    busy = f"{result.machine_busy:.0%}" if result.machine_busy is not None else "?"
    axis.set_title(
        f"{result.variant}: where each task's time went "
        f"({result.steady_events_per_s:,.0f} events/s; the machine {busy} busy)"
    )
    axis.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=4)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def task_bars(shares: list[dict[str, Any]]) -> list[tuple[str, list[float], str]]:
    """The task plot's segments (label, one value per task, colour), each at least 0: a
    thread's CPU read a little apart from Flink's busy time may exceed it, and then counts as
    busy time on a CPU only."""
    on_cpu = [max(min(t["cpu"], t["busy"]), 0.0) for t in shares]
    return [
        ("busy, its thread on a CPU", on_cpu, "#55a868"),
        ("busy, off a CPU (waiting)", [t["busy"] - c for t, c in zip(shares, on_cpu, strict=True)],
         "#c44e52"),
        ("back-pressured", [t["backpressured"] for t in shares], "#dd8452"),
        ("idle (no input)", [t["idle"] for t in shares], "#c0c0c0"),
    ]  # fmt: skip
