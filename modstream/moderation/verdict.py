"""What the policy says about one content version now: the evaluation under a policy (on the
evidence view of modstream/moderation/evidence_view.py), a human's reasons and restriction, the
state name a decision carries, and the floor a version keeps once its PROVISIONAL_ALLOW expired
(modstream/moderation/rules/provisional.py `floor`).

Emits nothing: what a decision emits, and when, is modstream/moderation/decide.py's.
"""

from __future__ import annotations

from modstream.moderation.evidence_view import Evaluation, read_evidence
from modstream.moderation.rules import provisional
from modstream.moderation.state import Context, State
from modstream.policy.evaluate import CompiledPolicy, EvidenceView, Verdict
from modstream.scanning import plan as scan_plan

HUMAN_STATE = {
    "BLOCK": "blocked",
    "RESTRICT": "restricted",
    "ALLOW": "approved",
    "PROVISIONAL_ALLOW": "approved",
    "PENDING": "pending_review",
}


def state_name(state: State, verdict: Verdict, view: EvidenceView, expired: bool) -> str:
    """The decision's `state`, the first that applies: a delete, a failed limit and a human
    outcome before anything the evidence says."""
    if state.deleted:
        return "deleted"
    if verdict.limit_failed:
        return "failed"
    if state.human is not None:
        return HUMAN_STATE[verdict.outcome]
    if expired:
        return "expired"
    if verdict.outcome == "BLOCK":
        return "blocked"
    if state.open_tasks:
        return "pending_review"
    if view.outstanding:
        return "scanning"
    return {"RESTRICT": "restricted", "PENDING": "pending_review"}.get(verdict.outcome, "approved")


def evaluate(
    state: State, policy: CompiledPolicy | None, ctx: Context, ts: int, fast_gate: bool = False
) -> Evaluation:
    """The verdict of `policy` (the fast gate's on the upload alone, when `fast_gate`), with a
    human's reasons and restriction, and the provisional floor once an expiry decided."""
    view, completeness, results, expired = read_evidence(state, policy, ts, ctx.hash_matches)
    facts = scan_plan.facts(state)
    human = state.human
    # The reviewer's free text never reaches the policy: `reasons` are built below.
    human_outcome = (human.outcome, None) if human else None
    if policy is None:
        verdict = Verdict("PENDING", None, ("no_policy",), (), (), None)
    elif fast_gate:
        # The gate waits for no model: the state is `scanning` unless the gate decided. It is
        # made on the upload alone, so evidence read before it (stamped earlier) does not show:
        # the same fast gate whichever was read first (`tests/integration/test_backlog.py`).
        view = EvidenceView(outstanding=bool(completeness["required"]))
        completeness = {**completeness, "received": 0, "unknown": []}
        results = []
        verdict = policy.fast_gate(
            facts,
            ts=ts,
            hash_matches=ctx.hash_matches,
            human_outcome=human_outcome,
            paused=ctx.resolution.paused,
        )
    else:
        verdict = policy.evaluate(
            facts,
            view,
            ts=ts,
            hash_matches=ctx.hash_matches,
            human_outcome=human_outcome,
            paused=ctx.resolution.paused,
        )
    if human is not None:
        verdict = Verdict(
            verdict.outcome,
            _human_restriction(state, verdict),
            _human_reasons(human.reason, policy),
            verdict.matched_rules,
            verdict.review,
            verdict.expires_ts,
            verdict.limit_failed,
        )
    evaluation = Evaluation(
        verdict, view, completeness, results, expired and not verdict.limit_failed
    )
    if state.provisional_expired and not fast_gate:
        evaluation = provisional.floor(state, evaluation, policy)
    return evaluation


def _human_restriction(state: State, verdict: Verdict) -> str | None:
    """A review record names no restriction: a reviewer's RESTRICT keeps the restriction in
    force (an age gate confirmed stays an age gate), so nothing changes for the Content Service."""
    last = state.last_decision
    if verdict.outcome == "RESTRICT" and verdict.restriction is None:
        return last.restriction if last is not None and last.outcome == "RESTRICT" else None
    return verdict.restriction


def _human_reasons(reason: str | None, policy: CompiledPolicy | None) -> tuple[str, ...]:
    """A human decision's reason codes (contract v1.1): `human_review`, plus the reviewer's
    `reason` only when it is one of the policy's rule reasons. Anything else a reviewer writes
    is free text: it never becomes a code, so it never reaches a notification either."""
    rule_reasons = policy.rule_reasons if policy else frozenset()
    if reason is not None and reason in rule_reasons and reason != "human_review":
        return ("human_review", reason)
    return ("human_review",)
