"""Reporter limits: hourly limit in event time and the weight of new reporters."""

from __future__ import annotations

from operators.reports import HOUR_MS, NEW_REPORTER_MS, NEW_REPORTER_WEIGHT, gate
from tests.conftest import T0


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
