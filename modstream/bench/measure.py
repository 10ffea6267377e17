"""`modstream bench`'s arithmetic, apart from Kafka and Flink so that it is unit-tested without
a JVM: CPU time from /proc, the steady window after start-up and JIT, latency percentiles,
Python calls from a Prometheus page, and the one JSON line `--json` prints last (issue 26)."""

from __future__ import annotations

import math
import os
import re
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

PROC = Path("/proc")
# The share of the backlog counted as a variant's warm-up: the steady rate is measured from
# when its group had committed this share of its input (or, without that, when this share of
# its outputs was visible) to its last output (start-up and JIT reported apart).
WARMUP_SHARE = 0.2
# HotSpot's JIT compiler threads ("C2 CompilerThread0", cut to 15 characters in /proc): their
# CPU in the steady window is reported apart (`steady_jit_cpu_us_per_event`). At 60 to 80 s
# into a run they still took about a sixth of the job's CPU (docs/BENCHMARKS.md).
JIT_THREAD = re.compile(r"^C\d CompilerThre")


@dataclass
class Result:
    """One variant's figures in a `modstream bench` run (modstream/bench/compare.py prints and
    plots them)."""

    variant: str
    versions: int
    events: int
    startup_s: float  # from its start to saying it runs (JVM, job graph, clients)
    processing_s: float  # from saying it runs to the closing marker's output committed
    events_per_s: float  # over processing_s: warm-up and JIT included
    warmup_s: float  # from saying it runs to WARMUP_SHARE of its outputs visible
    steady_events_per_s: float  # after warm-up to the closing marker's output
    startup_cpu_s: float
    cpu_us_per_event: float  # over processing_s, every process of the variant
    steady_cpu_us_per_event: float  # after warm-up, the JIT compiler threads' apart
    broker_cpu_us_per_event: float | None  # the broker's, over processing_s, apart
    peak_rss_mib: float
    outputs: int
    python_calls_per_event: float | None = None  # the job's `python_calls` counters / events
    # The same by operator (its `operator_name`): where the calls come from.
    python_calls_per_event_by_operator: dict[str, float] | None = None
    # At the equal rate (half the confluent-kafka peer's): p50, p95, p99 and max ms.
    latency: dict[str, Any] = field(default_factory=dict)
    # The Flink variants' completed checkpoints: count, duration p50 and max, last size.
    checkpoints: dict[str, int] = field(default_factory=dict)
    # The JIT compiler threads' CPU after warm-up (0 for a peer: CPython has none).
    steady_jit_cpu_us_per_event: float = 0.0
    # A Flink variant's tasks in the steady window: busy, back-pressured and idle shares of wall
    # time, their threads' CPU, and that CPU over busy time (modstream/bench/tasks.py).
    tasks: dict[str, dict[str, Any]] | None = None
    machine_busy: float | None = None  # the machine's busy share of its cores, same window


@dataclass(frozen=True)
class ProcessTimes:
    """One process's line of /proc/PID/stat, the fields the bench reads."""

    pid: int
    session: int
    cpu_ticks: int  # utime + stime + cutime + cstime: every thread, reaped children too


def parse_stat(text: str) -> ProcessTimes:
    """/proc/PID/stat: fields after the command name (which may hold spaces and parentheses)."""
    pid = int(text[: text.index(" ")])
    fields = text[text.rindex(")") + 2 :].split()
    # fields[0] is stat's field 3 (state): session is field 6, utime..cstime fields 14..17.
    return ProcessTimes(pid, int(fields[3]), sum(int(value) for value in fields[11:15]))


def cpu_seconds(pids: Iterable[int], proc: Path = PROC, ticks: int | None = None) -> float:
    """CPU seconds (user + system, all threads, reaped children) of the `pids` still alive."""
    ticks = ticks or os.sysconf("SC_CLK_TCK")
    total = 0
    for pid in pids:
        try:
            total += parse_stat((proc / str(pid) / "stat").read_text()).cpu_ticks
        except (OSError, ValueError, IndexError):
            continue  # gone since: its time is lost with it (none of the bench's are)
    return total / ticks


def jit_ticks(pids: Iterable[int], proc: Path = PROC) -> dict[tuple[int, int], int]:
    """CPU ticks (user + system) of each JIT compiler thread (`JIT_THREAD`) of the `pids`, by
    (pid, thread id)."""
    found: dict[tuple[int, int], int] = {}
    for pid in pids:
        try:
            tasks = list((proc / str(pid) / "task").iterdir())
        except OSError:
            continue
        for task in tasks:
            try:
                if not JIT_THREAD.match((task / "comm").read_text()):
                    continue
                fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue  # gone since
            found[(pid, int(task.name))] = int(fields[11]) + int(fields[12])
    return found


def thread_ticks(pid: int, proc: Path = PROC) -> dict[int, tuple[str, int]]:
    """Each thread of `pid`: (its name, its CPU ticks so far); threads gone meanwhile left out."""
    threads: dict[int, tuple[str, int]] = {}
    for task in (proc / str(pid) / "task").iterdir():
        try:
            stat = (task / "stat").read_text()
            name = (task / "comm").read_text().strip()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        threads[int(task.name)] = (name, int(fields[11]) + int(fields[12]))  # utime + stime
    return threads


def session_pids(session: int, proc: Path = PROC) -> list[int]:
    """The processes of `session`: a variant's Python process and the JVM it started."""
    found = []
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if parse_stat((entry / "stat").read_text()).session == session:
                found.append(int(entry.name))
        except (OSError, ValueError, IndexError):
            continue
    return found


def peak_rss_kib(pids: Iterable[int], proc: Path = PROC) -> int:
    """The sum of each process's peak resident memory (VmHWM)."""
    peak = 0
    for pid in pids:
        try:
            status = (proc / str(pid) / "status").read_text()
        except OSError:
            continue
        peak += sum(int(line.split()[1]) for line in status.splitlines() if line[:6] == "VmHWM:")
    return peak


class CpuSampler(threading.Thread):
    """The CPU seconds of a variant's processes every `every_s`, stamped in ms (`at(ms)` reads
    back the last sample at or before a time): `pids`, and with `session` every process of that
    session found at each sample too (a job's Python worker processes, modstream/jobs/worker.py,
    start after it says it runs). Beside them (`jit_samples`) the seconds their JIT
    compiler threads spent since the first sample. HotSpot starts and stops compiler threads as
    it needs them, so each thread's growth between two samples is added up: a thread that ends
    takes only its time after its last sample with it (counted as the process's, not JIT)."""

    def __init__(
        self,
        pids: Sequence[int],
        every_s: float = 0.5,
        clock: Callable[[], int] | None = None,
        proc: Path = PROC,
        session: int | None = None,
    ) -> None:
        super().__init__(daemon=True)
        self.given = list(pids)
        self.pids = list(pids)
        self.session = session
        self.every_s = every_s
        self.clock = clock or (lambda: int(time.time() * 1000))
        self.proc = proc
        self.samples: list[tuple[int, float]] = []
        self.stop = threading.Event()
        self.jit_samples: list[tuple[int, float]] = []
        self._jit_seen: dict[tuple[int, int], int] | None = None
        self._jit_ticks = 0
        self._ticks = os.sysconf("SC_CLK_TCK")

    def sample(self) -> float:
        if self.session is not None:  # those given, and the session's alive now
            given = set(self.given)
            self.pids = self.given + [
                pid for pid in session_pids(self.session, self.proc) if pid not in given
            ]
        cpu = cpu_seconds(self.pids, self.proc, self._ticks)
        threads = jit_ticks(self.pids, self.proc)
        if self._jit_seen is not None:  # the first sample is the baseline: start-up's JIT
            self._jit_ticks += sum(
                max(0, ticks - self._jit_seen.get(thread, 0)) for thread, ticks in threads.items()
            )
        self._jit_seen = threads
        at = self.clock()
        self.samples.append((at, cpu))
        self.jit_samples.append((at, self._jit_ticks / self._ticks))
        return cpu

    def run(self) -> None:
        while not self.stop.wait(self.every_s):
            self.sample()

    def at(self, when_ms: int) -> float:
        return cpu_at(self.samples, when_ms)


def cpu_at(samples: Sequence[tuple[int, float]], when_ms: int) -> float:
    """The last sample at or before `when_ms` (the first one if none is)."""
    before = [cpu for at, cpu in samples if at <= when_ms]
    return before[-1] if before else samples[0][1]


def steady_since(arrivals: Sequence[int], share: float = WARMUP_SHARE) -> int:
    """When `share` of the outputs (their arrival times, ms) had been seen."""
    ordered = sorted(arrivals)
    return ordered[max(0, math.ceil(share * len(ordered)) - 1)]


def percentile(values: Sequence[float], q: float) -> float:
    """The nearest-rank percentile (q in 0..1) of `values`, not interpolated."""
    if not values:
        raise ValueError("percentile of no values")
    ordered = sorted(values)
    return float(ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))])


def latency_summary(latencies_ms: Sequence[float]) -> dict[str, float | int | None]:
    """p50, p95, p99 and max of event-to-output latencies; None each when there are none."""
    if not latencies_ms:
        return {"actions": 0, "p50_ms": None, "p95_ms": None, "p99_ms": None, "max_ms": None}
    return {
        "actions": len(latencies_ms),
        "p50_ms": percentile(latencies_ms, 0.50),
        "p95_ms": percentile(latencies_ms, 0.95),
        "p99_ms": percentile(latencies_ms, 0.99),
        "max_ms": float(max(latencies_ms)),
    }


SAMPLE = re.compile(r"^([A-Za-z_:][A-Za-z0-9_:]*)(\{.*\})?\s+(\S+)")


def prometheus_total(text: str, suffix: str) -> float:
    """The sum of every sample whose metric name ends with `suffix` on a Prometheus page."""
    total = 0.0
    for line in text.splitlines():
        match = SAMPLE.match(line)
        if match and match.group(1).endswith(suffix):
            total += float(match.group(3))
    return total


OPERATOR_NAME = re.compile(r'operator_name="([^"]*)"')


def prometheus_by_operator(text: str, suffix: str) -> dict[str, float]:
    """`prometheus_total` per operator (the `operator_name` label; subtasks summed): where a
    job's Python calls come from."""
    totals: dict[str, float] = {}
    for line in text.splitlines():
        match = SAMPLE.match(line)
        if match and match.group(1).endswith(suffix):
            named = OPERATOR_NAME.search(match.group(2) or "")
            operator = named.group(1) if named else ""
            totals[operator] = totals.get(operator, 0.0) + float(match.group(3))
    return totals


def calls_between(
    ready: Mapping[str, float] | None, done: Mapping[str, float] | None
) -> dict[str, float] | None:
    """Python calls per operator between two readings (None: the second failed; a first that
    failed counts from zero)."""
    if done is None:
        return None
    return {name: count - (ready or {}).get(name, 0.0) for name, count in done.items()}


# `--json`'s keys for each variant (modstream/bench/variants.py names them).
REQUIRED_KEYS = (
    "modstream_eps", "java_floor_eps", "pyflink_floor_eps", "peer_ck_eps", "peer_ck_eos_eps",
    "peer_kp_eps", "code_us_per_event", "cpu_us_per_event_modstream", "cpu_us_per_event_peer_ck",
    "p99_ms_equal_load", "python_calls_per_event", "state_bytes_per_version",
)  # fmt: skip


def summary_line(
    results: Mapping[str, Mapping[str, Any]],
    keys: Mapping[str, str],
    step: Mapping[str, Any],
    equal_rate: float | None,
) -> dict[str, Any]:
    """The JSON line: per variant (`keys`: variant -> its key, e.g. "peer_ck") its steady
    events/s, CPU µs per event and latency at the equal rate; the code in process; the ratios
    issue 26 sets bars on. A variant not run reads None."""
    line: dict[str, Any] = {}
    for variant, key in keys.items():
        result = results.get(variant, {})
        line[f"{key}_eps"] = result.get("steady_events_per_s")
        line[f"cpu_us_per_event_{key}"] = result.get("steady_cpu_us_per_event")
        line[f"jit_cpu_us_per_event_{key}"] = result.get("steady_jit_cpu_us_per_event")
        line[f"p99_ms_equal_load_{key}"] = (result.get("latency") or {}).get("p99_ms")
    modstream = results.get("modstream", {})
    line["p99_ms_equal_load"] = line.get("p99_ms_equal_load_modstream")
    line["p50_ms_equal_load"] = (modstream.get("latency") or {}).get("p50_ms")
    line["equal_load_versions_per_s"] = equal_rate
    line["python_calls_per_event"] = modstream.get("python_calls_per_event")
    line["code_us_per_event"] = _sum(step.get("admit_us_per_event"), step.get("step_us_per_event"))
    line["state_bytes_per_version"] = step.get("state_bytes_per_version")
    # The batched engine (`--engine batched`, issue 26 point 2) beside the PyFlink one.
    batched = results.get("modstream-batched", {})
    line["python_calls_per_event_batched"] = batched.get("python_calls_per_event")
    line["batched_vs_modstream"] = _ratio(
        line.get("modstream_batched_eps"), line.get("modstream_eps")
    )
    line["modstream_vs_peer_ck"] = _ratio(line.get("modstream_eps"), line.get("peer_ck_eps"))
    line["modstream_vs_peer_ck_eos"] = _ratio(
        line.get("modstream_eps"), line.get("peer_ck_eos_eps")
    )
    line["modstream_vs_java_floor"] = _ratio(line.get("modstream_eps"), line.get("java_floor_eps"))
    line["cpu_modstream_vs_peer_ck"] = _ratio(
        line.get("cpu_us_per_event_modstream"), line.get("cpu_us_per_event_peer_ck")
    )
    return line


def _sum(*values: float | None) -> float | None:
    return None if any(value is None for value in values) else round(sum(values), 1)  # type: ignore[arg-type]


def _ratio(top: float | None, bottom: float | None) -> float | None:
    return round(top / bottom, 2) if top and bottom else None


def steady_start(
    committed: Sequence[tuple[int, int]], arrivals: Sequence[int], ready: int
) -> tuple[int, float]:
    """When the steady part starts and the share of the backlog left after it: from the group's
    committed input (ms, records) when there is progress to read, once WARMUP_SHARE of the last
    count was committed (the whole window when the count jumped past half the backlog at once);
    else from the outputs' arrivals."""
    final = max((count for _, count in committed), default=0)
    if final > 0:
        at, count = next((at, n) for at, n in committed if n >= WARMUP_SHARE * final)
        if 1 - count / final < (1 - WARMUP_SHARE) / 2:
            return ready, 1.0  # read in a few polls: too coarse to split, the whole window
        return at, 1 - count / final
    if arrivals:
        return steady_since(arrivals), 1 - WARMUP_SHARE
    return ready, 1.0


def backlog_figures(
    *,
    events: int,
    started: int,
    ready: int,
    done: int,
    arrivals: Sequence[int],
    committed: Sequence[tuple[int, int]],
    cpu_samples: Sequence[tuple[int, float]],
    broker_cpu: tuple[float, float] | None,
    python_calls: float | None,
    jit_samples: Sequence[tuple[int, float]] = (),
) -> dict[str, Any]:
    """A variant's backlog run in figures: start-up apart, the whole window, and the steady part
    after its warm-up (`steady_start`: the first checkpoints behind it); CPU from the samples
    (ms, CPU s) of its processes, the first taken when it said it runs. The steady CPU leaves
    out what its JIT compiler threads spent in that window (`jit_samples`, ms and seconds since
    the first sample), reported apart; the whole window's CPU includes it."""
    processing_s = max((done - ready) / 1000, 1e-3)
    steady_from, left = steady_start(committed, arrivals, ready)
    steady_s = max((done - steady_from) / 1000, 1e-3)
    steady_events = max(events * left, 1.0)
    cpu_ready, cpu_done = cpu_samples[0][1], cpu_samples[-1][1]
    cpu_steady = cpu_done - cpu_at(cpu_samples, steady_from)
    jit_steady = (jit_samples[-1][1] - cpu_at(jit_samples, steady_from)) if jit_samples else 0.0
    return {
        "startup_s": round((ready - started) / 1000, 2),
        "processing_s": round(processing_s, 2),
        "events_per_s": round(events / processing_s, 1),
        "warmup_s": round((steady_from - ready) / 1000, 2),
        "steady_events_per_s": round(steady_events / steady_s, 1),
        "startup_cpu_s": round(cpu_ready, 2),
        "cpu_us_per_event": round((cpu_done - cpu_ready) / events * 1e6, 1),
        "steady_cpu_us_per_event": round((cpu_steady - jit_steady) / steady_events * 1e6, 1),
        "steady_jit_cpu_us_per_event": round(jit_steady / steady_events * 1e6, 1),
        "broker_cpu_us_per_event": None
        if broker_cpu is None
        else round((broker_cpu[1] - broker_cpu[0]) / events * 1e6, 1),
        "python_calls_per_event": None if python_calls is None else round(python_calls / events, 4),
    }
