"""Each detector's results tallied as they are stored (`VersionState.tally`, issue 26): how
many it counts, the segments answered, whether one failed or held a score outside [0, 1], the
best valid score per label. Read instead of walking every result: the evidence view
(modstream/moderation/evidence_view.py) and the scan plan's gate (modstream/scanning/plan.py).
"""

from __future__ import annotations

from typing import Any

from modstream.moderation.state import DetectorTally, Evidence, State

# How the key of a result without a segment ends when it was stored before issue 12 (since,
# `detector|model_version|0`: rules/evidence.py).
PRE_ISSUE_12_KEY = "|None"

# A score's number types (`policy.is_score`): a tuple, as `int | float` builds a union per call.
_NUMBER = (int, float)


def counted_tally(state: State) -> dict[str, DetectorTally] | None:
    """The version's tally where it counts every stored result, else None: not kept (a state
    stored before it, or one with keys from before issue 12), or not of these results (a state
    edited around the rule that keeps it): then read the results themselves."""
    tally = state.tally
    if tally is None or sum(kept.results for kept in tally.values()) != len(state.evidence):
        return None
    return tally


def answered_segments(kept: DetectorTally | None, segments: int) -> int:
    """How many of the version's `segments` a detector's results answered: all of them for a
    result of the whole content (-1; for a single segment that is segment 0 too), else those in
    range, each once (the tally holds each id once)."""
    if kept is None:
        return 0
    ids = kept.segments
    if -1 in ids:
        return max(segments, 0)
    return sum(1 for segment in ids if 0 <= segment < segments)


def tally_of(evidence: dict[str, Evidence]) -> dict[str, DetectorTally] | None:
    """The tally of results already stored (a state stored before the tally was kept), or None
    where a key is from before issue 12 (`detector|model|None`): only such keys can hold two
    results of one (detector, segment, model version), which evidence_view's `_overwritten`
    reads, so those states are read result by result for good."""
    tally: dict[str, DetectorTally] = {}
    for key, entry in evidence.items():
        if key.endswith(PRE_ISSUE_12_KEY):
            return None
        add_to_tally(tally, entry)
    return tally


def add_to_tally(tally: dict[str, DetectorTally], entry: Evidence) -> None:
    """One stored result added to its detector's tally, as evidence_view's `_results` and `_best`
    read it."""
    kept = tally.get(entry.detector)
    if kept is None:
        kept = tally[entry.detector] = DetectorTally()
    kept.results += 1
    segment = -1 if entry.segment_id is None else entry.segment_id
    if segment not in kept.segments:
        kept.segments.append(segment)
    if entry.status != "ok":
        kept.failed = True
        return
    scores = entry.scores
    if not scores:
        return
    best = kept.best
    for label, value in scores.items():
        score = score_of(value)
        if score < 0.0:
            kept.broken = True
        elif score > best.get(label, -1.0):
            best[label] = score


def score_of(value: Any) -> float:
    """A stored score as a float in [0, 1], or -1.0 where it is none (`policy.is_score`,
    inlined: the range excludes NaN and inf). A plain float, what a detector sends, is told
    apart by its type alone."""
    if type(value) is float:
        return value if 0.0 <= value <= 1.0 else -1.0
    if isinstance(value, _NUMBER) and not isinstance(value, bool) and 0.0 <= value <= 1.0:
        return float(value)  # after the range: a huge int is no float
    return -1.0
