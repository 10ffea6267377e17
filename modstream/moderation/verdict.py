"""What the policy says about one content version now: the evidence view (joined, complete or
not, past its deadline or not), the evaluation under a policy, the state name a decision
carries, and the floor a version keeps once its PROVISIONAL_ALLOW expired.

Emits nothing: what a decision emits, and when, is modstream/moderation/decide.py's.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cached_property
from typing import Any

from modstream.moderation.state import Context, Evidence, State, uploaded
from modstream.policy.evaluate import (
    CompiledPolicy,
    EvidenceView,
    ReviewAsk,
    Verdict,
    most_severe,
)
from modstream.scanning import plan as scan_plan
from modstream.scanning.plan import required as _required
from modstream.scanning.plan import segment as _segment

HUMAN_STATE = {
    "BLOCK": "blocked",
    "RESTRICT": "restricted",
    "ALLOW": "approved",
    "PROVISIONAL_ALLOW": "approved",
    "PENDING": "pending_review",
}
# A PROVISIONAL_ALLOW that reaches its `expires_ts` with evidence still incomplete or unknown
# is decided again (contract v1.1) and a reviewer looks, in this queue at this priority.
PROVISIONAL_QUEUE = "provisional"
PROVISIONAL_PRIORITY = 2
PROVISIONAL_REASON = "provisional_expired"


def read_evidence(
    state: State, policy: CompiledPolicy | None, ts: int, hash_matches: frozenset[str] = frozenset()
) -> tuple[EvidenceView, dict[str, Any], list[Evidence], bool]:
    """The evidence view for `policy`, the completeness record, the results read (in
    evidence-key order; `provenance_of` cites them), and whether the deadline has passed with
    evidence still missing (state `expired`). Detectors cost ordering never asked
    (modstream/scanning/plan.py) are not waited for: UNKNOWN at once."""
    content = uploaded(state)
    segments = content.segments
    required = _required(policy, content.modality)
    wanted = {(d, s) for d in required for s in range(segments)}
    received, failed, scores, results = _results(state, wanted, segments)
    absent = {detector for detector, _ in wanted - received}
    missing = absent - scan_plan.unasked(state)
    unasked = absent & scan_plan.unknown_unasked(state, policy, hash_matches)
    # Passed: reached by `ts`, or already decided (an input stamped before the deadline but
    # applied after it, as a report batch at its window's end is, does not reopen scanning).
    passed = state.deadline is not None and (ts >= state.deadline or state.deadline_decided)
    expired = (
        bool(missing)
        and passed
        and state.deadline_timer is None  # a deadline still waiting has not passed
    )
    best, broken = scores
    view = EvidenceView(
        scores=best,
        unknown=frozenset(broken | failed | unasked | (missing if expired else set())),
        outstanding=bool(missing) and not expired,
        checked=True,
    )
    completeness = {
        "required": len(wanted),
        "received": len(received),
        "unknown": sorted(view.unknown),
    }
    return view, completeness, results, expired


Scores = tuple[dict[tuple[str, str], float], set[str]]  # (detector, label) -> best; broken


def _results(
    state: State, wanted: set[tuple[str, int]], segments: int
) -> tuple[set[tuple[str, int]], set[str], Scores, list[Evidence]]:
    """The stored detector results in evidence-key order, in one pass: the wanted (detector,
    segment) pairs they answer, the detectors that failed, the best score of each (detector,
    label) over segments and model versions with the detectors whose scores are not numbers in
    [0, 1] (`EvidenceView.from_segments`'s reading), and the results read, in that order (the
    provenance, built only for a decision that is emitted: `Evaluation.provenance`). Two results
    of a detector for one (segment, model version), which only a state from before issue 12 can
    hold, are read as before: the later key's scores alone (`_overwritten`)."""
    received: set[tuple[str, int]] = set()
    failed: set[str] = set()
    best: dict[tuple[str, str], float] = {}
    broken: set[str] = set()
    taken: set[tuple[str, Any, Any]] = set()
    overwritten = False
    evidence = state.evidence
    ordered = [evidence[key] for key in sorted(evidence)]
    # `scan_plan.segment`, inlined: a single-segment version reads segment None as 0.
    single = segments == 1
    for result in ordered:
        detector = result.detector
        segment = result.segment_id
        if single and (segment is None or segment == 0):
            segment = 0
        if segment is None:
            received.update((detector, s) for s in range(segments) if (detector, s) in wanted)
        elif (detector, segment) in wanted:
            received.add((detector, segment))
        if result.status != "ok":
            failed.add(detector)
            continue
        slot = (detector, segment, result.model_version)
        if slot in taken:
            overwritten = True
        taken.add(slot)
        if result.scores:
            _take_scores(detector, result.scores, best, broken)
    scores_read = _overwritten(state) if overwritten else (best, broken)
    return received, failed, scores_read, ordered


def _take_scores(
    detector: str, scores: dict[str, Any], best: dict[tuple[str, str], float], broken: set[str]
) -> None:
    """One result's scores into the best per (detector, label); a value that is not a number in
    [0, 1] (`policy.is_score`, inlined: the range excludes NaN and inf) breaks its detector."""
    for label, value in scores.items():
        if isinstance(value, int | float) and not isinstance(value, bool) and 0.0 <= value <= 1.0:
            key = (detector, label)
            if value > best.get(key, -1.0):
                best[key] = float(value)
        else:
            broken.add(detector)


def provenance_of(results: list[Evidence]) -> list[dict[str, Any]]:
    """What a decision cites of the results it was made on, in evidence-key order, with the
    language a result named (modstream/moderation/language.py) where it named one, and when in the
    media a reader's best finding is (`finding_ms`) where it has a time."""
    cited = []
    for result in results:
        entry: dict[str, Any] = {
            "detector": result.detector,
            "model_version": result.model_version,
            "segment_id": result.segment_id,
            "evidence_ref": result.evidence_ref,
        }
        if result.language is not None:
            entry["language"] = result.language
        if result.finding_ms is not None:
            entry["finding_ms"] = result.finding_ms
        cited.append(entry)
    return cited


def _overwritten(state: State) -> Scores:
    """Scores per (segment, model version), a later key's replacing an earlier one's, then the
    best over them: how the evidence was read before it was read in one pass."""
    per_segment: dict[str, dict[Any, dict[str, Any]]] = {}
    evidence = state.evidence
    for key in sorted(evidence):
        result = evidence[key]
        if result.status == "ok":
            segment = _segment(state, result.segment_id)
            per_segment.setdefault(result.detector, {})[(segment, result.model_version)] = (
                result.scores or {}
            )
    view = EvidenceView.from_segments(per_segment)
    return dict(view.scores), set(view.unknown)


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


@dataclass(frozen=True)
class Evaluation:
    """One policy's verdict on the version and the evidence view it was made on."""

    verdict: Verdict
    view: EvidenceView
    completeness: dict[str, Any]
    results: list[Evidence]  # the detector results read, in evidence-key order
    expired: bool

    @cached_property
    def provenance(self) -> list[dict[str, Any]]:
        """The decision's `evidence`: made only for a decision or task that is emitted."""
        return provenance_of(self.results)


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
        verdict = replace(
            verdict,
            restriction=_human_restriction(state, verdict),
            reasons=_human_reasons(human.reason, policy),
        )
    evaluation = Evaluation(
        verdict, view, completeness, results, expired and not verdict.limit_failed
    )
    if state.provisional_expired and not fast_gate:
        evaluation = _provisional_floor(state, evaluation, policy)
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


def incomplete(completeness: dict[str, Any]) -> bool:
    return completeness["received"] < completeness["required"] or bool(completeness["unknown"])


def _provisional_floor(
    state: State, evaluation: Evaluation, policy: CompiledPolicy | None
) -> Evaluation:
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
    floored = replace(
        verdict,
        outcome=outcome,
        restriction=verdict.restriction if kept else None,
        reasons=(*reasons, PROVISIONAL_REASON),
        review=(*verdict.review, ask),
        # `provisional_expired` keeps a floor of PROVISIONAL_ALLOW from ever re-arming.
        expires_ts=verdict.expires_ts if outcome == "PROVISIONAL_ALLOW" else None,
    )
    return replace(evaluation, verdict=floored, expired=True)
