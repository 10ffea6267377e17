"""modstream/bench/measure.py: the bench's arithmetic without Kafka or a JVM (issue 26 point 3):
CPU from /proc stat lines, the steady window, percentiles, Python calls from a Prometheus page
and the keys of the one JSON line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from modstream.bench import measure, moderation

# A real /proc/PID/stat shape: the command may hold spaces and a ')' (the parser reads from the
# last one); session 4242; utime 150 stime 50 cutime 30 cstime 20 ticks.
STAT = (
    "4243 (java (moderation) x) S 4242 4242 4242 0 -1 4194560 100 0 0 0 "
    "150 50 30 20 20 0 40 0 9 1000 200 18446744073709551615 0 0 0 0 0 0 0 0 0 0 0 0 17 1 0 0"
)


def fake_proc(tmp_path: Path, stats: dict[int, str], hwm_kib: int = 2048) -> Path:
    for pid, stat in stats.items():
        (tmp_path / str(pid)).mkdir()
        (tmp_path / str(pid) / "stat").write_text(stat)
        (tmp_path / str(pid) / "status").write_text(f"Name:\tx\nVmHWM:\t  {hwm_kib} kB\n")
    (tmp_path / "self").mkdir()
    return tmp_path


def test_parse_stat_reads_session_and_every_cpu_field() -> None:
    times = measure.parse_stat(STAT)
    assert (times.pid, times.session, times.cpu_ticks) == (4243, 4242, 250)


def test_cpu_seconds_sums_the_pids_alive(tmp_path: Path) -> None:
    other = STAT.replace("4243 (", "4250 (").replace(" 150 50 30 20 ", " 100 0 0 0 ")
    proc = fake_proc(tmp_path, {4243: STAT, 4250: other})
    assert measure.cpu_seconds([4243, 4250, 9999], proc=proc, ticks=100) == pytest.approx(3.5)


def test_session_pids_and_peak_memory(tmp_path: Path) -> None:
    stranger = STAT.replace("4243 (", "77 (").replace(" 4242 4242 4242 ", " 1 1 1 ")
    proc = fake_proc(tmp_path, {4243: STAT, 77: stranger})
    assert measure.session_pids(4242, proc=proc) == [4243]
    assert measure.peak_rss_kib([4243, 77], proc=proc) == 4096


@pytest.mark.parametrize(
    ("values", "q", "expected"),
    [
        (list(range(1, 101)), 0.50, 50.0),
        (list(range(1, 101)), 0.99, 99.0),
        (list(range(1, 101)), 1.00, 100.0),
        (list(reversed(range(1, 101))), 0.99, 99.0),
        ([7], 0.99, 7.0),
        ([1, 2], 0.50, 1.0),
        ([1, 2], 0.51, 2.0),
        ([5, 1000], 0.99, 1000.0),
    ],
)
def test_percentile_is_nearest_rank(values: list[int], q: float, expected: float) -> None:
    assert measure.percentile(values, q) == expected


def test_latency_summary() -> None:
    summary = measure.latency_summary([float(ms) for ms in range(1, 1001)])
    assert summary == {
        "actions": 1000,
        "p50_ms": 500.0,
        "p95_ms": 950.0,
        "p99_ms": 990.0,
        "max_ms": 1000.0,
    }
    assert measure.latency_summary([])["p99_ms"] is None


def test_the_latency_phase_splits_the_wait_before_the_write_from_the_commit() -> None:
    """Only the phase's own actions count (its prefix, `ts` in [started, cutoff)); each one's
    record timestamp splits its latency into before the write and after it."""
    seen = [
        (1_900, {"content_id": "live-x-1", "ts": 1_000}),  # written at 1,400
        (2_600, {"content_id": "live-x-2", "ts": 1_500}),  # written at 1,700
        (2_600, {"content_id": "backlog-9", "ts": 1_500}),  # another phase's
        (9_000, {"content_id": "live-x-3", "ts": 8_000}),  # past the cutoff
    ]
    figures = moderation.phase_latency(seen, [1_400, 1_700, 1_700, 8_100], "live-x-", 900, 5_000)
    assert figures["actions"] == 2
    assert (figures["p50_ms"], figures["max_ms"]) == (900.0, 1_100.0)
    assert (figures["written_p50_ms"], figures["written_p99_ms"]) == (200.0, 400.0)


def test_steady_window_starts_after_the_warmup_share() -> None:
    arrivals = [1000 + 10 * index for index in range(100)]
    assert measure.steady_since(list(reversed(arrivals)), 0.2) == 1190


def test_backlog_figures_keep_startup_and_warmup_apart() -> None:
    # 1,000 events; said it runs at 10 s after start, done at 20 s; 20% of outputs by 12 s.
    arrivals = [12_000] * 20 + [20_000] * 80
    samples = [(10_000, 4.0), (12_000, 5.0), (16_000, 6.0), (20_000, 7.6)]
    figures = measure.backlog_figures(
        events=1000,
        started=0,
        ready=10_000,
        done=20_000,
        arrivals=arrivals,
        committed=[],
        cpu_samples=samples,
        broker_cpu=(100.0, 100.5),
        python_calls=250.0,
    )
    assert figures == {
        "startup_s": 10.0,
        "processing_s": 10.0,
        "events_per_s": 100.0,
        "warmup_s": 2.0,
        "steady_events_per_s": 100.0,  # 800 events in 8 s
        "startup_cpu_s": 4.0,
        "cpu_us_per_event": 3600.0,  # 3.6 s over 1,000 events
        "steady_cpu_us_per_event": 3250.0,  # 2.6 s over 800 events
        "steady_jit_cpu_us_per_event": 0.0,  # no JIT samples: a peer
        "broker_cpu_us_per_event": 500.0,
        "python_calls_per_event": 0.25,
    }


def thread(proc: Path, pid: int, tid: int, comm: str, utime: int, stime: int) -> None:
    task = proc / str(pid) / "task" / str(tid)
    task.mkdir(parents=True, exist_ok=True)
    (task / "comm").write_text(comm + "\n")
    head = f"{tid} ({comm}) S 1 1 1 0 -1 0 0 0 0 0 "
    (task / "stat").write_text(head + f"{utime} {stime} 0 0 20 0 1 0 9 0 0")


def test_the_jit_compiler_threads_cpu_is_summed_per_thread_across_samples(
    tmp_path: Path,
) -> None:
    proc = fake_proc(tmp_path, {4243: STAT})
    thread(proc, 4243, 4243, "java", 500, 0)
    thread(proc, 4243, 4300, "C2 CompilerThre", 300, 20)  # start-up's JIT: the baseline
    thread(proc, 4243, 4301, "C1 CompilerThre", 40, 0)
    thread(proc, 4243, 4302, "moderate (batch", 900, 0)
    assert measure.jit_ticks([4243, 9999], proc=proc) == {(4243, 4300): 320, (4243, 4301): 40}
    clock = iter([1_000, 2_000, 3_000])
    sampler = measure.CpuSampler([4243], clock=lambda: next(clock), proc=proc)
    sampler._ticks = 100
    sampler.sample()
    thread(proc, 4243, 4300, "C2 CompilerThre", 400, 20)  # +100
    thread(proc, 4243, 4303, "C2 CompilerThre", 50, 0)  # started since: all of it counts
    sampler.sample()
    # 4300 ended (HotSpot stops idle compiler threads); 4301 grew by 10.
    (proc / "4243" / "task" / "4300" / "comm").unlink()
    (proc / "4243" / "task" / "4300" / "stat").unlink()
    (proc / "4243" / "task" / "4300").rmdir()
    thread(proc, 4243, 4301, "C1 CompilerThre", 50, 0)
    sampler.sample()
    assert sampler.jit_samples == [(1_000, 0.0), (2_000, 1.5), (3_000, 1.6)]


def test_the_steady_cpu_leaves_the_jit_out_and_reports_it_apart() -> None:
    arrivals = [12_000] * 20 + [20_000] * 80
    figures = measure.backlog_figures(
        events=1000,
        started=0,
        ready=10_000,
        done=20_000,
        arrivals=arrivals,
        committed=[],
        cpu_samples=[(10_000, 4.0), (12_000, 5.0), (16_000, 6.0), (20_000, 7.6)],
        broker_cpu=None,
        python_calls=None,
        jit_samples=[(10_000, 0.0), (12_000, 0.5), (16_000, 0.7), (20_000, 0.9)],
    )
    # 2.6 s after warm-up, 0.4 s of it compiling: 2.2 s and 0.4 s over 800 events.
    assert figures["steady_cpu_us_per_event"] == 2750.0
    assert figures["steady_jit_cpu_us_per_event"] == 500.0
    assert figures["cpu_us_per_event"] == 3600.0  # the whole window keeps everything


def test_the_steady_part_follows_the_committed_input() -> None:
    # Outputs in one burst at the end (a peer waiting for the watermark, a checkpoint's
    # transaction): the committed input still says when 20% of the backlog was behind it.
    committed = [(10_500, 0), (11_000, 100), (12_000, 250), (14_000, 600), (18_000, 1000)]
    assert measure.steady_start(committed, [20_000] * 100, 10_000) == (12_000, 0.75)
    figures = measure.backlog_figures(
        events=1000,
        started=0,
        ready=10_000,
        done=20_000,
        arrivals=[20_000] * 100,
        committed=committed,
        cpu_samples=[(10_000, 1.0), (12_000, 2.0), (20_000, 5.0)],
        broker_cpu=None,
        python_calls=None,
    )
    assert (figures["warmup_s"], figures["steady_events_per_s"]) == (2.0, 93.8)  # 750 in 8 s
    assert figures["steady_cpu_us_per_event"] == 4000.0  # 3 s over 750 events
    # A small backlog read in one poll: no steady part to split off, the whole window counts.
    assert measure.steady_start([(10_500, 0), (11_000, 1000)], [], 10_000) == (10_000, 1.0)
    # Nothing committed (no group progress read): the outputs' arrivals decide.
    assert measure.steady_start([], [12_000] * 20 + [20_000] * 80, 10_000) == (12_000, 0.8)
    assert measure.steady_start([], [], 10_000) == (10_000, 1.0)


PROMETHEUS_PAGE = """\
# HELP flink_taskmanager_job_task_operator_python_calls python_calls (scope: operator)
# TYPE flink_taskmanager_job_task_operator_python_calls counter
flink_taskmanager_job_task_operator_python_calls{operator_name="moderate",subtask_index="0",} 1200.0
flink_taskmanager_job_task_operator_python_calls{operator_name="decode",subtask_index="0",} 34.0
flink_taskmanager_job_task_operator_modstream_python_calls{operator_name="batched",} 6.0
flink_taskmanager_job_task_operator_numRecordsIn{operator_name="moderate",} 99999.0
"""


def test_prometheus_total_sums_every_python_calls_series() -> None:
    assert measure.prometheus_total(PROMETHEUS_PAGE, "python_calls") == 1240.0
    assert measure.prometheus_total("", "python_calls") == 0.0


def test_prometheus_by_operator_splits_the_python_calls_by_operator() -> None:
    by = measure.prometheus_by_operator(PROMETHEUS_PAGE, "python_calls")
    assert by == {"moderate": 1200.0, "decode": 34.0, "batched": 6.0}
    assert measure.prometheus_by_operator("", "python_calls") == {}
    assert measure.calls_between({"decode": 4.0}, by) == {
        "moderate": 1200.0,
        "decode": 30.0,
        "batched": 6.0,
    }
    assert measure.calls_between(None, {"decode": 4.0}) == {"decode": 4.0}
    assert measure.calls_between({"decode": 4.0}, None) is None


def test_summary_line_has_every_key_issue_26_names() -> None:
    keys = {"modstream": "modstream", "confluent-kafka": "peer_ck", "java-floor": "java_floor"}
    keys |= {"floor": "pyflink_floor", "confluent-kafka-eos": "peer_ck_eos"}
    keys |= {"kafka-python": "peer_kp"}
    results = {
        "modstream": {
            "steady_events_per_s": 3000.0,
            "steady_cpu_us_per_event": 600.0,
            "steady_jit_cpu_us_per_event": 90.0,
            "python_calls_per_event": 0.02,
            "latency": {"p50_ms": 900.0, "p99_ms": 1800.0},
        },
        "confluent-kafka": {"steady_events_per_s": 2000.0, "steady_cpu_us_per_event": 500.0},
    }
    step = {"admit_us_per_event": 8.5, "step_us_per_event": 30.0, "state_bytes_per_version": 700}
    line = measure.summary_line(results, keys, step, 250.0)
    assert set(measure.REQUIRED_KEYS) <= set(line)
    assert line["modstream_eps"] == 3000.0
    assert line["peer_ck_eps"] == 2000.0
    assert line["java_floor_eps"] is None  # not run: None, never a guess
    assert line["code_us_per_event"] == 38.5
    assert line["p99_ms_equal_load"] == 1800.0
    assert line["python_calls_per_event"] == 0.02
    assert line["state_bytes_per_version"] == 700
    assert line["modstream_vs_peer_ck"] == 1.5
    assert line["cpu_modstream_vs_peer_ck"] == 1.2  # the JIT's apart, not in the ratio
    assert line["jit_cpu_us_per_event_modstream"] == 90.0
    assert line["equal_load_versions_per_s"] == 250.0
    assert json.loads(json.dumps(line)) == line


def test_every_variant_has_a_key_in_the_json_line() -> None:
    from modstream.bench.variants import VARIANTS

    line = measure.summary_line({}, {v.name: v.key for v in VARIANTS.values()}, {}, None)
    assert set(measure.REQUIRED_KEYS) <= set(line)


def test_the_sampler_adds_the_sessions_processes_that_start_after_it(tmp_path: Path) -> None:
    proc = fake_proc(tmp_path, {4243: STAT})  # 250 ticks, session 4242
    clock = iter([1_000, 2_000])
    sampler = measure.CpuSampler([4243], clock=lambda: next(clock), proc=proc, session=4242)
    sampler._ticks = 100
    assert sampler.sample() == pytest.approx(2.5)
    # A Python worker the JVM started since (same session: 4242), and a stranger's process.
    worker = STAT.replace("4243 (", "4260 (").replace(" 150 50 30 20 ", " 70 10 0 0 ")
    stranger = STAT.replace("4243 (", "77 (").replace(" 4242 4242 4242 ", " 1 1 1 ")
    for pid, stat in {4260: worker, 77: stranger}.items():
        (proc / str(pid)).mkdir()
        (proc / str(pid) / "stat").write_text(stat)
    assert sampler.sample() == pytest.approx(3.3)
    assert sampler.pids == [4243, 4260]
    fixed = measure.CpuSampler([4243], clock=lambda: 0, proc=proc)
    fixed._ticks = 100
    assert fixed.sample() == pytest.approx(2.5)  # without a session: the pids given only
