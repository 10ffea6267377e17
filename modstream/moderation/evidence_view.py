"""The evidence view of one content version: the detector results joined per (detector,
segment), complete or not, and whether its deadline passed with evidence missing (then the
missing is UNKNOWN: modstream/moderation/rules/deadline.py states the rule). What the
policy evaluates (modstream/moderation/verdict.py), what a deadline waits for
(`rules.deadline.postponed`) and what a provisional expiry checks (`rules.provisional`) all read
it here. Emits nothing and decides nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any

from modstream.moderation.state import Evidence, State, uploaded
from modstream.policy.evaluate import CompiledPolicy, EvidenceView, Verdict
from modstream.scanning import plan as scan_plan
from modstream.scanning.plan import required as _required
from modstream.scanning.plan import segment as _segment


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


def incomplete(completeness: dict[str, Any]) -> bool:
    return completeness["received"] < completeness["required"] or bool(completeness["unknown"])


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
