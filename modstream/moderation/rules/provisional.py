"""Provisional is not forever: a PROVISIONAL_ALLOW that reaches its `expires_ts` with evidence
still incomplete or unknown is decided again, and stays floored until its evidence completes.

Contract: docs/CONTRACT.md, "v1.1 additions", "Provisional is not forever": "When a
PROVISIONAL_ALLOW reaches its `expires_ts` while evidence is still incomplete or unknown, the
version is decided again at that time (`trigger: deadline`, state `expired`) with the policy's
`unknown.high_risk` outcome (PENDING when absent), and a review task in queue `provisional` is
opened." Also "Quiet time" (an expiry reached while catching up waits for live event time).

Proved by:
    tests/operators/test_moderation.py::test_a_provisional_allow_expiring_with_evidence_missing_is_decided_again
    tests/operators/test_moderation.py::test_a_provisional_expiry_reached_while_catching_up_waits_for_live_time
    tests/operators/test_moderation.py::test_after_its_expiry_a_version_stays_floored_until_its_evidence_completes
    tests/operators/test_moderation.py::test_the_expiry_outcome_is_the_policys_unknown_high_risk_outcome
    tests/operators/test_moderation.py::test_an_expiry_whose_outcome_is_provisional_again_never_re_arms
    tests/operators/test_moderation.py::test_a_provisional_allow_whose_evidence_completed_is_not_touched
    tests/operators/test_moderation.py::test_unknown_evidence_at_the_expiry_is_decided_again
    tests/operators/test_timers.py::test_an_expiry_reached_while_the_deadline_waits_comes_after_it_as_in_replay

The whole rule: tracked on every revision (`track_expiry`), armed one timer at a time
(`arm_expiry`), fired (`fire`, from modstream/moderation/step.py `on_timer`), waiting for a
deadline before it or for live time (`expire_provisional`), and the floor every later evaluation
keeps (`floor`, applied by modstream/moderation/verdict.py `evaluate`). It decides through the
`decide` it is handed (modstream/moderation/decide.py, which calls `track_expiry` and, through
`evaluate`, `floor`: handed in, so no import goes round in a ring).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from modstream.moderation.evidence_view import Evaluation, incomplete, read_evidence
from modstream.moderation.state import Context, Output, State, StepResult
from modstream.policy.evaluate import CompiledPolicy, ReviewAsk, Verdict, most_severe

# A PROVISIONAL_ALLOW that reaches its `expires_ts` with evidence still incomplete or unknown
# is decided again (contract v1.1) and a reviewer looks, in this queue at this priority.
PROVISIONAL_QUEUE = "provisional"
PROVISIONAL_PRIORITY = 2
PROVISIONAL_REASON = "provisional_expired"

# modstream/moderation/decide.py `decide` (state, ctx, ts, trigger): how a rule below it decides.
Decide = Callable[[State, Context, int, str], list[Output]]


def track_expiry(state: State, decision: dict[str, Any]) -> None:
    """Remember the `expires_ts` of the PROVISIONAL_ALLOW now in force (the latest revision's,
    as the Content Service sees it), or forget it when a revision leaves PROVISIONAL_ALLOW. A
    human's outcome is sticky and a version decided again at its expiry is never armed again.
    Called by every revision (modstream/moderation/decide.py); `arm_expiry` arms its timer."""
    provisional = decision["outcome"] == "PROVISIONAL_ALLOW" and "expires_ts" in decision
    if provisional and state.human is None and not state.provisional_expired:
        state.expiry = decision["expires_ts"]
    else:
        state.expiry = None


def arm_expiry(state: State) -> list[int]:
    """The timer for the provisional expiry in force: one armed at a time, as for the TTL. A
    later expiry waits for the armed timer, which re-arms it when it fires (`on_timer`)."""
    expiry, armed = state.expiry, state.expiry_timer
    if expiry is None or (armed is not None and armed <= expiry):
        return []
    state.expiry_timer = expiry
    return [expiry]


def fire(state: State, ts: int, ctx: Context, result: StepResult, decide: Decide) -> None:
    """The provisional expiry timer, if due at `ts`: decided, re-armed or left to wait."""
    armed = state.expiry_timer
    if armed is not None and ts >= armed:
        expiry = expire_provisional(state, ts, ctx, decide)
        result.outputs += expiry.outputs
        result.timers += expiry.timers


def expire_provisional(state: State, ts: int, ctx: Context, decide: Decide) -> StepResult:
    """The provisional expiry timer fired: decide again (contract v1.1, trigger `deadline`)
    when the PROVISIONAL_ALLOW in force reached its `expires_ts` with evidence incomplete or
    unknown; re-arm for a later `expires_ts`; else nothing (complete evidence is not touched).
    `provisional_expired` is set once, so the chain ends with this firing."""
    result = StepResult(state)
    state.expiry_timer = None
    expiry = state.expiry
    if expiry is None or state.deleted or state.content is None:
        return result
    if ts < expiry:
        result.timers += arm_expiry(state)
        return result
    policy = ctx.resolution.decide
    _, completeness, _, _ = read_evidence(state, policy, ts)
    if state.human is not None or not incomplete(completeness):
        state.expiry = None
        return result
    if state.deadline_timer is not None and state.deadline is not None and state.deadline <= expiry:
        # The deadline before this expiry still waits for the detectors: it decides first, as
        # in replay, and arms the expiry then in force when it does (`on_timer`). Left to its
        # own shorter wait, the fast gate's expiry decided first and the deadline's revision
        # never came (issue 32).
        return result
    if ctx.clock_ms is not None and ts < ctx.clock_ms - ctx.live_window_ms:
        # Reached while the job catches up on a backlog: the evidence it is reading may complete
        # the version. Looked at again once event time is live (contract v1.1, "Quiet time": a
        # backfill must not expire everything at once).
        state.expiry_timer = ctx.clock_ms + ctx.evidence_grace_ms
        result.timers.append(state.expiry_timer)
        return result
    state.expiry = None
    state.provisional_expired = True
    result.outputs += decide(state, ctx, expiry, "deadline")
    return result


def floor(state: State, evaluation: Evaluation, policy: CompiledPolicy | None) -> Evaluation:
    """After its PROVISIONAL_ALLOW expired, a version whose evidence is still incomplete or
    unknown stays at the policy's `unknown.high_risk` outcome (or anything more severe the
    policy now says), state `expired`, with a review in queue `provisional`: a later report or
    re-evaluation must not publish it again on the same missing evidence. A human decision, a
    failed limit or complete evidence decide as usual."""
    verdict = evaluation.verdict
    if (
        policy is None
        or state.human is not None
        or verdict.limit_failed
        or not incomplete(evaluation.completeness)
    ):
        return evaluation
    floor = policy.document.unknown.high_risk
    outcome = most_severe([floor, verdict.outcome]) or floor
    kept = outcome == verdict.outcome
    reasons = tuple(r for r in verdict.reasons if kept and r != PROVISIONAL_REASON)
    ask = ReviewAsk(PROVISIONAL_QUEUE, PROVISIONAL_PRIORITY, PROVISIONAL_REASON)
    floored = Verdict(
        outcome,
        verdict.restriction if kept else None,
        (*reasons, PROVISIONAL_REASON),
        verdict.matched_rules,
        (*verdict.review, ask),
        # `provisional_expired` keeps a floor of PROVISIONAL_ALLOW from ever re-arming.
        verdict.expires_ts if outcome == "PROVISIONAL_ALLOW" else None,
        verdict.limit_failed,
    )
    return Evaluation(
        floored, evaluation.view, evaluation.completeness, evaluation.results, expired=True
    )
