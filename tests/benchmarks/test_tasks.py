"""modstream/bench/tasks.py: Flink's task times read from a Prometheus page, threads' CPU from
/proc, and the shares of the steady window (the sampling itself needs a running job: `modstream
bench` runs it)."""

from __future__ import annotations

import os
from pathlib import Path

from modstream.bench import tasks

# A Prometheus page as the job's reporter writes it, cut: the moderation task with two subtasks,
# decode, a gauge of another kind with the same task, and a line of no task.
MODERATE, DECODE = "moderate__batched______Filter", "mini_batch____decode"


def _sample(metric: str, task: str, subtask: int, value: float) -> str:
    labels = f'job_name="m",task_name="{task}",subtask_index="{subtask}",'
    return f"flink_taskmanager_job_task_{metric}{{{labels}}} {value}"


PAGE = "\n".join(
    [
        "# TYPE flink_taskmanager_job_task_accumulateBusyTimeMs gauge",
        _sample("accumulateBusyTimeMs", MODERATE, 0, 6000.0),
        _sample("accumulateBusyTimeMs", MODERATE, 1, 2000.0),
        _sample("accumulateBackPressuredTimeMs", MODERATE, 0, 100.0),
        _sample("accumulateIdleTimeMs", MODERATE, 0, 1900.0),
        _sample("accumulateBusyTimeMs", DECODE, 0, 3000.0),
        _sample("busyTimeMsPerSecond", DECODE, 0, 500.0),
        "flink_jobmanager_numRunningJobs 1.0",
    ]
)


def test_task_times_are_summed_over_subtasks_by_kind() -> None:
    got = tasks.task_times(PAGE)
    assert got == {
        MODERATE: {"busy": 8000.0, "backpressured": 100.0, "idle": 1900.0, "subtasks": 2.0},
        DECODE: {"busy": 3000.0, "subtasks": 1.0},  # the per-second gauge is not a total
    }


# One line of a Java floor run's page, as the reporter wrote it (ids cut).
REAL = (
    'flink_taskmanager_job_task_accumulateBusyTimeMs{job_id="1e86",task_id="bc76",'
    'task_attempt_id="6d10_bc76_0_0",host="",task_name="Source:_inputs",task_attempt_num="0",'
    'job_name="java_floor",tm_id="13a6",subtask_index="0",} 547.0'
)


def test_a_line_as_the_reporter_writes_it_is_read() -> None:
    assert tasks.task_times(REAL) == {"Source:_inputs": {"busy": 547.0, "subtasks": 1.0}}


def test_a_tasks_threads_are_found_by_their_cut_name() -> None:
    threads = {
        "moderate (batch": 3.0,
        "mini-batch -> d": 1.0,
        "C2 CompilerThre": 9.0,
        "": 5.0,
        "report_combine ": 0.5,  # "report_combine (1/1)#0" cut to 15 bytes
        "sanctions (1/2)": 0.25,  # a short name keeps its subtask: left out before comparing
        "sanctions (2/2)": 0.25,
    }
    assert tasks.threads_of("moderate__batched______Filter", threads) == 3.0
    assert tasks.threads_of("mini_batch____decode", threads) == 1.0
    assert tasks.threads_of("report_combine", threads) == 0.5
    assert tasks.threads_of("sanctions", threads) == 0.5  # both subtasks' threads
    assert tasks.threads_of("report_gate____key", threads) == 0.0  # no thread of that name


def test_shares_are_of_the_steady_window_only() -> None:
    task = "moderate__batched______Filter"
    samples: list[tasks.Sample] = [
        (0, {task: {"busy": 0.0, "backpressured": 0.0, "idle": 0.0}}, {"moderate (batch": 0.0},
         (0, 0)),
        # The steady window starts here: what came before is left out.
        (10_000, {task: {"busy": 9000.0, "backpressured": 0.0, "idle": 1000.0}},
         {"moderate (batch": 9.0}, (1500, 2000)),
        (20_000, {task: {"busy": 16_000.0, "backpressured": 1000.0, "idle": 3000.0}},
         {"moderate (batch": 13.2}, (2700, 4000)),
    ]  # fmt: skip
    got = tasks.task_shares(samples, since_ms=10_000)[task]
    assert got["busy"] == 0.7  # 7,000 of 10,000 ms
    assert got["backpressured"] == 0.1
    assert got["idle"] == 0.2
    assert got["cpu"] == 0.42  # 4.2 CPU s in 10 s
    assert got["on_cpu_of_busy"] == 0.6  # 4.2 of 7.0 busy seconds on a CPU: 40% blocked
    assert tasks.machine_busy(samples, since_ms=10_000) == 0.6  # 1,200 of 2,000 ticks


def _times(busy: float, backpressured: float, idle: float) -> dict[str, float]:
    return {"busy": busy, "backpressured": backpressured, "idle": idle, "subtasks": 1.0}


def test_a_window_begun_after_the_last_sample_takes_the_last_interval() -> None:
    task = "decode"
    samples: list[tasks.Sample] = [
        (0, {task: _times(0, 0, 0)}, {}, (0, 0)),
        (2000, {task: _times(1000, 0, 1000)}, {}, (0, 0)),
    ]
    got = tasks.task_shares(samples, since_ms=5000)[task]
    assert got["busy"] == 0.5
    assert got["on_cpu_of_busy"] == 0.0  # busy, never on a CPU (no thread of its name)
    assert tasks.machine_busy(samples, since_ms=5000) is None  # no ticks between them


def test_a_window_begun_between_samples_starts_at_the_next() -> None:
    task = "decode"
    samples: list[tasks.Sample] = [
        (0, {task: _times(0, 0, 0)}, {}, (0, 0)),
        (2000, {task: _times(2000, 0, 0)}, {}, (0, 0)),  # all busy before the window
        (4000, {task: _times(2000, 0, 2000)}, {}, (0, 0)),  # all idle in it
    ]
    assert tasks.task_shares(samples, since_ms=1000)[task]["idle"] == 1.0


def test_shares_are_of_each_tasks_own_time_and_averaged_over_subtasks() -> None:
    task = "retro"
    two = {"busy": 2400.0, "backpressured": 0.0, "idle": 1600.0, "subtasks": 2.0}
    # The page read late: Flink's totals cover 4,000 ms of two subtasks' time, the stamps 1,800.
    samples: list[tasks.Sample] = [
        (0, {task: {**two, "busy": 0.0, "idle": 0.0}}, {"retro (1/2)#0": 0.0}, None),
        (1800, {task: two}, {"retro (1/2)#0": 0.9}, None),
    ]
    got = tasks.task_shares(samples, since_ms=0)[task]
    assert got["busy"] + got["backpressured"] + got["idle"] == 1.0
    assert got["busy"] == 0.6
    assert got["cpu"] == 0.25  # 0.9 CPU s over 1.8 s, per subtask
    assert tasks.machine_busy(samples, since_ms=0) is None  # /proc/stat unread


def test_a_task_missing_at_the_start_is_left_out() -> None:
    samples: list[tasks.Sample] = [
        (0, {"a": _times(0, 0, 0)}, {}, (0, 0)),
        (1000, {"a": _times(500, 0, 500), "restarted": _times(900, 0, 100)}, {}, (0, 0)),
    ]
    assert set(tasks.task_shares(samples, since_ms=0)) == {"a"}


def test_no_shares_without_two_samples_or_elapsed_time() -> None:
    assert tasks.task_shares([], since_ms=0) == {}
    assert tasks.task_shares([(0, {"t": _times(0, 0, 0)}, {}, (0, 0))], since_ms=0) == {}
    samples: list[tasks.Sample] = [
        (0, {"t": _times(0, 0, 0), "idle": _times(0, 0, 0)}, {}, (0, 0)),
        (1000, {"t": _times(0, 0, 0), "idle": _times(0, 0, 1000)}, {}, (0, 0)),
    ]
    got = tasks.task_shares(samples, since_ms=0)
    assert "t" not in got  # no time counted: nothing to share
    assert got["idle"]["on_cpu_of_busy"] is None  # never busy


def test_thread_cpu_sums_threads_by_name(tmp_path: Path) -> None:
    ticks = os.sysconf("SC_CLK_TCK")
    for tid, name, utime, stime in [(11, "moderate (batch", 50, 10), (12, "moderate (batch", 20, 0),
                                    (13, "C2 CompilerThre", 7, 0)]:  # fmt: skip
        thread = tmp_path / "42" / "task" / str(tid)
        thread.mkdir(parents=True)
        (thread / "comm").write_text(name + "\n")
        fields = ["S"] + ["0"] * 10 + [str(utime), str(stime)] + ["0"] * 30
        (thread / "stat").write_text(f"{tid} ({name}) " + " ".join(fields))
    got = tasks.thread_cpu(42, proc=tmp_path)
    assert got == {"moderate (batch": 80 / ticks, "C2 CompilerThre": 7 / ticks}
    assert tasks.thread_cpu(43, proc=tmp_path) == {}  # gone: nothing


def test_machine_ticks_leave_idle_and_io_wait_out(tmp_path: Path) -> None:
    lines = ["cpu  100 5 20 300 40 1 2 3 7 9", "cpu0 50 2 10 150 20 0 1 1 0 0"]
    (tmp_path / "stat").write_text("\n".join(lines) + "\n")
    # All but idle 300 and I/O wait 40; the guests' 7 and 9 are in user already.
    assert tasks.machine_ticks(tmp_path) == (131, 471)
    assert tasks.machine_ticks(tmp_path / "missing") is None


def test_the_task_plot_is_a_png_even_where_cpu_exceeds_busy(tmp_path: Path) -> None:
    from modstream.bench.measure import Result
    from modstream.bench.plot import task_bars, write_task_plot

    result = Result(
        "modstream", 10, 40, 1.0, 2.0, 20.0, 0.5, 20.0, 1.0, 100.0, 90.0, 5.0, 100.0, 40,
        tasks={
            MODERATE: {"busy": 0.7, "backpressured": 0.0, "idle": 0.3, "cpu": 0.5},
            # Sampled a little apart, a thread's CPU can read above its busy time: no bar
            # below zero.
            DECODE: {"busy": 0.1, "backpressured": 0.6, "idle": 0.3, "cpu": 0.12},
        },
        machine_busy=0.7,
    )  # fmt: skip
    path = tmp_path / "tasks.png"
    write_task_plot(result, path)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    bars = task_bars(list((result.tasks or {}).values()))
    assert all(value >= 0 for _, values, _ in bars for value in values)
    assert bars[0][1] == [0.5, 0.1] and bars[1][1] == [0.7 - 0.5, 0.0]
