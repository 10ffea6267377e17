"""The moderation step for one content version: evidence join, completeness, deadlines,
human review, appeals, reports, deletes, and decisions that change only when they must.

Pure Python over a typed state (modstream/moderation/state.py `VersionState`, stored as compact
MessagePack by modstream/moderation/state_schema.py, no pickled objects): the Flink
adapter (modstream/jobs/moderation/moderate.py) loads the state of a `(content_id, content_version)`
key, calls `step` or `on_timer` with the input in event-time order and the policy resolution for its
`ts`, stores the returned state, registers the returned timers and emits the returned outputs.

The entry points and the job-facing names live here; the parts, each a module per concept:
modstream/moderation/state.py (state, Context, StepResult, topics, time bounds), handlers.py (one
handler per input kind, `HANDLERS`), verdict.py (evidence view, evaluation), decide.py
(revisions, tasks, shadows), records.py (output records), timers.py (deadline, provisional
expiry, TTL, retirement, tombstone). docs/moderation.md, "The step", lists rule → function.
"""

from __future__ import annotations

from typing import Any

from modstream.moderation import appeals_and_reviews as human
from modstream.moderation.decide import VISIBILITY
from modstream.moderation.handlers import (
    BRIGADE_WINDOW_MS,
    HANDLERS,
    UPSERT_FACTS,
    on_retro,
    over_bounds,
    report_kept,
    stale,
)
from modstream.moderation.records import DEFAULT_NOTICES, index_key
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
from modstream.moderation.timers import (
    RETIRED_KEEPS,
    TOMBSTONE_KEEPS,
    arm_expiry,
    arm_ttl,
    decide_deadline,
    expire_provisional,
    postponed,
    retire,
    ttl_waits,
)
from modstream.moderation.verdict import (
    HUMAN_STATE,
    PROVISIONAL_PRIORITY,
    PROVISIONAL_QUEUE,
    PROVISIONAL_REASON,
)
from modstream.review import escalation
from modstream.scanning.plan import sha256_hex

__all__ = [
    "ALL_TOPICS",
    "BRIGADE_WINDOW_MS",
    "BROADCAST_TOPICS",
    "DEFAULT_LIMITS",
    "DEFAULT_NOTICES",
    "EVIDENCE_GRACE_MS",
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
    "on_timer",
    "sha256_hex",
    "step",
]


def step(state: State | None, topic: str, record: Any, ts: int, ctx: Context) -> StepResult:
    """Apply one input of this content version at event time `ts` (its own `ts`)."""
    refusal = over_bounds(topic, record, ctx.limits)
    if refusal is not None:
        return StepResult(state, dead_letters=[("schema", refusal)])
    if topic == RETRO:
        return on_retro(state, record, ts, ctx)
    if topic == "moderation.reports" and not report_kept(state, record, ctx):
        # Not counted: nothing of it is kept (not even its event id) and the version's TTL
        # does not move, so a flood of reports beyond the reporter's limit costs no state.
        return StepResult(state)
    if (topic in HUMAN_TOPICS or topic == LEASE_TOPIC) and (
        state is None or (state.content is None and not state.deleted)
    ):
        # Never decided here (or its record's retention ended): nothing to apply it to, and
        # nothing dropped silently (contract v1.1).
        return StepResult(state, dead_letters=[("stale", stale(topic, record))])
    if state is None:
        state = new_state(record.content_id, record.content_version)
    result = StepResult(state)
    seen = event_digest(record.event_id)
    if seen in state.events or human.replayed(state, topic, record):
        return result  # a duplicate changes nothing and emits nothing, retired or not
    state.events[seen] = 1
    if state.deleted:
        return result  # late input for a deleted version is ignored
    if HANDLERS[topic](state, record, ts, ctx, result):
        human.remember(state, topic, record)
        ttl = ORPHAN_TTL_MS if state.content is None else ctx.state_ttl_ms
        result.timers += arm_expiry(state)
        result.timers += escalation.arm(state, ctx.resolution.decide)
        result.timers += arm_ttl(state, ts, ttl)
    return result


def on_timer(state: State | None, ts: int, ctx: Context) -> StepResult:
    """A deadline, a provisional expiry or a state TTL fired at event time `ts`: the deadline
    and expiry first, so a TTL reached in the same jump of event time never drops them."""
    if state is None:
        return StepResult(None)
    result = StepResult(state)
    _fire_waits(state, ts, ctx, result)
    if state.ttl is not None and ts >= state.ttl:
        # The deadlines and expiries before it decide first; while one still waits, so does
        # the TTL (`ttl_waits`).
        waits = ttl_waits(state, ts)
        if waits:
            result.timers += waits
            return result
        if state.decision_revision > 0 and not state.deleted and not state.retired:
            ended = retire(state, ts, ctx)
        else:
            ended = StepResult(None)  # every other final state clears its keyed state
        ended.outputs[:0] = result.outputs
        return ended
    if state.ttl is not None and state.ttl_timer is not None and ts >= state.ttl_timer:
        state.ttl_timer = state.ttl  # the TTL moved on since this timer was armed
        result.timers.append(state.ttl)
    return result


def _fire_waits(state: State, ts: int, ctx: Context, result: StepResult) -> None:
    """The deadline (waiting for the detectors while they have not had their time), the
    provisional expiry and the escalation of tasks left open (modstream/review/escalation.py), each
    if due at `ts`."""
    pending = state.deadline_timer
    due = state.deadline is not None and not state.deleted
    if due and ((ts == state.deadline and pending is None) or ts == pending):
        waited = postponed(state, ctx, ts)
        if waited is not None:
            state.deadline_timer = waited
            result.timers.append(waited)
        else:
            result.outputs += decide_deadline(state, ctx)
            # A deadline that waited decides after later input: its PROVISIONAL_ALLOW can
            # expire before the expiry already armed (or already be past it).
            result.timers += arm_expiry(state)
    armed = state.expiry_timer
    if armed is not None and ts >= armed:
        expiry = expire_provisional(state, ts, ctx)
        result.outputs += expiry.outputs
        result.timers += expiry.timers
    escalating = state.escalation_timer
    if escalating is not None and ts >= escalating:
        escalated, rearmed = escalation.fire(state, ts, ctx)
        result.outputs += escalated
        result.timers += rearmed
