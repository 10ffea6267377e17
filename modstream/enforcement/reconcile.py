"""Reconciliation for one content item: desired visibility (moderation.actions) against
effective visibility (content.visibility), with an SLA, repairs and alerts.

Pure Python over plain dict state; `now` is processing time passed in by the adapter
(modstream/jobs/reconciler.py): the SLA is a promise about wall-clock time, not event time.
- desired: the action of the highest `(content_version, decision_revision)` seen;
- effective: the latest content.visibility record;
- they agree when the effective version is the desired one (or newer: a new upload waits for
  its own action) and the visibilities are equal;
- a disagreement older than `sla_ms` gives a `moderation.discrepancies` record with
  `action: retry` and a repair on `enforcement.repairs` (the desired action with its own intent
  id, `repair_of` the original), at most `max_retries` times, then one `action: alert`.
A content item's state is forgotten `STATE_TTL_MS` (processing time) after its last input once
nothing is left to do (they agree, or the alert was sent); one expiry timer is armed at a time.

Audits (`audit_ms` > 0): what a content.visibility record said can stop being true without a
record (Redis restarted from an AOF that lost its last second, after Kafka offsets were
committed). Every known item's served state is read again `audit_ms` after its last change,
then at doubling intervals up to `AUDIT_MAX_MS`; an audit is compared like a record, so a
rolled-back revision or visibility becomes a discrepancy and a repair. An audit is not an
input: it does not keep the state alive.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

State = dict[str, Any]
Output = tuple[str, str, dict[str, Any]]
DEFAULT_SLA_MS = 30_000
DEFAULT_MAX_RETRIES = 3
# How long a content item's reconciliation state outlives its last input (docs/retention.md).
STATE_TTL_MS = 7 * 86_400_000
DEFAULT_AUDIT_MS = 60_000
AUDIT_MAX_MS = 3_600_000


@dataclass
class ReconcileResult:
    state: State | None  # None: forget this content item (the adapter clears its state)
    outputs: list[Output] = field(default_factory=list)
    timers: list[int] = field(default_factory=list)
    lag_ms: int | None = None  # desired -> effective, when this input closed the gap
    open: bool = False  # a disagreement is outstanding after this step


def new_state() -> State:
    return {"desired": None, "effective": None, "since": None, "attempts": 0, "alerted": False}


def agree(state: State) -> bool:
    desired, effective = state["desired"], state["effective"]
    if desired is None:
        return True
    if effective is None:
        return False
    applied: tuple[int, int, str] = (
        effective["content_version"],
        effective["decision_revision"],
        effective["visibility"],
    )
    wanted: tuple[int, int, str] = (
        desired["content_version"],
        desired["decision_revision"],
        desired["visibility"],
    )
    if applied[0] > wanted[0]:
        return True
    # An applied revision below the desired one was lost (a rolled-back store) or is not
    # applied yet: the actions change visibility, so equal visibilities do not settle it.
    return applied[0] == wanted[0] and applied[1] >= wanted[1] and applied[2] == wanted[2]


def on_action(
    state: State | None, action: dict[str, Any], now: int, sla_ms: int, audit_ms: int = 0
) -> ReconcileResult:
    state = state or new_state()
    desired = state["desired"]
    rank = (action["content_version"], action["decision_revision"])
    if desired is None or rank > (desired["content_version"], desired["decision_revision"]):
        state["desired"] = {**action, "received": now}
        state["attempts"], state["alerted"] = 0, False
        state["audit_every"] = audit_ms
    return _settle(state, now, sla_ms, audit_ms)


def on_visibility(
    state: State | None, record: dict[str, Any], now: int, sla_ms: int, audit_ms: int = 0
) -> ReconcileResult:
    state = state or new_state()
    state["effective"] = {
        "content_version": record["content_version"],
        "decision_revision": record["decision_revision"],
        "visibility": record["visibility"],
    }
    return _settle(state, now, sla_ms, audit_ms)


def audit_due(state: State, now: int) -> bool:
    """An audit of this item's served state is due (the adapter reads it, then `on_audit`)."""
    return state.get("audit_at") is not None and now >= state["audit_at"]


def on_audit(
    state: State, served: dict[str, Any] | None, now: int, sla_ms: int, audit_ms: int
) -> ReconcileResult:
    """The served state read again (None: the store knows nothing of the item; nothing to
    compare). A clean audit doubles the interval to the next, up to AUDIT_MAX_MS; a gap makes
    the next one come after `audit_ms`."""
    touched = state.get("touched")
    state["audit_at"] = None
    if served is None:
        result = ReconcileResult(state)
    else:
        result = on_visibility(state, served, now, sla_ms)
        state["touched"] = touched  # an audit is not an input: it keeps nothing alive
    every = int(state.get("audit_every") or audit_ms)
    state["audit_every"] = min(AUDIT_MAX_MS, every * 2) if agree(state) else audit_ms
    _arm_audit(state, now, state["audit_every"], result)
    return result


def _arm_audit(state: State, now: int, every_ms: int, result: ReconcileResult) -> None:
    if every_ms > 0 and state["desired"] is not None and state.get("audit_at") is None:
        state["audit_at"] = now + every_ms
        result.timers.append(state["audit_at"])


def _settle(state: State, now: int, sla_ms: int, audit_ms: int = 0) -> ReconcileResult:
    result = ReconcileResult(state)
    state["touched"] = now
    if state.get("expires") is None:
        state["expires"] = now + STATE_TTL_MS
        result.timers.append(state["expires"])
    _arm_audit(state, now, audit_ms, result)
    if agree(state):
        if state["desired"] is not None and not state.get("enforced"):
            result.lag_ms = max(0, now - state["desired"]["received"])
            state["enforced"] = True
        state["since"], state["attempts"], state["alerted"] = None, 0, False
        return result
    state["enforced"] = False
    result.open = True
    if state["since"] is None:
        state["since"] = now
        result.timers.append(now + sla_ms)
    return result


def on_timer(state: State | None, now: int, sla_ms: int, max_retries: int) -> ReconcileResult:
    """The SLA ran out (or a repair's SLA did): retry, or alert after `max_retries`."""
    state = state or new_state()
    result = ReconcileResult(state)
    expires = state.get("expires")
    if expires is not None and now >= expires:
        idle_until = int(state.get("touched", now)) + STATE_TTL_MS
        if now >= idle_until and (agree(state) or state["alerted"]):
            result.state = None
            return result
        # Input came since: at its TTL; a gap still being repaired: after its next SLA period.
        state["expires"] = idle_until if idle_until > now else now + sla_ms
        result.timers.append(state["expires"])
    if agree(state) or state["since"] is None:
        return result
    result.open = True
    age = now - state["since"]
    if age < sla_ms:
        result.timers.append(state["since"] + sla_ms)
        return result
    desired, effective = state["desired"], state["effective"] or {}
    if state["attempts"] >= max_retries:
        if not state["alerted"]:
            state["alerted"] = True
            result.outputs.append(_discrepancy(desired, effective, age, "alert", now))
        return result
    state["attempts"] += 1
    result.outputs.append(_discrepancy(desired, effective, age, "retry", now))
    original = desired["action_id"]
    repair = {k: v for k, v in desired.items() if k != "received"}
    repair["action_id"] = hashlib.sha256(
        f"{original}|repair|{state['attempts']}|{state['since']}".encode()
    ).hexdigest()
    repair["repair_of"] = original
    result.outputs.append(("enforcement.repairs", desired["content_id"], repair))
    result.timers.append(now + sla_ms)
    return result


def _discrepancy(
    desired: dict[str, Any], effective: dict[str, Any], age_ms: int, action: str, now: int
) -> Output:
    return (
        "moderation.discrepancies",
        desired["content_id"],
        {
            "content_id": desired["content_id"],
            "content_version": desired["content_version"],
            "desired_visibility": desired["visibility"],
            "effective_visibility": effective.get("visibility", "pending"),
            "decision_revision": desired["decision_revision"],
            "age_ms": age_ms,
            "action": action,
            "ts": now,
        },
    )
