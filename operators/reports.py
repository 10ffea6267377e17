"""Reporter-side limits on user reports: a per-reporter hourly limit and a trust weight.

Runs keyed by `reporter_id`, before the per-version step: a reporter's reports beyond the
policy's `reporter_hourly_limit` in the trailing hour (event time) are not counted, and a
reporter first seen less than a day ago counts half (a new account reporting is a weaker signal).
Reports are signals, never outcomes; these numbers only decide when a review task opens.

A reporter's state is bounded: the times of at most `max_entries` counted reports of the
trailing hour (`Limits.max_reporter_reports`, default 1,000; a policy limit above it counts as
it), the first and last report time, and nothing of reports beyond the limit.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from modstream.limits import Limits

HOUR_MS = 3_600_000
NEW_REPORTER_MS = 86_400_000
NEW_REPORTER_WEIGHT = 0.5
# A reporter's state goes once they have been quiet this long (then they are new again).
REPORTER_TTL_MS = 30 * 86_400_000
MAX_ENTRIES = Limits().max_reporter_reports


@dataclass(frozen=True)
class ReportWeight:
    weight: float  # 0 when not counted
    new_reporter: bool
    reason: str | None = None  # why it is not counted


def gate(
    state: dict[str, Any] | None, ts: int, hourly_limit: int, max_entries: int = MAX_ENTRIES
) -> tuple[dict[str, Any], ReportWeight]:
    """Weigh one report of this reporter at event time `ts`."""
    state = state or {"first": ts, "recent": []}
    recent = [t for t in state["recent"] if t > ts - HOUR_MS][-max_entries:]
    new_reporter = ts - state["first"] < NEW_REPORTER_MS
    if len(recent) >= min(hourly_limit, max_entries):
        state = {**state, "recent": recent, "last": ts}
        return state, ReportWeight(0.0, new_reporter, "reporter_hourly_limit")
    recent.append(ts)
    weight = NEW_REPORTER_WEIGHT if new_reporter else 1.0
    return {**state, "recent": recent, "last": ts}, ReportWeight(weight, new_reporter)
