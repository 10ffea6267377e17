"""One handler per input kind of a content version, behind the dispatch table `HANDLERS`
(docs/moderation.md, "The step", lists each rule's function), and the checks `step` makes
before any handler runs (bounds, a report the version cannot count, human input with nothing
to apply to).

A handler applies one new input (not a duplicate, the version not deleted) to the state and
adds its outputs and timers to `result`; it returns False when the input ends there (the
version's TTL and expiry are its own business), True when `step` arms them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from modstream.contract.common import MAX_ID_CHARS
from modstream.contract.content import ContentUpsert
from modstream.contract.detector import first_finding_ms
from modstream.core.limits import Limits
from modstream.moderation import appeals_and_reviews as human
from modstream.moderation.decide import decide
from modstream.moderation.records import APPEAL_PRIORITY, appeal_task, task
from modstream.moderation.reports import ReportWeight
from modstream.moderation.state import (
    TOMBSTONE_TTL_MS,
    BurstReport,
    Content,
    Context,
    Evidence,
    Output,
    State,
    StepResult,
    event_digest,
)
from modstream.moderation.timers import arm_deadline, arm_ttl, compact_tombstone, decide_deadline
from modstream.review import access as review_access
from modstream.review import escalation, second_review
from modstream.scanning import plan as scan_plan
from modstream.scanning.plan import required as _required
from modstream.scanning.plan import segment as _segment
from modstream.scanning.plan import sha256_hex

# Reports from new reporters that reach the review threshold within this window are flagged as
# possible brigading (a review task in queue `brigading`) instead of counted.
BRIGADE_WINDOW_MS = 600_000

Handler = Callable[[State, Any, int, Context, StepResult], bool]


def on_content_version(
    state: State, record: Any, ts: int, ctx: Context, result: StepResult
) -> bool:
    """content.versions carries two kinds of input: an upsert and a delete."""
    if record.type == "delete":
        return on_delete(state, record, ts, ctx, result)
    return on_upsert(state, record, ts, ctx, result)


def on_delete(state: State, record: Any, ts: int, ctx: Context, result: StepResult) -> bool:
    """Decide `deleted` (hidden), then keep only a tombstone for `TOMBSTONE_TTL_MS`."""
    state.deleted = True
    if state.content is not None:
        result.outputs += decide(state, ctx, ts, "delete")
    compact_tombstone(state)
    result.timers += arm_ttl(state, ts, TOMBSTONE_TTL_MS, replace=True)
    return False


UPSERT_FACTS = {
    "modality", "surface", "region", "audience", "account_risk", "size_bytes", "mime_type",
    "sha256", "phash", "segments", "author_id", "ts",
}  # fmt: skip
# The same facts in the upsert model's field order (the order model_dump kept them in).
_UPSERT_FIELDS = tuple(name for name in ContentUpsert.model_fields if name in UPSERT_FACTS)


def on_upsert(state: State, record: Any, ts: int, ctx: Context, result: StepResult) -> bool:
    """The first decision (`fast_gate`), the deadline, the scan requests in cost order, and
    the evidence that came before the upload, joined at once."""
    if state.content is not None:
        return False  # the same version uploaded twice: the first one counts
    content = Content(**{name: getattr(record, name) for name in _UPSERT_FIELDS})
    state.content = content
    state.asked_at = ctx.clock_ms  # when the detectors are asked (None in replay)
    result.timers += arm_deadline(state, ctx.resolution.decide)
    early, state.evidence = state.evidence, {}
    result.outputs += decide(state, ctx, ts, "fast_gate", fast_gate=True)
    planned = scan_plan.on_upsert(state, record, ctx.resolution.decide, ts, ctx.hash_matches)
    result.outputs += _unanswered(state, planned, early)
    if early:
        _join_early_evidence(state, early, ts, ctx, result)
    elif not _required(ctx.resolution.decide, content.modality):
        result.outputs += decide(state, ctx, ts, "evidence")
    return True


def on_detector_result(
    state: State, record: Any, ts: int, ctx: Context, result: StepResult
) -> bool:
    """Evidence stored under (detector, model version, segment); a repeated key is a
    duplicate."""
    key = f"{record.detector}|{record.model_version}|{record.segment_id}"
    normalized = (
        f"{record.detector}|{record.model_version}|"
        f"{0 if record.segment_id is None else record.segment_id}"
    )
    if key in state.evidence or normalized in state.evidence:
        return False  # the same evidence key again
    if state.deadline_timer is not None and state.deadline is not None and ts > state.deadline:
        # Stamped after its deadline: the detector did not answer in time, so the deadline
        # decides first, as in replay, and this evidence after it.
        result.outputs += decide_deadline(state, ctx)
    entry = Evidence(
        record.detector,
        record.model_version,
        record.segment_id,
        record.status,
        dict(record.scores) if record.scores else None,
        record.evidence_ref,
        ts,
        record.language,
        record.language_confidence,
        first_finding_ms(record.findings),
    )
    result.outputs += _take_evidence(state, normalized, entry, ts, ctx)
    return True


def _take_evidence(state: State, key: str, entry: Evidence, ts: int, ctx: Context) -> list[Output]:
    """Store one detector result, plan what it unlocks (cost order), and decide."""
    state.evidence[key] = entry
    asked = scan_plan.on_evidence(state, ctx.resolution.decide, ts, entry.detector)
    if asked and ctx.clock_ms is not None:
        state.asked_at = ctx.clock_ms  # the models, asked after their gate (cost order)
    if state.content is None:
        return asked
    # Evidence stamped before its upload decides at the upload's ts, whether it was read
    # before the upload (joined at the upsert) or after it (a backlog's late evidence).
    return asked + decide(state, ctx, max(ts, state.content.ts), "evidence")


def on_appeal(state: State, record: Any, ts: int, ctx: Context, result: StepResult) -> bool:
    """Open the appeal's task; a second appeal while one is active is a `conflict`."""
    if state.appeal_id is not None:
        result.dead_letters.append(
            (
                "conflict",
                f"appeal {record.appeal_id}: appeal "
                f"{state.appeal_id} is still active for this version",
            )
        )
        return False
    state.appeal_id = record.appeal_id
    task_id = f"appeal-{record.appeal_id}"
    state.tasks.append(task_id)
    escalation.track(state, task_id, review_access.APPEALS_QUEUE, APPEAL_PRIORITY, ts)
    result.outputs.append(appeal_task(state, task_id, ctx.resolution.decide, ts))
    return True


def _join_early_evidence(
    state: State, early: dict[str, Evidence], ts: int, ctx: Context, result: StepResult
) -> None:
    """Evidence read before its upload, taken after the fast gate one piece at a time in its own
    ts order, as if read after the upload: the same revisions and the same cost-order steps
    either way, so the order in which a job read its lanes never shows. Requests for what the
    early evidence already answered are not sent."""
    for key, entry in sorted(early.items(), key=lambda item: (_taken_at(item[1], ts), item[0])):
        taken = _take_evidence(state, key, entry, _taken_at(entry, ts), ctx)
        result.outputs += _unanswered(state, taken, early)


def _taken_at(entry: Evidence, ts: int) -> int:
    """The result's own `ts`, or `ts` for one stored before issue 12 (which kept none)."""
    return ts if entry.ts is None else entry.ts


def _unanswered(state: State, outputs: list[Output], early: dict[str, Evidence]) -> list[Output]:
    """`outputs` without the scan requests that evidence in `early` already answers."""
    answered = scan_plan.answered(state, early)
    return [
        (topic, key, record)
        for topic, key, record in outputs
        if not topic.startswith("scan.requests.")
        or (record["detector"], _segment(state, record["segment_id"])) not in answered
    ]


def stale(topic: str, record: Any) -> str:
    return (
        f"moderation: {topic}: no decision of content version {record.content_version} is "
        "kept (never decided here, or its retention ended: docs/moderation.md, 'Retention')"
    )


def over_bounds(topic: str, record: Any, limits: Limits) -> str | None:
    """Why one input would make this version's state larger than the deployment allows
    (modstream/core/limits.py), or None. Such an input goes to the DLQ (`schema`) and changes
    nothing: an upsert declaring too many segments is never decided, its version waits for
    a valid upsert."""
    if topic == "content.versions" and record.type == "upsert":
        if record.segments > limits.max_segments:
            return (
                f"moderation: content.versions.segments: {record.segments} declared, over "
                f"the limit of {limits.max_segments}"
            )
    elif topic == "moderation.appeals" and len(f"appeal-{record.appeal_id}") > MAX_ID_CHARS:
        return (
            f"moderation: moderation.appeals.appeal_id: its task id `appeal-<appeal_id>` would "
            f"be longer than {MAX_ID_CHARS} characters"
        )
    elif topic == "detector.results" and (record.segment_id or 0) >= limits.max_segments:
        return (
            f"moderation: detector.results.segment_id: {record.segment_id} is beyond the "
            f"limit of {limits.max_segments} segments"
        )
    return None


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


def on_review(state: State, record: Any, ts: int, ctx: Context, result: StepResult) -> bool:
    """A sticky human outcome; it closes the open tasks, the active appeal's among them. A
    review stamped before the human decision in force changes nothing (`stale`): the newest
    human decision wins whatever the arrival order (modstream/moderation/appeals_and_reviews.py).
    The policy may want a second reviewer first (modstream/review/second_review.py)."""
    if ctx.grants is not None:
        refusal = review_access.review_refusal(state, record, ts, ctx.grants)
        if refusal is not None:
            # Not applied, so not remembered: the same record sent again once its reviewer
            # holds the grant and lease (`dlq replay`) applies.
            del state.events[event_digest(record.event_id)]
            result.dead_letters.append(refusal)
            return False
    newer = human.superseded(state, ts, record.event_id)
    if newer is not None:
        result.dead_letters.append(("stale", human.superseded_message(record, newer)))
        return False
    # Decides, waits for a second reviewer, or is the second: modstream/review/second_review.py.
    return second_review.on_review(state, record, ts, ctx, result)


def on_lease(state: State, record: Any, ts: int, ctx: Context, result: StepResult) -> bool:
    """A reviewer's claim of one task the job issued, kept while the reviewer holds a grant of
    its queue and no other reviewer holds it (modstream/review/access.py); it decides nothing
    and moves no TTL."""
    if ctx.grants is not None:
        refusal = review_access.lease_refusal(state, record, ctx.grants)
        if refusal is not None:
            del state.events[event_digest(record.event_id)]
            result.dead_letters.append(refusal)
            return False
    review_access.hold(state, record)
    return False


def on_reevaluate(state: State, record: Any, ts: int, ctx: Context, result: StepResult) -> bool:
    """Decide again on the stored evidence; ask (backfill) what the policy now requires."""
    if state.content is not None:
        result.outputs += scan_plan.backfill(state, ctx.resolution.decide, ts, ctx.hash_matches)
    result.outputs += decide(state, ctx, ts, "reevaluation")
    return True


def on_retro(state: State | None, record: Any, ts: int, ctx: Context) -> StepResult:
    """A bank addition at `ts` for a version uploaded before it (contract v1.1): decide again at
    `ts` (`trigger: policy_change`) when the version, as stored, matches the added bank then
    (`ctx.hash_matches`: HashBanks at `ts`, the policy's phash distance). A version without
    content, deleted or expired is left alone; nothing of it is created, its TTL does not move."""
    if state is None or state.deleted or state.content is None:
        return StepResult(state)
    seen = event_digest(record.event_id)
    if seen in state.events:
        return StepResult(state)
    state.events[seen] = 1
    if record.bank not in ctx.hash_matches:
        return StepResult(state)
    return StepResult(state, outputs=decide(state, ctx, ts, "policy_change"))


# Every keyed topic's handler. The internal RETRO input is not here: it applies to a stored
# version only and arms nothing, so `step` sends it to `on_retro` before any state is made.
HANDLERS: dict[str, Handler] = {
    "content.versions": on_content_version,
    "detector.results": on_detector_result,
    "moderation.reports": on_report,
    "review.decisions": on_review,
    "moderation.appeals": on_appeal,
    "moderation.reevaluate": on_reevaluate,
    "review.leases": on_lease,
}
