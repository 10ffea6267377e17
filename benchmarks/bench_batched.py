"""`modstream bench`'s variant `modstream-batched`: the moderation job with its keyed operator in
Java (`--engine batched`, BatchedVersions.java, issue 26 point 2), and what it reports: Python
calls, versions batched and records in, read from the operator's log line at each checkpoint (a
cancelled job never closes its operators), and per event beside the PyFlink engine's run."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from modstream.config import Settings

if TYPE_CHECKING:
    from benchmarks.bench_compare import Result

BATCHED = "modstream-batched"
BATCHED_COUNTS = re.compile(
    r"BatchedVersions (\d+): python_calls (\d+) versions_batched (\d+) records_in (\d+)"
    r" python_fire_ms (\d+)"
)
COUNTS = ("python_calls", "versions_batched", "batched_records_in", "python_fire_ms")


def engine_args(variant: str) -> list[str]:
    """The moderation job's extra options for `variant`."""
    return ["--engine", "batched"] if variant == BATCHED else []


def batched_calls(variant: str, pid: int) -> dict[str, int]:
    """BatchedVersions' counts in the log of the job process `pid`: each subtask's last line,
    summed."""
    logs = Settings.from_env().run_dir / "flink" / "logs"
    if variant != BATCHED:
        return {}
    last: dict[str, tuple[int, ...]] = {}
    text = "".join(log.read_text(errors="replace") for log in logs.glob(f"flink-*-{pid}-*.log"))
    for match in BATCHED_COUNTS.finditer(text):
        last[match.group(1)] = tuple(int(group) for group in match.groups()[1:])
    return {name: sum(counts[i] for counts in last.values()) for i, name in enumerate(COUNTS)}


def batched_summary(results: dict[str, Result]) -> dict[str, Any]:
    """The batched engine's events/s beside the PyFlink engine's, and its Python calls per
    record in (keyed and broadcast, over the whole run: backlog and latency phases)."""
    batched = results.get(BATCHED)
    if batched is None:
        return {}
    pyflink = results.get("modstream")
    calls = batched.checkpoints.get("python_calls")
    records = batched.checkpoints.get("batched_records_in")
    return {
        "modstream_eps": pyflink.events_per_s if pyflink else None,
        "modstream_batched_eps": batched.events_per_s,
        "batched_vs_pyflink": (
            round(batched.events_per_s / pyflink.events_per_s, 2) if pyflink else None
        ),
        # Per record the operator took in (the backlog and the latency phases' records).
        "python_calls_per_event": round(calls / records, 4) if calls and records else None,
    }
