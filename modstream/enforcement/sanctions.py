"""Account sanctions for authors: strikes in the policy's window, sanctions at thresholds,
reversal when a human overturns the decision that caused a strike.

Contract: docs/CONTRACT.md, "account.actions (exactly once; sanctions on the author)": "One
offense is one strike, however often it is retried, duplicated or re-decided: `action_id` is hex
sha256 of `user_id|content_id|policy_id|violation_day` (the UTC day of the decision's `ts`), and
a repeat of that id changes nothing. When a review or appeal overturns the decision that caused
a strike, a `strike_reversed` follows, and any sanction that no longer holds is lifted."

Proved by:
    tests/operators/test_sanctions.py::test_a_violation_is_one_strike_with_the_contract_intent_id
    tests/operators/test_sanctions.py::test_the_same_violation_decided_again_and_again_is_one_strike
    tests/operators/test_sanctions.py::test_thresholds_bring_sanctions_and_an_overturn_reverses_and_lifts
    tests/operators/test_sanctions.py::test_any_sequence_of_redecisions_of_one_violation_is_one_strike
    tests/operators/test_moderation.py::test_offenses_and_human_decisions_go_to_the_authors_sanctions

Runs keyed by `author_id`, after the per-version step, on the decisions it emitted (each with
the deciding policy's `strikes` section). Pure Python over plain dict state; the Flink adapter
(modstream/jobs/moderation/sanctions.py) buffers decisions by the time the step emitted them and
hands each time's to `on_decisions`, which applies them in a deterministic order (`decision_order`),
so a replay gives the same account actions whatever the parallelism.

One offense is one strike: the strike's `action_id` is sha256 of
`user_id|content_id|policy_id|violation_day` (the contract's intent id), a repeat of that id
changes nothing, and while a content item has an active strike no later decision about it
(retry, duplicate, re-evaluation, a new version) adds another. docs/moderation.md.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from modstream.core.ids import sha256_hex

DAY_MS = 86_400_000
# Outcomes that are an offense when a reason is one of the policy's strike reasons.
VIOLATING_OUTCOMES = ("BLOCK", "RESTRICT")
# Triggers whose decision can overturn a strike: a human review or an appeal.
HUMAN_TRIGGERS = ("review", "appeal")

State = dict[str, Any]
Output = tuple[str, str, dict[str, Any]]


def strike_id(user_id: str, content_id: str, policy_id: str, ts: int) -> str:
    """The contract's intent id of one offense: the UTC day of the decision's `ts`."""
    return sha256_hex(user_id, content_id, policy_id, ts // DAY_MS)


@dataclass
class SanctionResult:
    state: State | None
    outputs: list[Output] = field(default_factory=list)
    timers: list[int] = field(default_factory=list)


def new_state() -> State:
    return {"strikes": [], "sanctions": {}, "seen": []}


def _active(state: State, ts: int, window_ms: int) -> list[dict[str, Any]]:
    return [
        strike
        for strike in state["strikes"]
        if strike["active"] and ts - window_ms < strike["ts"] <= ts
    ]


def _record(
    action_id: str,
    user_id: str,
    sanction: str,
    decision: dict[str, Any],
    reason: str,
    strike_count: int,
    expires_ts: int | None = None,
) -> Output:
    record: dict[str, Any] = {
        "action_id": action_id,
        "user_id": user_id,
        "sanction": sanction,
        "content_id": decision["content_id"],
        "content_version": decision["content_version"],
        "decision_revision": decision["decision_revision"],
        "policy_version": decision["policy_version"],
        "reason": reason,
        "strike_count": strike_count,
        "ts": decision["ts"],
    }
    if expires_ts is not None:
        record["expires_ts"] = expires_ts
    return ("account.actions", decision["content_id"], record)


def on_decision(
    state: State | None, user_id: str, decision: dict[str, Any], strikes: dict[str, Any] | None
) -> SanctionResult:
    """Apply one decision about `user_id`'s content. `strikes` is the deciding policy's
    `strikes` section (None: the policy gives no strikes, though overturns still reverse)."""
    state = state or new_state()
    result = SanctionResult(state)
    ts = int(decision["ts"])
    window_ms = int(strikes["window_days"]) * DAY_MS if strikes else 90 * DAY_MS
    cid = decision["content_id"]
    standing = next((s for s in state["strikes"] if s["active"] and s["content_id"] == cid), None)
    strike_reasons = [r for r in decision["reasons"] if strikes and r in strikes["reasons"]]
    violation = decision["outcome"] in VIOLATING_OUTCOMES and bool(strike_reasons)
    if violation and strikes is not None:
        action_id = strike_id(user_id, cid, decision["policy_id"], ts)
        if standing is None and action_id not in state["seen"]:
            _strike(result, user_id, decision, action_id, strike_reasons[0], strikes, window_ms)
    elif (
        standing is not None
        and decision["trigger"] in HUMAN_TRIGGERS
        and decision["content_version"] == standing["content_version"]
        and not violation
    ):
        _reverse(result, user_id, decision, standing, window_ms)
    return _expire(result, ts, window_ms)


def _strike(
    result: SanctionResult,
    user_id: str,
    decision: dict[str, Any],
    action_id: str,
    reason: str,
    strikes: dict[str, Any],
    window_ms: int,
) -> None:
    """A new strike for one offense, and the sanctions its count reaches (`strikes.sanctions`)."""
    state = result.state
    assert state is not None
    ts = int(decision["ts"])
    state["seen"].append(action_id)
    state["strikes"].append(
        {
            "id": action_id,
            "content_id": decision["content_id"],
            "content_version": decision["content_version"],
            "ts": ts,
            "reason": reason,
            "active": True,
        }
    )
    count = len(_active(state, ts, window_ms))
    result.outputs.append(_record(action_id, user_id, "strike", decision, reason, count))
    for sanction in strikes.get("sanctions", []):
        if count != sanction["at"]:
            continue
        duration = sanction.get("duration_ms")
        expires = ts + duration if duration else None
        sanction_id = sha256_hex(action_id, sanction["sanction"], sanction["at"])
        state["sanctions"][sanction["sanction"]] = {
            "id": sanction_id,
            "at": sanction["at"],
            "expires": expires,
        }
        result.outputs.append(
            _record(sanction_id, user_id, sanction["sanction"], decision, reason, count, expires)
        )


def _reverse(
    result: SanctionResult,
    user_id: str,
    decision: dict[str, Any],
    standing: dict[str, Any],
    window_ms: int,
) -> None:
    """A human overturned the decision behind the standing strike: reverse it, and lift the
    sanctions in force that the lower count no longer reaches."""
    state = result.state
    assert state is not None
    ts = int(decision["ts"])
    standing["active"] = False
    count = len(_active(state, ts, window_ms))
    result.outputs.append(
        _record(
            sha256_hex(standing["id"], "strike_reversed"),
            user_id,
            "strike_reversed",
            decision,
            standing["reason"],
            count,
        )
    )
    for name, sanction in sorted(state["sanctions"].items()):
        in_force = sanction["expires"] is None or sanction["expires"] > ts
        if in_force and count < sanction["at"]:
            del state["sanctions"][name]
            result.outputs.append(
                _record(
                    sha256_hex(sanction["id"], "sanction_lifted"),
                    user_id,
                    "sanction_lifted",
                    decision,
                    "strike_reversed",
                    count,
                )
            )


def decision_order(entry: dict[str, Any]) -> tuple[Any, ...]:
    """Where a buffered decision goes among those emitted at the same time: (ts, content,
    version, revision), so the result does not depend on how subtasks interleave."""
    decision = entry["decision"]
    return (
        decision["ts"],
        decision["content_id"],
        decision["content_version"],
        decision["decision_revision"],
    )


def on_decisions(
    state: State | None, user_id: str, entries: list[dict[str, Any]]
) -> tuple[SanctionResult, list[tuple[dict[str, Any], Exception]]]:
    """Apply the decisions emitted at one time (each entry: `decision` and its policy's
    `strikes`) in `decision_order`. A decision whose step raises (hostile input, a bug) leaves
    the state as it was before it and comes back with its error, for the DLQ; the others
    apply. Outputs add up; the timers are those of the last decision applied (the state's one)."""
    outputs: list[Output] = []
    timers: list[int] = []
    failed: list[tuple[dict[str, Any], Exception]] = []
    for entry in sorted(entries, key=decision_order):
        before = json.dumps(state)
        try:
            result = on_decision(state, user_id, entry["decision"], entry["strikes"])
        except Exception as error:  # this decision only: the rest of the batch applies
            state = json.loads(before)
            failed.append((entry["decision"], error))
            continue
        state, outputs, timers = result.state, outputs + result.outputs, result.timers
    return SanctionResult(state, outputs, timers), failed


def _expire(result: SanctionResult, ts: int, window_ms: int) -> SanctionResult:
    """Forget strikes that left the window and sanctions that ended; clear an empty state.

    The one timer armed is when the last strike or timed sanction ends, always after `ts`.
    A state left with only sanctions without end (a permanent account suspension) arms none:
    nothing in it can expire, and a timer re-armed every window would, once event time jumps
    to the end of input (replay, a backfill's end), fire about a billion times.
    """
    state = result.state
    assert state is not None
    state["strikes"] = [s for s in state["strikes"] if s["ts"] > ts - window_ms]
    kept = {s["id"] for s in state["strikes"]}
    state["seen"] = [action_id for action_id in state["seen"] if action_id in kept]
    state["sanctions"] = {
        name: s
        for name, s in state["sanctions"].items()
        if s["expires"] is None or s["expires"] > ts
    }
    if not state["strikes"] and not state["sanctions"]:
        result.state = None
        return result
    horizon = [s["ts"] + window_ms for s in state["strikes"]]
    horizon += [s["expires"] for s in state["sanctions"].values() if s["expires"] is not None]
    state["window_ms"] = window_ms
    end = max(horizon, default=None)
    if end is not None and end > ts:  # never at or before the time now firing
        result.timers.append(end)
    return result


def on_timer(state: State | None, ts: int) -> SanctionResult:
    """The author's strikes and sanctions have all aged out by `ts`: clear the state.
    An account suspension without `duration_ms` has no end and keeps the state, with no timer
    (only a human overturn, an input, lifts it)."""
    if state is None:
        return SanctionResult(None)
    return _expire(SanctionResult(state), ts, int(state.get("window_ms", 90 * DAY_MS)))
