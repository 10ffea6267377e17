"""What the moderation job's version operator waits for while it is off its CPU: two `perf`
recordings of the same seconds of `modstream bench`'s backlog, joined. Run beside the bench,
started first:

    python -m modstream.bench.off_cpu --out .run/off-cpu &
    modstream bench --steady --json --variants modstream --latency-s 0

It waits for the job's JVM and until it is busy (modstream/bench/perf_job.py), finds the version
operator's thread, and records `--seconds` twice at once:
- `perf record -e sched:sched_switch -a`: each time the thread left its CPU and came back, and
  whether it left runnable (preempted: waiting for a core) or asleep;
- `perf record -e sched:sched_switch --call-graph dwarf -t TID`: the stack it left from, which
  names the wait (`REASONS`: the interpreter lock, a Java park such as the task's mailbox
  waiting for input, RocksDB).

The two recordings stamp the same switch a few tens of µs apart, so a stack is joined to the
nearest switch within `MATCH_S`. It prints one JSON line: the window, the thread's time on a
CPU, and per reason the seconds, the count and the share of the window (docs/BENCHMARKS.md,
"What the version operator waits for"). Recording costs the job some CPU, so only the waits'
sizes against each other are read from it.
"""

from __future__ import annotations

import bisect
import json
import re
import subprocess
import time
from pathlib import Path
from typing import Any

from modstream.bench.measure import thread_ticks
from modstream.bench.perf_job import VERSION_THREAD, run_recorder, wait_busy, wait_for_jvm

# A wait's reason from the stack the thread left its CPU from, the first that matches.
REASONS = (
    ("interpreter lock", r"\btake_gil\b|PyEval_AcquireThread|PyEval_RestoreThread"),
    ("JVM safepoint", r"SafepointSynchronize|SafepointMechanism"),
    ("RocksDB", r"(?i)rocksdb"),
    ("Java park (the mailbox waiting for input, or a lock)", r"Unsafe_Park|Parker::park"),
    ("Java monitor", r"ObjectMonitor|JVM_MonitorWait"),
)
PREEMPTED = "preempted: runnable, waiting for a core"
MATCH_S = 0.0002
_SWITCH = re.compile(
    r"^\s*\d+\s+([\d.]+):\s+sched:sched_switch:.*prev_pid=(\d+) .*prev_state=(\S+) ==> .*"
    r"next_pid=(\d+)"
)
_STAMP = re.compile(r"(\d+\.\d+):")


def switches(text: str, tid: int) -> tuple[dict[float, tuple[float, str]], float, float]:
    """From `perf script -F tid,time,event,trace` of system-wide switches: each time `tid` left
    its CPU -> (seconds until it ran again, its state then), its seconds on a CPU, and the
    recording's span in seconds."""
    away: dict[float, tuple[float, str]] = {}
    left: tuple[float, str] | None = None
    came: float | None = None
    on_cpu, first, last = 0.0, None, 0.0
    for line in text.splitlines():
        match = _SWITCH.match(line)
        if match is None:
            continue
        at, prev, state, nxt = float(match[1]), int(match[2]), match[3], int(match[4])
        first = at if first is None else first
        last = at
        if prev == tid:
            left = (at, state)
            on_cpu += at - came if came is not None else 0.0
        if nxt == tid:
            came = at
            if left is not None:
                away[left[0]] = (at - left[0], left[1])
                left = None
    return away, on_cpu, last - (first or last)


def stacks(text: str) -> list[tuple[float, str]]:
    """From `perf script -F comm,tid,time,ip,sym,dso`: each switch's time and its stack's text."""
    found = []
    for block in text.split("\n\n"):
        stamp = _STAMP.search(block.split("\n", 1)[0])
        if stamp is not None:
            found.append((float(stamp[1]), block))
    return found


def reason(state: str, stack: str) -> str:
    """Why the thread was off its CPU: preempted (left runnable), else the stack's `REASONS`."""
    if state.startswith("R"):
        return PREEMPTED
    return next((name for name, pattern in REASONS if re.search(pattern, stack)), "other")


def waits(away: dict[float, tuple[float, str]], stacked: list[tuple[float, str]]) -> dict[str, Any]:
    """Seconds and counts per reason, each stack joined to the nearest switch within MATCH_S;
    the stacks that matched none counted apart."""
    times = sorted(away)
    spent: dict[str, list[float]] = {}
    unmatched = 0
    for at, stack in stacked:
        index = bisect.bisect_left(times, at)
        near = [times[i] for i in (index - 1, index) if 0 <= i < len(times)]
        best = min(near, key=lambda t: abs(t - at), default=None)
        if best is None or abs(best - at) > MATCH_S:
            unmatched += 1
            continue
        seconds, state = away[best]
        entry = spent.setdefault(reason(state, stack), [0.0, 0])
        entry[0] += seconds
        entry[1] += 1
    return {"by_reason": spent, "unmatched": unmatched}


def version_thread(pid: int) -> int:
    """The version operator's task thread of `pid`, once it exists."""
    while True:
        for tid, (name, _) in thread_ticks(pid).items():
            if name.startswith(VERSION_THREAD):
                return tid
        time.sleep(1)


def record(out: Path, seconds: int, busy_s: int) -> dict[str, Any]:
    """Wait for the job, record, join: the JSON summary (also written to out/summary.json)."""
    out.mkdir(parents=True, exist_ok=True)
    pid = wait_for_jvm(time.time() - 1)
    tid = version_thread(pid)
    wait_busy(pid, busy_s)
    every, own = out / "switches.data", out / "stacks.data"
    both = [
        subprocess.Popen(["perf", "record", "-e", "sched:sched_switch", "-a", "-o", str(every),
                          "--", "sleep", str(seconds)], stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL),
        subprocess.Popen(["perf", "record", "-e", "sched:sched_switch", "--call-graph",
                          "dwarf,32768", "-t", str(tid), "-o", str(own), "--", "sleep",
                          str(seconds)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL),
    ]  # fmt: skip
    for process in both:
        process.wait()
    away, on_cpu, span = switches(_script(every, "tid,time,event,trace"), tid)
    found = waits(away, stacks(_script(own, "comm,tid,time,ip,sym,dso")))
    summary = {
        "pid": pid,
        "tid": tid,
        "window_s": round(span, 2),
        "on_cpu_share": round(on_cpu / span, 3) if span else None,
        "waits": {
            name: {"s": round(s, 2), "count": n, "share": round(s / span, 3) if span else None}
            for name, (s, n) in sorted(found["by_reason"].items(), key=lambda item: -item[1][0])
        },
        "unmatched_stacks": found["unmatched"],
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=1))
    return summary


def _script(data: Path, fields: str) -> str:
    """`perf script` of a recording, with these fields."""
    command = ["perf", "script", "-i", str(data), "-F", fields]
    return subprocess.run(command, capture_output=True, text=True, check=True).stdout


def main(argv: list[str] | None = None) -> int:
    return run_recorder(argv, "modstream.bench.off_cpu", __doc__, Path(".run/off-cpu"), 10, record)


if __name__ == "__main__":
    raise SystemExit(main())
