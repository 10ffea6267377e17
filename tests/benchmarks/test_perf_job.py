"""modstream/bench/perf_job.py's reading of /proc and of `perf report` (the recording itself
needs perf and a running job: docs/BENCHMARKS.md, stop 51, says how it was run)."""

from __future__ import annotations

from pathlib import Path

from modstream.bench import measure, perf_job

# `perf report --no-children --sort comm,dso,sym --stdio -g none`, cut: names padded to columns,
# a DSO with spaces ([JIT] tid N), a kernel symbol, another thread.
REPORT = """\
# Samples: 14K of event 'cpu-clock:ppp'
#
    10.00%  moderate (batch  libpython3.11.so.1.0  [.] _PyObject_Malloc
     4.00%  moderate (batch  libpython3.11.so.1.0  [.] gc_collect_main
     1.00%  moderate (batch  libpython3.11.so.1.0  [.] visit_decref
     3.00%  moderate (batch  [JIT] tid 26616       [.] MsgPack$Writer.string(String)
     2.00%  moderate (batch  [JIT] tid 26616       [.] HeldInput.snapshot(int)
     2.00%  moderate (batch  73a4__mypyc.so        [.] CPyDef_decide___decide
     3.00%  moderate (batch  [kernel.kallsyms]     [k] irqentry_exit_to_user_mode
    30.00%  C2 CompilerThre  libjvm.so             [.] IndexSetIterator::advance_and_next
     5.00%  mini-batch -> d  libpython3.11.so.1.0  [.] gc_collect_main
"""


def test_the_version_threads_costs_are_shares_of_its_own_samples() -> None:
    got = perf_job.shares(REPORT, perf_job.VERSION_THREAD)
    assert got["thread_share_of_samples"] == 25.0  # 10+4+1+3+2+2+3, the other threads apart
    assert got["python_collector"] == 20.0  # (4 + 1) of 25
    assert got["libpython"] == 60.0  # (10 + 4 + 1) of 25, read from the DSO
    assert got["msgpack_writer"] == 12.0
    assert got["held_input_snapshot"] == 8.0
    assert got["jit_java"] == 20.0  # (3 + 2) of 25
    assert got["compiled_python"] == 8.0
    assert got["rocksdb"] == 0.0


def test_a_thread_without_samples_has_no_shares() -> None:
    assert set(perf_job.shares(REPORT, "nobody").values()) == {0.0}


def write_task(proc: Path, pid: int, tid: int, name: str, utime: int, stime: int) -> None:
    task = proc / str(pid) / "task" / str(tid)
    task.mkdir(parents=True, exist_ok=True)
    # A name with spaces and parentheses, as a Flink task's: fields are read after the last ')'.
    fields = ["S"] + ["0"] * 10 + [str(utime), str(stime)] + ["0"] * 5
    (task / "stat").write_text(f"{tid} ({name}) " + " ".join(fields) + "\n")
    (task / "comm").write_text(name + "\n")


def test_thread_cpu_is_read_per_thread_and_summed_per_name(tmp_path: Path) -> None:
    write_task(tmp_path, 7, 8, "moderate (batch", 100, 20)
    write_task(tmp_path, 7, 9, "GC Thread#0", 5, 0)
    before = measure.thread_ticks(7, proc=tmp_path)
    assert before == {8: ("moderate (batch", 120), 9: ("GC Thread#0", 5)}
    write_task(tmp_path, 7, 8, "moderate (batch", 250, 70)
    write_task(tmp_path, 7, 10, "GC Thread#0", 30, 0)  # a thread started in the window
    after = measure.thread_ticks(7, proc=tmp_path)
    spent = perf_job.thread_seconds(before, after, hz=100)
    assert spent == {"moderate (batch": 2.0, "GC Thread#0": 0.3}
    assert list(spent) == ["moderate (batch", "GC Thread#0"]  # the busiest first
