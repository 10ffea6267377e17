"""Where the moderation job's CPU goes, thread by thread and symbol by symbol: `perf` on the
job's JVM (its Java through the JIT's symbol map, its embedded Python, RocksDB, the kernel) while
`modstream bench` runs it. Run beside the bench, started first:

    python -m modstream.bench.perf_job --out .run/perf &
    modstream bench --steady --json --variants modstream --rate 600 --latency-s 20

It waits for the next JVM whose command line names Flink, then until that JVM has been busy
(over `BUSY_CORES` of a core) for `--busy-s` seconds, which in the bench is the backlog's steady
part; then it records `--seconds` of samples (`perf record -F 499 -g -p PID`), has the JVM write
its JIT's symbol map (`jcmd PID Compiler.perfmap`, JDK 17), and reads each thread's CPU from
/proc before and after. It prints one JSON line: each thread's CPU seconds over the window, each
busy thread's share of the samples, and in the version operator's thread the shares of a few
named costs (`CATEGORIES`). `perf report -i OUT/perf.data` reads the samples further.

Sampling costs the job a little CPU (the bench's figures of a profiled run are not its figures
of record), and on a 2-core machine whose speed moves by ±30% within a minute two profiles
compare by shares of one thread, not by seconds (docs/BENCHMARKS.md, stop 51).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from modstream.bench.measure import cpu_seconds, thread_ticks

BUSY_CORES = 0.8
VERSION_THREAD = "moderate (batch"  # the version operator's task thread, as /proc cuts its name
# Named costs in a thread's samples: a symbol matching the pattern counts for the name.
CATEGORIES = {
    "python_collector": (
        r"visit_decref|visit_reachable|_traverse\b|gc_collect_main|move_unreachable"
    ),
    "msgpack_writer": r"MsgPack\$Writer",
    "held_input_snapshot": r"HeldInput\.snapshot",
    "libpython": r"^libpython",
    "compiled_python": r"__mypyc",
    "jit_java": r"^\[JIT\]",
    "rocksdb": r"^librocksdbjni",
}
_ROW = re.compile(r"^\s*([\d.]+)%\s+(.{15})\s+(\S.*?)\s+\[[.k]\]\s+(.*)$")


def thread_seconds(
    before: dict[int, tuple[str, int]], after: dict[int, tuple[str, int]], hz: int
) -> dict[str, float]:
    """CPU seconds per thread name between two `thread_ticks` (threads of one name summed)."""
    spent: dict[str, float] = {}
    for tid, (name, ticks) in after.items():
        start = before.get(tid, (name, 0))[1]
        spent[name] = spent.get(name, 0.0) + (ticks - start) / hz
    return dict(sorted(spent.items(), key=lambda item: -item[1]))


def shares(report: str, thread: str) -> dict[str, float]:
    """From `perf report --no-children --sort comm,dso,sym --stdio -g none`: each category's
    share of `thread`'s samples (percent), and the thread's own share of all samples."""
    total = 0.0
    named = dict.fromkeys(CATEGORIES, 0.0)
    for line in report.splitlines():
        row = _ROW.match(line)
        if row is None or row.group(2).rstrip() != thread:
            continue
        percent, dso, symbol = float(row.group(1)), row.group(3), row.group(4)
        total += percent
        for name, pattern in CATEGORIES.items():
            if re.search(pattern, symbol) or re.search(pattern, dso):
                named[name] += percent
    result = {name: round(100 * part / total, 1) if total else 0.0 for name, part in named.items()}
    return {"thread_share_of_samples": round(total, 1), **result}


def wait_for_jvm(since: float, poll_s: float = 1.0) -> int:
    """The pid of the first JVM naming Flink that started after `since` (epoch seconds)."""
    while True:
        found = subprocess.run(
            ["pgrep", "-n", "-f", "java.*flink"], capture_output=True, text=True, check=False
        ).stdout.split()
        if found and os.stat(f"/proc/{found[0]}").st_mtime >= since:
            return int(found[0])
        time.sleep(poll_s)


def wait_busy(pid: int, seconds: int) -> None:
    """Until `pid` has used over BUSY_CORES of a core in `seconds` one-second samples."""
    busy = 0
    last = cpu_seconds([pid])
    while busy < seconds:
        time.sleep(1)
        now = cpu_seconds([pid])
        busy = busy + 1 if now - last > BUSY_CORES else busy
        last = now


def profile(out: Path, seconds: int, busy_s: int) -> dict[str, Any]:
    """Wait for the job, then record it: the JSON summary (also written to out/summary.json)."""
    out.mkdir(parents=True, exist_ok=True)
    hz = os.sysconf("SC_CLK_TCK")
    pid = wait_for_jvm(time.time() - 1)
    wait_busy(pid, busy_s)
    before = thread_ticks(pid)
    data = out / "perf.data"
    subprocess.run(
        ["perf", "record", "-F", "499", "-g", "-p", str(pid), "-o", str(data), "--", "sleep",
         str(seconds)],
        capture_output=True, check=True,
    )  # fmt: skip
    after = thread_ticks(pid)
    subprocess.run(["jcmd", str(pid), "Compiler.perfmap"], capture_output=True, check=False)
    report = subprocess.run(
        ["perf", "report", "-i", str(data), "--no-children", "--sort", "comm,dso,sym",
         "--stdio", "-g", "none"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    (out / "report.txt").write_text(report)
    summary = {
        "pid": pid,
        "seconds": seconds,
        "thread_cpu_s": {  # threads of at least 0.05 s, the busiest first
            name: round(spent, 2)
            for name, spent in thread_seconds(before, after, hz).items()
            if spent >= 0.05
        },
        "version_thread": shares(report, VERSION_THREAD),
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=1))
    return summary


def run_recorder(
    argv: list[str] | None,
    module: str,
    doc: str | None,
    out: Path,
    seconds: int,
    record: Callable[[Path, int, int], dict[str, Any]],
) -> int:
    """The command line of a recorder started beside the bench (this module's `profile`,
    modstream/bench/off_cpu.py's `record`): where to write, how long to record, how long the
    job must have been busy first; its summary printed as one JSON line."""
    parser = argparse.ArgumentParser(prog=f"python -m {module}", description=doc)
    parser.add_argument("--out", type=Path, default=out)
    parser.add_argument("--seconds", type=int, default=seconds)
    parser.add_argument("--busy-s", type=int, default=20)
    args = parser.parse_args(argv)
    print(json.dumps(record(args.out, args.seconds, args.busy_s)))
    return 0


def main(argv: list[str] | None = None) -> int:
    return run_recorder(argv, "modstream.bench.perf_job", __doc__, Path(".run/perf"), 30, profile)


if __name__ == "__main__":
    raise SystemExit(main())
