"""The evidence view of one content version: the detector results joined per (detector,
segment), complete or not, and whether its deadline passed with evidence missing (then the
missing is UNKNOWN: modstream/moderation/rules/deadline.py states the rule). What the
policy evaluates (modstream/moderation/verdict.py), what a deadline waits for
(`rules.deadline.postponed`) and what a provisional expiry checks (`rules.provisional`) all read
it here. Emits nothing and decides nothing.
"""

from __future__ import annotations

from typing import Any, Final

from modstream.core.values import Value
from modstream.moderation.state import DetectorTally, Evidence, State, uploaded
from modstream.moderation.tally import answered_segments, counted_tally, score_of
from modstream.policy.evaluate import CompiledPolicy, EvidenceView, Verdict
from modstream.scanning import plan as scan_plan
from modstream.scanning.plan import segment as _segment


def read_evidence(
    state: State, policy: CompiledPolicy | None, ts: int, hash_matches: frozenset[str] = frozenset()
) -> tuple[EvidenceView, dict[str, Any], list[Evidence], bool]:
    """The evidence view for `policy`, the completeness record, the results read (in
    evidence-key order; `provenance_of` cites them), and whether the deadline has passed with
    evidence still missing (state `expired`). Detectors cost ordering never asked
    (modstream/scanning/plan.py) are not waited for: UNKNOWN at once. Wanted: every (required
    detector, segment) pair; counted per detector (`_results`), never built as pairs, since a
    video's evidence is read again after each of its results."""
    content = uploaded(state)
    segments = content.segments
    required = policy.required_detectors(content.modality) if policy else ()
    tally = counted_tally(state)
    if tally is not None:
        answered, failed, scores, results = _tallied(state, tally, required, segments)
    else:  # not kept, or not of these results (the state was edited around the rule): walk them
        answered, failed, scores, results = _results(state, required, segments)
    absent = {detector for detector, got in answered.items() if got < segments}
    missing = absent - scan_plan.unasked(state) if absent else absent
    # Passed: reached by `ts`, or already decided (an input stamped before the deadline but
    # applied after it, as a report batch at its window's end is, does not reopen scanning).
    passed = state.deadline is not None and (ts >= state.deadline or state.deadline_decided)
    expired = (
        bool(missing)
        and passed
        and state.deadline_timer is None  # a deadline still waiting has not passed
    )
    best, unknown = scores  # `unknown`: the broken detectors, a set of this read's own
    unknown |= failed
    if absent:
        unknown |= absent & scan_plan.unknown_unasked(state, policy, hash_matches)
    if expired:
        unknown |= missing
    view = EvidenceView(
        scores=best,
        unknown=frozenset(unknown),
        outstanding=bool(missing) and not expired,
        checked=True,
    )
    completeness = {
        "required": len(answered) * segments if segments > 0 else 0,
        "received": sum(answered.values()),
        "unknown": sorted(unknown),
    }
    return view, completeness, results, expired


Scores = tuple[dict[tuple[str, str], float], set[str]]  # (detector, label) -> best; broken


def _tallied(
    state: State, tally: dict[str, DetectorTally], required: tuple[str, ...], segments: int
) -> tuple[dict[str, int], set[str], Scores, list[Evidence]]:
    """What `_results` reads, from the tally kept as the results were stored (`tally.add_to_tally`):
    the same figures, without walking the results (only their order, for the provenance)."""
    answered = {detector: answered_segments(tally.get(detector), segments) for detector in required}
    failed = {detector for detector, kept in tally.items() if kept.failed}
    broken = {detector for detector, kept in tally.items() if kept.broken}
    best = {
        (detector, label): value
        for detector, kept in tally.items()
        for label, value in kept.best.items()
    }
    return answered, failed, (best, broken), _in_key_order(state.evidence)


def _in_key_order(evidence: dict[str, Evidence]) -> list[Evidence]:
    """The stored results in evidence-key order: the order a decision cites them in."""
    return [evidence[key] for key in sorted(evidence)]  # compiled: no Python call per key


def _results(
    state: State, required: tuple[str, ...], segments: int
) -> tuple[dict[str, int], set[str], Scores, list[Evidence]]:
    """The stored detector results in evidence-key order, in one pass: how many segments of each
    required detector they answer (in range), the detectors that failed, the best score of each
    (detector, label) over segments and model versions with the detectors whose scores are not
    numbers in [0, 1] (`EvidenceView.from_segments`'s reading), and the results read, in that
    order (the provenance, built only for a decision that is emitted: `Evaluation.provenance`).
    Two results of a detector for one (segment, model version), which only a state from before
    issue 12 can hold, are read as before: the later key's scores alone (`_overwritten`)."""
    answered: dict[str, set[int]] = {detector: set() for detector in required}
    failed: set[str] = set()
    scored: list[tuple[str, dict[str, Any]]] = []  # (detector, scores) of the `ok` results
    taken: set[tuple[str, Any, Any]] = set()
    kept = 0  # `ok` results: more than `taken` holds when two share a slot
    evidence = state.evidence
    if not evidence:  # the fast gate's read: nothing stored yet
        return dict.fromkeys(required, 0), set(), ({}, set()), []
    ordered = _in_key_order(evidence)
    # `scan_plan.segment`, inlined: a single-segment version reads segment None as 0.
    single = segments == 1
    span = range(segments)
    for result in ordered:
        detector = result.detector
        segment = result.segment_id
        if single and not segment:  # None or 0
            segment = 0
        got = answered.get(detector)
        if got is not None:
            if segment is None:
                got.update(span)
            elif segment in span:
                got.add(segment)
        if result.status != "ok":
            failed.add(detector)
            continue
        taken.add((detector, segment, result.model_version))
        kept += 1
        if result.scores:
            scored.append((detector, result.scores))
    scores_read = _overwritten(state) if len(taken) < kept else _best(scored)
    counted = {detector: len(got) for detector, got in answered.items()}
    return counted, failed, scores_read, ordered


def _best(scored: list[tuple[str, dict[str, Any]]]) -> Scores:
    """The results' scores, in order, into the best per (detector, label); a value that is not
    a number in [0, 1] breaks its detector."""
    best: dict[tuple[str, str], float] = {}
    broken: set[str] = set()
    for detector, scores in scored:
        for label, value in scores.items():
            score = score_of(value)
            if score < 0.0:
                broken.add(detector)
                continue
            key = (detector, label)
            if score > best.get(key, -1.0):
                best[key] = score
    return best, broken


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


class Evaluation(Value):
    """One policy's verdict on the version and the evidence view it was made on."""

    FIELDS = ("verdict", "view", "completeness", "results", "expired")

    def __init__(
        self,
        verdict: Verdict,
        view: EvidenceView,
        completeness: dict[str, Any],
        results: list[Evidence],  # the detector results read, in evidence-key order
        expired: bool,
    ) -> None:
        self.verdict: Final = verdict
        self.view: Final = view
        self.completeness: Final = completeness
        self.results: Final = results
        self.expired: Final = expired
        self._provenance: list[dict[str, Any]] | None = None

    @property
    def provenance(self) -> list[dict[str, Any]]:
        """The decision's `evidence`: made only for a decision or task that is emitted, once."""
        if self._provenance is None:
            self._provenance = provenance_of(self.results)
        return self._provenance
