"""Where a Flink variant's tasks spend their time in `modstream bench`'s steady window: each
task's share of wall time busy, back-pressured and idle (Flink's own accumulated task times,
read from the job's Prometheus page), and beside it the CPU its thread used (/proc).

Busy is time a task was doing work, as Flink counts it, not time on a CPU. A task whose thread
was on a CPU for much less of the window than it was busy spent the rest waiting inside its
work: for a lock (the TaskManager's one Python interpreter lock among them), a read, or a core
(docs/BENCHMARKS.md, "What the version operator waits for", tells them apart with `perf`).
Back-pressured is time a task waited for room downstream; idle, time it waited for input.

Sampled every `every_s` by `TaskSampler` during the backlog; `task_shares` takes the samples from
the steady window's start to the last. The arithmetic needs no JVM (tests/benchmarks/
test_tasks.py).
"""

from __future__ import annotations

import http.client
import os
import re
import threading
import time
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from modstream.bench.measure import PROC, SAMPLE, thread_ticks

# Flink's per-task counters of wall time in ms (TaskIOMetricGroup), each the sum since the task
# started: busy (processing, or blocked inside processing), back-pressured (no room
# downstream), idle (no input).
TIMES = {
    "accumulateBusyTimeMs": "busy",
    "accumulateBackPressuredTimeMs": "backpressured",
    "accumulateIdleTimeMs": "idle",
}
TASK_NAME = re.compile(r'task_name="([^"]*)"')
# One sample: (ms, {task: {kind: ms, "subtasks": n}}, {thread name: CPU s}, the machine's (busy,
# all) CPU ticks or None where /proc/stat could not be read).
Sample = tuple[int, dict[str, dict[str, float]], dict[str, float], tuple[int, int] | None]
# What Flink adds to a task thread's name, `name (1/2)#0`, as far as /proc's 15 bytes keep it.
SUBTASK_SUFFIX = re.compile(r"\s*\(\d*(?:/\d*)?\)?(?:#\d*)?$")


def task_times(text: str) -> dict[str, dict[str, float]]:
    """Each task's accumulated busy, back-pressured and idle ms on a Prometheus page, by its
    `task_name` label (subtasks summed, and counted as `subtasks`). Flink counts busy as the time
    since the task started less its idle and back-pressured time."""
    found: dict[str, dict[str, float]] = {}
    for line in text.splitlines():
        match = SAMPLE.match(line)
        if match is None:
            continue
        name = match.group(1)
        kind = next((k for suffix, k in TIMES.items() if name.endswith("task_" + suffix)), None)
        task = TASK_NAME.search(match.group(2) or "")
        if kind is None or task is None:
            continue
        times = found.setdefault(task.group(1), {})
        times[kind] = times.get(kind, 0.0) + float(match.group(3))
        if kind == "busy":
            times["subtasks"] = times.get("subtasks", 0.0) + 1
    return found


def thread_cpu(pid: int, proc: Path = PROC, ticks: int | None = None) -> dict[str, float]:
    """CPU seconds (user + system) of each thread of `pid`, summed by thread name (`comm`: the
    first 15 bytes of a Flink task thread's name); none for a process gone."""
    ticks = ticks or os.sysconf("SC_CLK_TCK")
    try:
        threads = thread_ticks(pid, proc)
    except OSError:
        return {}
    found: dict[str, float] = {}
    for name, spent in threads.values():
        found[name] = found.get(name, 0.0) + spent / ticks
    return found


def machine_ticks(proc: Path = PROC) -> tuple[int, int] | None:
    """The machine's CPU ticks since boot, all cores: (busy, all); idle and I/O wait are not
    busy (/proc/stat's first line; the guests' time is in user already). None if unreadable."""
    try:
        first = (proc / "stat").read_text().split("\n", 1)[0]
        fields = [int(value) for value in first.split()[1:]]
    except (OSError, ValueError):
        return None
    total = sum(fields[:8])  # user nice system idle iowait irq softirq steal (guests are in user)
    return (total - sum(fields[3:5]), total)


def machine_busy(samples: Sequence[Sample], since_ms: int) -> float | None:
    """The machine's busy share of all its cores over the same window as `task_shares`: with
    it, a thread off its CPU while the machine had cores free was blocked, not queued."""
    window = _window(samples, since_ms)
    if window is None or window[0][3] is None or window[1][3] is None:
        return None
    (busy_0, all_0), (busy_1, all_1) = window[0][3], window[1][3]
    return round((busy_1 - busy_0) / (all_1 - all_0), 3) if all_1 > all_0 else None


def _window(samples: Sequence[Sample], since_ms: int) -> tuple[Sample, Sample] | None:
    """The first sample at or after `since_ms` (the one before the last when that is none or the
    last itself) and the last; None with fewer than two samples or no time between them."""
    start = next((s for s in samples if s[0] >= since_ms), None)
    if start is None or start is samples[-1]:
        start = samples[-2] if len(samples) >= 2 else None
    if start is None or samples[-1][0] <= start[0]:
        return None
    return start, samples[-1]


def _letters(name: str) -> str:
    return re.sub(r"[^a-z0-9]", "", name.lower())


def threads_of(task: str, threads: Mapping[str, float]) -> float:
    """The CPU seconds of the threads whose (cut) name starts the task's name, compared on
    letters and digits alone, without the subtask Flink appends (`report_combine (1/1)#0`):
    Prometheus writes `moderate (batched) -> Filter` as `moderate__batched______Filter`, /proc
    as `moderate (batch`."""
    wanted = _letters(task)
    total = 0.0
    for name, cpu in threads.items():
        letters = _letters(SUBTASK_SUFFIX.sub("", name))
        if letters and wanted.startswith(letters):
            total += cpu
    return total


def task_shares(samples: Sequence[Sample], since_ms: int) -> dict[str, dict[str, float]]:
    """Per task, from the first sample at or after `since_ms` to the last (`_window`), as a
    share of the task's own time in that window (its busy, back-pressured and idle time added
    up: they add to 1; several subtasks are averaged): busy, back-pressured and idle; the share
    of a CPU its threads used per subtask; and that CPU over its busy time (`on_cpu_of_busy`,
    None when it was never busy). A task missing from either end (restarted) is left out. Empty
    with fewer than two samples over the window."""
    window = _window(samples, since_ms)
    if window is None:
        return {}
    start, end = window
    wall_ms = end[0] - start[0]
    shares: dict[str, dict[str, float]] = {}
    for task, times in sorted(end[1].items()):
        before = start[1].get(task)
        if before is None:
            continue
        spent = {kind: times.get(kind, 0.0) - before.get(kind, 0.0) for kind in TIMES.values()}
        elapsed = sum(spent.values())
        if elapsed <= 0 or min(spent.values()) < 0:
            continue
        subtasks = max(times.get("subtasks", 1.0), 1.0)
        cpu_ms = (threads_of(task, end[2]) - threads_of(task, start[2])) * 1000
        figures: dict[str, Any] = {kind: round(ms / elapsed, 3) for kind, ms in spent.items()}
        figures["cpu"] = round(cpu_ms / (wall_ms * subtasks), 3)
        figures["on_cpu_of_busy"] = round(cpu_ms / spent["busy"], 3) if spent["busy"] > 0 else None
        shares[task] = figures
    return shares


class TaskSampler(threading.Thread):
    """A Flink variant's task times (its Prometheus page on `port`) and its JVM's threads' CPU,
    every `every_s`, stamped in ms."""

    def __init__(
        self,
        port: int,
        pids: Callable[[], Sequence[int]],
        every_s: float = 2.0,
        clock: Callable[[], int] | None = None,
    ) -> None:
        super().__init__(daemon=True)
        self.port = port
        self.pids = pids
        self.every_s = every_s
        self.clock = clock or (lambda: int(time.time() * 1000))
        self.samples: list[Sample] = []
        self.stop = threading.Event()

    def sample(self) -> None:
        """One sample, stamped when it starts: the CPU read just after the page, the page as of
        its own read (a slow page shifts Flink's totals, not the stamp)."""
        at = self.clock()
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/metrics", timeout=5) as page:
                times = task_times(page.read().decode())
        except (OSError, http.client.HTTPException, ValueError):
            return  # the job busy or gone: the next sample will do
        threads: dict[str, float] = {}
        for pid in self.pids():
            for name, cpu in thread_cpu(pid).items():
                threads[name] = threads.get(name, 0.0) + cpu
        if times:
            self.samples.append((at, times, threads, machine_ticks()))

    def run(self) -> None:
        while not self.stop.wait(self.every_s):
            self.sample()

    def last(self) -> list[Sample]:
        """Stop, take the last sample; the samples."""
        self.stop.set()
        if self.is_alive():
            self.join()
        self.sample()
        return self.samples
