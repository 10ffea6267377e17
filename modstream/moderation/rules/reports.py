"""User reports: signals, never outcomes. A reporter's reports are weighed (an hourly limit, a
trust weight), combined per version and window, then counted once per distinct reporter; at the
policy's `review_threshold` a review task opens, and a burst from new reporters is flagged as
possible brigading instead of counted.

Contract: docs/CONTRACT.md, "moderation.reports (user reports; signals, never a ban by
themselves)" and "Policy document": "Reports never change the outcome by themselves:
`review_threshold` distinct reporters within the policy's limits open a review task."

Proved by:
    tests/operators/test_moderation.py::test_reports_open_a_review_at_the_threshold_and_never_change_the_outcome
    tests/operators/test_moderation.py::test_new_reporters_count_half_and_reports_over_the_limit_not_at_all
    tests/operators/test_moderation.py::test_a_burst_from_new_reporters_is_flagged_as_brigading_instead_of_counted
    tests/operators/test_reports.py::test_reports_beyond_the_hourly_limit_are_not_counted
    tests/operators/test_reports.py::test_a_new_reporter_counts_half_and_an_established_one_fully
    tests/operators/test_reports.py::test_one_ttl_timer_at_a_time_forgets_a_reporter_quiet_for_the_ttl
    tests/operators/test_reports.py::test_reports_combine_per_window_in_ts_seq_event_order
    tests/operators/test_moderation_bounds.py::test_reports_beyond_the_reporter_limit_leave_no_trace_in_the_version
    tests/operators/test_moderation_bounds.py::test_counted_reporters_and_the_burst_are_bounded_per_version

Reporter side, keyed by `reporter_id`, before the per-version step: a reporter's reports beyond
the policy's `reporter_hourly_limit` in the trailing hour (event time) are not counted, and a
reporter first seen less than a day ago counts half (a new account reporting is a weaker signal)
(`gate`, `hourly_limit`).

A reporter's state is bounded: the times of at most `max_entries` counted reports of the
trailing hour (`Limits.max_reporter_reports`, default 1,000; a policy limit above it counts as
it), the first and last report time, and nothing of reports beyond the limit. One TTL timer
at a time forgets a reporter quiet for `REPORTER_TTL_MS` (`arm`, `expire`).

A report storm on one content version is combined per event-time window of `REPORT_WINDOW_MS`
before the version's step (`window_end`, `pending_key`, `due_batch`); the Flink adapters are in
modstream/jobs/moderation/reports.py.

Version side, in the version's step: `report_kept` (checked by modstream/moderation/step.py
before any state is made) and `on_report` (the handler of moderation.reports): counted once per
distinct reporter, weighted, or flagged as brigading (`_count_report`).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from modstream.core.limits import Limits
from modstream.moderation.decide import decide
from modstream.moderation.records import task
from modstream.moderation.state import (
    BurstReport,
    Context,
    Output,
    ReportWeight,
    State,
    StepResult,
    event_digest,
)
from modstream.review import escalation
from modstream.scanning.plan import sha256_hex

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
# Reports from new reporters that reach the review threshold within this window are flagged as
# possible brigading (a review task in queue `brigading`) instead of counted.
BRIGADE_WINDOW_MS = 600_000


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


def report_kept(state: State | None, record: Any, ctx: Context) -> bool:
    """Whether a report can count (or be flagged) on this version: the reporter gate gave it a
    weight, the version is not deleted, the reporter is not counted yet, and fewer than
    `max_reporters` reporters are. Beyond that bound the report count saturates: review
    thresholds are far below it."""
    weight = ctx.report or ReportWeight(1.0, new_reporter=False)
    if weight.weight <= 0:
        return False
    if state is None:
        return True
    if state.deleted or record.reporter_id in state.reporters:
        return False
    return len(state.reporters) < ctx.limits.max_reporters


def _count_report(state: State, record: Any, ts: int, ctx: Context) -> list[Output]:
    """Count a report (distinct reporters, weighted), or flag a burst from new reporters as
    possible brigading instead of counting it. Reports never decide an outcome themselves."""
    weight = ctx.report or ReportWeight(1.0, new_reporter=False)
    if record.reporter_id in state.reporters or weight.weight <= 0:
        return []
    burst = state.burst
    expired = 0
    while expired < len(burst) and burst[expired].ts <= ts - BRIGADE_WINDOW_MS:
        expired += 1
    state.burst_new -= sum(1 for seen in burst[:expired] if seen.new_reporter)
    del burst[:expired]
    burst.append(BurstReport(ts, weight.new_reporter))
    state.burst_new += int(weight.new_reporter)
    overflow = len(burst) - ctx.limits.max_reporters
    if overflow > 0:  # a bounded window: the oldest reports of a storm leave it first
        state.burst_new -= sum(1 for seen in burst[:overflow] if seen.new_reporter)
        del burst[:overflow]
    policy = ctx.resolution.decide
    reports = policy.document.reports if policy is not None else None
    new_in_burst = state.burst_new
    if (
        weight.new_reporter
        and reports is not None
        and new_in_burst >= reports.review_threshold
        and new_in_burst * 2 > len(state.burst)
    ):
        task_id = f"brigading-{sha256_hex(state.content_id, state.content_version)[:20]}"
        if task_id in state.tasks or state.content is None:
            return []
        state.tasks.append(task_id)
        escalation.track(state, task_id, "brigading", reports.priority, ts)
        outputs: list[Output] = [
            (
                "review.tasks",
                state.content_id,
                task(
                    state,
                    task_id,
                    "review",
                    "brigading",
                    reports.priority,
                    ["possible_brigading"],
                    [],
                    policy,
                    ts,
                ),
            )
        ]
        return outputs + decide(state, ctx, ts, "report")
    state.reporters[record.reporter_id] = weight.weight
    state.report_weight += weight.weight
    return decide(state, ctx, ts, "report")


def on_report(state: State, record: Any, ts: int, ctx: Context, result: StepResult) -> bool:
    """A report `report_kept` let through: counted, or flagged as a possible brigade."""
    result.outputs += _count_report(state, record, ts, ctx)
    if record.reporter_id not in state.reporters:
        # Flagged as a possible brigade, not counted: the burst window remembers it (bounded
        # by `max_reporters`); its event id is not kept, so events stay bounded too.
        del state.events[event_digest(record.event_id)]
    return True
