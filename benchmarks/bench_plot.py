"""`modstream bench --plot`: throughput and latency per variant as a PNG (matplotlib), from
benchmarks/bench_compare.py's results."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from benchmarks.bench_compare import CHECKPOINT_INTERVAL_MS, LOADS

if TYPE_CHECKING:
    from benchmarks.bench_compare import Result


def write_plot(results: dict[str, Result], path: Path) -> None:
    """A PNG: versions/s per variant, and latency p50/p99 at each load (matplotlib)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(results)
    fig, (rate, delay) = plt.subplots(1, 2, figsize=(11, 4.2))
    rate.bar(names, [results[n].versions_per_s for n in names], color="#4c72b0")
    rate.set_ylabel("versions/s (backlog, higher is better)")
    rate.set_title("Throughput")
    for index, name in enumerate(names):
        rate.text(index, results[name].versions_per_s, f"{results[name].versions_per_s:,.0f}",
                  ha="center", va="bottom")  # fmt: skip
    width = 0.2
    loads = [f"{fraction:.0%}" for fraction in LOADS]
    timed = [name for name in names if results[name].latency]
    for offset, (load, quantile) in enumerate((lo, q) for lo in loads for q in ("p50", "p99")):
        values = [(results[n].latency.get(load) or {}).get(f"{quantile}_ms") or 0 for n in timed]
        positions = [i + (offset - 1.5) * width for i in range(len(timed))]
        delay.bar(positions, [v / 1000 for v in values], width, label=f"{quantile} at {load} load")
    delay.axhline(CHECKPOINT_INTERVAL_MS / 1000 + 1, color="grey", linestyle="--", linewidth=1)
    delay.set_xticks(range(len(timed)), timed)
    delay.set_ylabel("seconds from event ts to committed action")
    delay.set_title("Latency (dashed: checkpoint interval + 1 s)")
    delay.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
