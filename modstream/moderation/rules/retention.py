"""Retention: a decided version keeps its full state for `STATE_TTL_MS` after its latest
input, then a compact record that keeps its right to be reviewed and appealed; human input for a
version never decided goes to the DLQ, never dropped.

Contract: docs/CONTRACT.md, "v1.1 additions", "Human decisions apply at any age": "A
`review.decisions` or `moderation.appeals` record for a version decided at any time in the past
applies (state retention does not end a version's right to be reviewed); for a version modstream
never decided it goes to the DLQ with `error_class: "stale"`. Nothing is dropped silently."

Proved by:
    tests/operators/test_moderation.py::test_state_and_timers_are_cleared_after_the_ttl
    tests/operators/test_moderation.py::test_a_review_40_days_later_applies_to_the_retired_record_with_the_next_revision
    tests/operators/test_moderation.py::test_an_appeal_of_a_retired_version_opens_a_task_with_the_decisions_reasons
    tests/operators/test_moderation.py::test_human_decisions_for_a_version_never_decided_go_to_the_dlq_as_stale
    tests/operators/test_moderation.py::test_a_retired_record_is_compact
    tests/operators/test_timers.py::test_the_state_ttl_reached_while_a_deadline_waits_retires_only_after_it

The whole rule: the TTL armed after each input (`arm_ttl`, one timer at a time), held while a
deadline or expiry before it still waits (`ttl_waits`), fired (`fire`, from
modstream/moderation/step.py `on_timer`): a decided version retired to the compact record
(`retire`, `RETIRED_KEEPS`), any other cleared; human input with nothing to apply to refused as
`stale` (`stale`, checked by `step`). docs/moderation.md, "Retention"; docs/retention.md.
"""

from __future__ import annotations

from typing import Any

import msgspec

from modstream.moderation.state import ORPHAN_TTL_MS, Context, State, StepResult, new_state


def arm_ttl(state: State, ts: int, ttl_ms: int, *, replace: bool = False) -> list[int]:
    """Keep the state until `ttl_ms` after the latest input. One timer is armed at a time
    (not one per input: each firing loads the state); when it fires early it re-arms."""
    state.ttl = ts + ttl_ms if replace else max(state.ttl or 0, ts + ttl_ms)
    armed = state.ttl_timer
    if armed is None or state.ttl < armed:
        state.ttl_timer = state.ttl
        return [state.ttl]
    return []


def keep_after_input(state: State, ts: int, ctx: Context) -> list[int]:
    """The state kept after an input applied at `ts`: `ctx.state_ttl_ms` once the version has
    its upload, ORPHAN_TTL_MS while it has none (evidence or human input whose upsert never
    came). What `step` arms after every applied input, and rules/reviews.py after a review
    that waited for its lease."""
    ttl = ORPHAN_TTL_MS if state.content is None else ctx.state_ttl_ms
    return arm_ttl(state, ts, ttl)


def ttl_waits(state: State, ts: int) -> list[int]:
    """The state TTL reached while a deadline or provisional expiry before it in event time
    still waits (a backlog older than the TTL, read by a live job): the TTL fires again after
    those waits end, so the version is retired (or cleared) only once they decided, as in
    replay. Replay never waits, so there the TTL is never held. Nothing waits: []."""
    ttl = state.ttl
    if ttl is None:
        return []
    waits = []
    if state.deadline_timer is not None and state.deadline is not None and state.deadline <= ttl:
        waits.append(state.deadline_timer)
    expiry, armed = state.expiry, state.expiry_timer
    if expiry is not None and armed is not None and expiry <= ttl:
        waits.append(armed)  # armed at or before `ts` (just armed, long past): fires first
    if not waits:
        return []
    state.ttl_timer = max(*waits, ts + 1)
    return [state.ttl_timer]


def fire(state: State, ts: int, ctx: Context, result: StepResult) -> StepResult:
    """The state TTL, if reached at `ts`: held while a deadline or expiry before it waits, else
    the version retired (decided, not deleted, not retired yet) or its state cleared. `result`
    holds what fired before it at `ts`; the step's result is returned."""
    if state.ttl is not None and ts >= state.ttl:
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


def keep_only(state: State, kept: tuple[str, ...]) -> None:
    """Every field of `state` but `kept` back at its default, in place."""
    fresh = new_state(state.content_id, state.content_version)
    for name in state.__struct_fields__:
        if name not in kept:
            setattr(state, name, getattr(fresh, name))


# What a retired version keeps (`retire`): enough to apply a review or an appeal and decide it
# again with the same revision numbers, the evidence it was decided on included, and the digests
# of the human inputs applied (a re-sent review or appeal stays a duplicate:
# modstream/moderation/appeals_and_reviews.py). Input event ids, reporters, shadow decisions and
# timers go.
RETIRED_KEEPS = (
    "content_id", "content_version", "content", "evidence", "report_weight", "human", "human_ids",
    "appeal_id", "decision_revision", "last_decision", "tasks", "open_tasks",
    "provisional_expired", "leases", "task_queues", "second", "escalation_task",
    "waiting_reviews", "review_wait_timer",
)  # fmt: skip


def retire(state: State, ts: int, ctx: Context) -> StepResult:
    """The full state's TTL passed: keep the compact record for `review_retention_ms`, every
    other field at its default; the content's hashes go (bank retroaction reaches retained full
    states only)."""
    keep_only(state, RETIRED_KEEPS)
    if state.content is not None:
        state.content = msgspec.structs.replace(state.content, sha256=None, phash=None)
    ttl = ts + ctx.review_retention_ms
    state.retired, state.ttl, state.ttl_timer = True, ttl, ttl
    return StepResult(state, timers=[ttl])


def stale(topic: str, record: Any) -> str:
    """The DLQ message of human input for a version that holds no decision (`stale`)."""
    return (
        f"moderation: {topic}: no decision of content version {record.content_version} is "
        "kept (never decided here, or its retention ended: docs/moderation.md, 'Retention')"
    )
