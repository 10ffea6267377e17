"""modstream/bench/off_cpu.py's reading and joining of two `perf script` outputs (the recording
itself needs perf and a running job: docs/BENCHMARKS.md, stop 53, says how it was run)."""

from __future__ import annotations

from modstream.bench import off_cpu

TID = 7


def _switch(at: float, prev: int, state: str, nxt: int) -> str:
    return (
        f"{prev} {at:.6f}: sched:sched_switch: prev_comm=x prev_pid={prev} prev_prio=120 "
        f"prev_state={state} ==> next_comm=y next_pid={nxt} next_prio=120"
    )


# System-wide switches (`perf script -F tid,time,event,trace`): the thread runs from 1.000, sleeps
# at 1.002 for 4 ms, runs, is preempted at 1.010 for 0.5 ms; another thread's switch besides.
SWITCHES = "\n".join(
    [
        _switch(1.000, 99, "S", TID),
        _switch(1.002, TID, "S", 99),
        "99 1.003000: sched:sched_wakeup: comm=x pid=7 prio=120 target_cpu=000",
        _switch(1.006, 99, "S", TID),
        _switch(1.007, 98, "R", 99),
        _switch(1.010, TID, "R+", 98),
        _switch(1.0105, 98, "S", TID),
    ]
)


def _stack(at: float, *frames: str) -> str:
    return f"moderate (batch {TID} {at:.6f}: \n" + "\n".join(f"\t  1 {f} (lib)" for f in frames)


# The thread's own switches with stacks, stamped a little apart from the system-wide ones.
STACKS = "\n\n".join(
    [
        _stack(1.00004, "futex_wait", "take_gil", "PyEval_AcquireThread"),
        _stack(1.01003, "schedule", "Unsafe_Park"),  # left runnable: preempted, whatever the stack
        _stack(1.5, "schedule", "Unsafe_Park"),  # no switch near it
    ]
)


def test_each_switch_away_is_timed_until_the_thread_runs_again() -> None:
    away, on_cpu, span = off_cpu.switches(SWITCHES, TID)
    assert set(away) == {1.002, 1.010}
    assert round(away[1.002][0], 6) == 0.004 and away[1.002][1] == "S"
    assert round(away[1.010][0], 6) == 0.0005 and away[1.010][1] == "R+"
    assert round(on_cpu, 6) == 0.002 + 0.004  # 1.000-1.002 and 1.006-1.010
    assert round(span, 6) == 0.0105


def test_stacks_join_the_nearest_switch_and_name_the_wait() -> None:
    away = {1.00000: (0.004, "S"), 1.01000: (0.0005, "R+")}
    found = off_cpu.waits(away, off_cpu.stacks(STACKS))
    assert found["by_reason"] == {
        "interpreter lock": [0.004, 1],
        off_cpu.PREEMPTED: [0.0005, 1],
    }
    assert found["unmatched"] == 1


def test_a_sleep_is_named_by_the_first_reason_its_stack_shows() -> None:
    assert off_cpu.reason("S", "Parker::park\nrocksdb::DBImpl::Get") == "RocksDB"
    assert off_cpu.reason("D", "Unsafe_Park") == (
        "Java park (the mailbox waiting for input, or a lock)"
    )
    assert off_cpu.reason("S", "epoll_wait") == "other"
    assert off_cpu.reason("R", "take_gil") == off_cpu.PREEMPTED
