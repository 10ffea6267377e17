"""The moderation step for one content version: the entry points `step` (one input) and
`on_timer` (event time reached a timer), the dispatch of each input kind to the rule that handles
it (`HANDLERS`), and the checks made before any rule runs (bounds, duplicates, a report the
version cannot count, human input with nothing to apply to).

Pure Python over a typed state (modstream/moderation/state.py `VersionState`, stored as compact
MessagePack by modstream/moderation/state_schema.py, no pickled objects): the Flink
adapter (modstream/jobs/moderation/moderate.py) loads the state of a `(content_id, content_version)`
key, calls `step` or `on_timer` with the input in event-time order and the policy resolution for its
`ts`, stores the returned state, registers the returned timers and emits the returned outputs.

The rules themselves are a module each under modstream/moderation/rules/ (the fast gate,
evidence, the deadline, provisional expiry, retention, deletion, reports, appeals, reviews, human
input, re-evaluation, bank retroaction), each opening with the contract rule it implements and
the tests that prove it; docs/architecture.md, "Contract rules", lists them. The plumbing they
share: state.py (state, Context, StepResult, topics, time bounds), evidence_view.py (the evidence
as the policy reads it), verdict.py (evaluation), decide.py (revisions, tasks, shadows),
records.py (output records). The job-facing names are re-exported here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from modstream.core.limits import Limits
from modstream.moderation.decide import VISIBILITY, decide
from modstream.moderation.records import DEFAULT_NOTICES, index_key
from modstream.moderation.rules import (
    appeals,
    deadline,
    deletion,
    evidence,
    fast_gate,
    human_input,
    provisional,
    reevaluation,
    reports,
    retention,
    retro,
    reviews,
)
from modstream.moderation.rules.deletion import TOMBSTONE_KEEPS
from modstream.moderation.rules.fast_gate import UPSERT_FACTS
from modstream.moderation.rules.provisional import (
    PROVISIONAL_PRIORITY,
    PROVISIONAL_QUEUE,
    PROVISIONAL_REASON,
    arm_expiry,
)
from modstream.moderation.rules.reports import BRIGADE_WINDOW_MS
from modstream.moderation.rules.retention import RETIRED_KEEPS, keep_after_input
from modstream.moderation.state import (
    ALL_TOPICS,
    BROADCAST_TOPICS,
    DEFAULT_LIMITS,
    EVIDENCE_GRACE_MS,
    HUMAN_TOPICS,
    KEYED_TOPICS,
    LEASE_TOPIC,
    LIVE_WINDOW_MS,
    ORPHAN_TTL_MS,
    OUTPUT_TOPICS,
    RETRO,
    REVIEW_RETENTION_MS,
    SANCTIONS,
    STATE_TTL_MS,
    TOMBSTONE_TTL_MS,
    Context,
    Output,
    State,
    StepResult,
    event_digest,
    new_state,
)
from modstream.moderation.verdict import HUMAN_STATE
from modstream.review import escalation
from modstream.scanning.plan import sha256_hex

__all__ = [
    "ALL_TOPICS",
    "BRIGADE_WINDOW_MS",
    "BROADCAST_TOPICS",
    "DEFAULT_LIMITS",
    "DEFAULT_NOTICES",
    "EVIDENCE_GRACE_MS",
    "HANDLERS",
    "HUMAN_STATE",
    "HUMAN_TOPICS",
    "KEYED_TOPICS",
    "LIVE_WINDOW_MS",
    "ORPHAN_TTL_MS",
    "OUTPUT_TOPICS",
    "PROVISIONAL_PRIORITY",
    "PROVISIONAL_QUEUE",
    "PROVISIONAL_REASON",
    "RETIRED_KEEPS",
    "RETRO",
    "REVIEW_RETENTION_MS",
    "SANCTIONS",
    "STATE_TTL_MS",
    "TOMBSTONE_KEEPS",
    "TOMBSTONE_TTL_MS",
    "UPSERT_FACTS",
    "VISIBILITY",
    "Context",
    "Output",
    "State",
    "StepResult",
    "index_key",
    "new_state",
    "on_content_version",
    "on_timer",
    "over_bounds",
    "overdue_since",
    "sha256_hex",
    "step",
]


def step(state: State | None, topic: str, record: Any, ts: int, ctx: Context) -> StepResult:
    """Apply one input of this content version at event time `ts` (its own `ts`)."""
    refusal = over_bounds(topic, record, ctx.limits)
    if refusal is not None:
        return StepResult(state, dead_letters=[("schema", refusal)])
    if topic == RETRO:
        return retro.on_retro(state, record, ts, ctx)
    if topic == "moderation.reports" and not reports.report_kept(state, record, ctx):
        # Not counted: nothing of it is kept (not even its event id) and the version's TTL
        # does not move, so a flood of reports beyond the reporter's limit costs no state.
        return StepResult(state)
    if (topic in HUMAN_TOPICS or topic == LEASE_TOPIC) and (
        state is None or (state.content is None and not state.deleted)
    ):
        # Never decided here (or its record's retention ended): nothing to apply it to, and
        # nothing dropped silently (contract v1.1).
        return StepResult(state, dead_letters=[("stale", retention.stale(topic, record))])
    if state is None:
        state = new_state(record.content_id, record.content_version)
    result = StepResult(state)
    seen = event_digest(record.event_id)
    if seen in state.events or human_input.replayed(state, topic, record):
        return result  # a duplicate changes nothing and emits nothing, retired or not
    state.events[seen] = 1
    if state.deleted:
        return result  # late input for a deleted version is ignored
    if HANDLERS[topic](state, record, ts, ctx, result):
        human_input.remember(state, topic, record)
        result.timers += arm_expiry(state)
        result.timers += escalation.arm(state, ctx.resolution.decide)
        result.timers += keep_after_input(state, ts, ctx)
    return result


def on_timer(state: State | None, ts: int, ctx: Context) -> StepResult:
    """A deadline, a provisional expiry, an escalation, the end of a review's wait for its lease
    or a state TTL fired at event time `ts`:
    the deadline and expiry first, so a TTL reached in the same jump of event time never drops
    them (rules/retention.py holds the TTL while one still waits)."""
    if state is None:
        return StepResult(None)
    result = StepResult(state)
    deadline.fire(state, ts, ctx, result)
    provisional.fire(state, ts, ctx, result, decide)
    escalating = state.escalation_timer
    if escalating is not None and ts >= escalating:
        escalated, rearmed = escalation.fire(state, ts, ctx)
        result.outputs += escalated
        result.timers += rearmed
    reviews.fire_waiting(state, ts, result)
    return retention.fire(state, ts, ctx, result)


def overdue_since(state: State) -> int | None:
    """The event time of the oldest rule this version reached and has not decided yet: a
    deadline waiting for the detectors (its `ts`) or a provisional expiry waiting for live event
    time (its `expires_ts`); None when none waits. The waiting-past-deadline gauges read it."""
    waiting = []
    if state.deadline_timer is not None and state.deadline is not None:
        waiting.append(state.deadline)
    expiry, armed = state.expiry, state.expiry_timer
    if expiry is not None and armed is not None and armed > expiry:  # re-armed: it waits
        waiting.append(expiry)
    return min(waiting, default=None)


def on_content_version(
    state: State, record: Any, ts: int, ctx: Context, result: StepResult
) -> bool:
    """content.versions carries two kinds of input: an upsert and a delete."""
    if record.type == "delete":
        return deletion.on_delete(state, record, ts, ctx, result)
    return fast_gate.on_upsert(state, record, ts, ctx, result)


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
    elif topic == "detector.results" and (record.segment_id or 0) >= limits.max_segments:
        return (
            f"moderation: detector.results.segment_id: {record.segment_id} is beyond the "
            f"limit of {limits.max_segments} segments"
        )
    return None


# One handler per input kind: applies one new input (not a duplicate, the version not deleted)
# to the state and adds its outputs and timers to the result; False when the input ends there
# (the version's TTL and expiry are its own business), True when `step` arms them.
Handler = Callable[[State, Any, int, Context, StepResult], bool]

# Every keyed topic's handler. The internal RETRO input is not here: it applies to a stored
# version only and arms nothing, so `step` sends it to `rules.retro.on_retro` before any state
# is made.
HANDLERS: dict[str, Handler] = {
    "content.versions": on_content_version,
    "detector.results": evidence.on_detector_result,
    "moderation.reports": reports.on_report,
    "review.decisions": reviews.on_review,
    "moderation.appeals": appeals.on_appeal,
    "moderation.reevaluate": reevaluation.on_reevaluate,
    "review.leases": reviews.on_lease,
}
