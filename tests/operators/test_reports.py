"""Reporter limits: hourly limit in event time and the weight of new reporters."""

from __future__ import annotations

from modstream.moderation.rules.reports import (
    DEFAULT_HOURLY_LIMIT,
    HOUR_MS,
    NEW_REPORTER_MS,
    NEW_REPORTER_WEIGHT,
    REPORTER_TTL_MS,
    arm,
    due_batch,
    expire,
    gate,
    hourly_limit,
    pending_key,
    window_end,
)
from modstream.testing.records import T0


def test_reports_beyond_the_hourly_limit_are_not_counted() -> None:
    state = None
    weights = []
    for minute in range(5):
        state, result = gate(state, T0 + minute * 60_000, hourly_limit=3)
        weights.append(result.weight)
    assert weights == [NEW_REPORTER_WEIGHT] * 3 + [0.0, 0.0]
    state, result = gate(state, T0 + HOUR_MS + 60_001, hourly_limit=3)
    assert result.weight > 0  # the trailing hour moved on


def test_a_new_reporter_counts_half_and_an_established_one_fully() -> None:
    state, first = gate(None, T0, hourly_limit=10)
    assert first.new_reporter and first.weight == NEW_REPORTER_WEIGHT
    state, later = gate(state, T0 + NEW_REPORTER_MS, hourly_limit=10)
    assert not later.new_reporter and later.weight == 1.0


def test_a_reporters_state_keeps_at_most_max_entries_report_times() -> None:
    state = None
    counted = 0
    for second in range(3_000):
        state, result = gate(state, T0 + second * 1_000, hourly_limit=1_000_000, max_entries=50)
        counted += result.weight > 0
        assert len(state["recent"]) <= 50
    assert counted == 50  # a policy limit above the bound counts as the bound
    assert set(state) == {"first", "recent", "last"}


def test_reports_over_the_limit_add_nothing_to_the_reporters_state() -> None:
    state, _ = gate(None, T0, hourly_limit=2)
    state, _ = gate(state, T0 + 1, hourly_limit=2)
    for index in range(100):
        state, result = gate(state, T0 + 2 + index, hourly_limit=2)
        assert result.weight == 0.0 and result.reason == "reporter_hourly_limit"
    assert state["recent"] == [T0, T0 + 1] and state["last"] == T0 + 101


def test_without_a_deciding_policy_the_hourly_limit_is_the_policy_default() -> None:
    assert hourly_limit(None) == DEFAULT_HOURLY_LIMIT == 10


def test_one_ttl_timer_at_a_time_forgets_a_reporter_quiet_for_the_ttl() -> None:
    state, _ = gate(None, T0, hourly_limit=10)
    state, timer = arm(state)
    assert timer == T0 + REPORTER_TTL_MS and state["timer"] == timer
    assert arm(state) == (state, None)  # armed already
    active = {**state, "last": T0 + 5}  # a report since: the timer re-arms from it
    assert expire(active, T0 + REPORTER_TTL_MS) == (
        {**active, "timer": T0 + 5 + REPORTER_TTL_MS},
        T0 + 5 + REPORTER_TTL_MS,
    )
    assert expire(active, T0 + 1) == (active, None)  # not the armed timer
    assert expire(state, T0 + REPORTER_TTL_MS) == (None, None)


def test_reports_combine_per_window_in_ts_seq_event_order() -> None:
    assert window_end(T0) == window_end(T0 + 998) == T0 + 999 - T0 % 1_000
    pending = [
        (pending_key(T0 + 5, 2, "b"), "r2"),
        (pending_key(T0 + 5, 1, "a"), "r1"),
        (pending_key(T0 + 1_000, 0, "c"), "r3"),
    ]
    done, batch = due_batch(pending, window_end(T0))
    assert batch == [[T0 + 5, 1, "a", "r1"], [T0 + 5, 2, "b", "r2"]]
    assert done == sorted(key for key, _ in pending[:2])
    assert due_batch(pending, window_end(T0) - 1) == ([], [])
