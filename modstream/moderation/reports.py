"""Reporter-side limits on user reports: a per-reporter hourly limit and a trust weight.

Runs keyed by `reporter_id`, before the per-version step: a reporter's reports beyond the
policy's `reporter_hourly_limit` in the trailing hour (event time) are not counted, and a
reporter first seen less than a day ago counts half (a new account reporting is a weaker signal).
Reports are signals, never outcomes; these numbers only decide when a review task opens.

A reporter's state is bounded: the times of at most `max_entries` counted reports of the
trailing hour (`Limits.max_reporter_reports`, default 1,000; a policy limit above it counts as
it), the first and last report time, and nothing of reports beyond the limit. One TTL timer
at a time forgets a reporter quiet for `REPORTER_TTL_MS` (`arm`, `expire`).

A report storm on one content version is combined per event-time window of `REPORT_WINDOW_MS`
before the version's step (`window_end`, `pending_key`, `due_batch`); the Flink adapters are in
modstream/jobs/moderation/reports.py.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from modstream.core.limits import Limits

if TYPE_CHECKING:
    from modstream.policy.evaluate import CompiledPolicy

HOUR_MS = 3_600_000
NEW_REPORTER_MS = 86_400_000
NEW_REPORTER_WEIGHT = 0.5
# A reporter's state goes once they have been quiet this long (then they are new again).
REPORTER_TTL_MS = 30 * 86_400_000
MAX_ENTRIES = Limits().max_reporter_reports
# The hourly limit when no policy decides or it has no `reports` section (ReportsPolicy's own).
DEFAULT_HOURLY_LIMIT = 10
# The reports of one version, shard and window reach the version's step as one batch.
REPORT_WINDOW_MS = 1_000


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


def hourly_limit(policy: CompiledPolicy | None) -> int:
    """The deciding policy's `reporter_hourly_limit`."""
    limits = policy.document.reports if policy is not None else None
    return limits.reporter_hourly_limit if limits is not None else DEFAULT_HOURLY_LIMIT


def arm(state: dict[str, Any]) -> tuple[dict[str, Any], int | None]:
    """After this reporter's reports: the state and its TTL timer to register, the first one
    at `last + REPORTER_TTL_MS` (None: one is armed already; `expire` re-arms it)."""
    if "timer" in state:
        return state, None
    timer = state["last"] + REPORTER_TTL_MS
    return {**state, "timer": timer}, timer


def expire(state: dict[str, Any], ts: int) -> tuple[dict[str, Any] | None, int | None]:
    """A timer at `ts` with no report due: None once the reporter has been quiet for
    `REPORTER_TTL_MS` (forget them); else, when this was the armed TTL timer and the reporter
    was active since, the state with the timer re-armed at `last + REPORTER_TTL_MS` and that
    timer; else the state unchanged and no timer (one TTL timer at a time)."""
    if ts >= state["last"] + REPORTER_TTL_MS:
        return None, None
    if ts >= state.get("timer", 0):
        timer = state["last"] + REPORTER_TTL_MS
        return {**state, "timer": timer}, timer
    return state, None


def window_end(ts: int) -> int:
    """The last millisecond of the combining window of a report at `ts`: its batch's time."""
    return (ts // REPORT_WINDOW_MS + 1) * REPORT_WINDOW_MS - 1


def pending_key(ts: int, seq: int, event_id: str) -> str:
    """A weighed report's key while it waits for its window: sorted, keys order reports by
    window end, ts, seq, event_id (how the version's step applies them)."""
    return f"{window_end(ts):015d}|{ts:015d}|{seq:012d}|{event_id}"


def due_batch(pending: Iterable[tuple[str, str]], now: int) -> tuple[list[str], list[list[Any]]]:
    """Of the waiting (key, report JSON) pairs, those whose window ended by `now`, in key order:
    their keys (to remove) and the batch, one [ts, seq, event_id, report JSON] each."""
    due = sorted((key, raw) for key, raw in pending if int(key[:15]) <= now)
    batch = []
    for key, raw in due:
        _, ts, seq, event_id = key.split("|", 3)
        batch.append([int(ts), int(seq), event_id, raw])
    return [key for key, _ in due], batch
