"""Evidence joining: detector results stored under their evidence key (a repeat is a
duplicate), joined with the upload whatever order they came in, each one re-deciding the version.

Contract: docs/CONTRACT.md, "detector.results": "Unique evidence key: `(content_id,
content_version, detector, model_version, segment_id)`; a repeat of that key is a duplicate.
`timeout` and `error` are evidence that the result is UNKNOWN, never that the content is safe."
"When the content has one segment, its result has `segment_id` null (0 means the same)."
"Outcomes": "Until every required detector has reported for every segment, a version is never
ALLOW." "Replay": "detector evidence allowed to carry an earlier `ts` than its upsert."

Proved by:
    tests/operators/test_moderation.py::test_fast_gate_then_evidence_then_approved_with_provenance
    tests/operators/test_moderation.py::test_high_risk_surface_waits_pending_and_never_allows_before_complete
    tests/operators/test_moderation.py::test_duplicates_change_nothing
    tests/operators/test_moderation.py::test_evidence_before_the_upsert_is_kept_and_joined
    tests/operators/test_moderation.py::test_segments_complete_only_when_every_segment_reported
    tests/operators/test_moderation.py::test_single_segment_null_and_zero_are_the_same_segment
    tests/operators/test_moderation.py::test_evidence_read_before_its_upload_gives_the_same_decisions
    tests/operators/test_moderation.py::test_timeout_and_error_are_unknown_never_safe
    tests/operators/test_moderation.py::test_any_permutation_and_duplication_of_evidence_gives_the_same_final_decision
    tests/operators/test_moderation.py::test_evidence_of_another_version_never_changes_a_version

The whole rule: `on_detector_result` (the handler of detector.results) stores a result and
re-decides (`trigger: evidence`); evidence read before its upload waits in the state and is
joined after the fast gate in its own `ts` order (`join_early`, called by rules/fast_gate.py);
scan requests it already answered are not sent (`unanswered`). How the stored results read
(complete, UNKNOWN, provenance) is modstream/moderation/evidence_view.py's; what each result
unlocks in cost order, modstream/scanning/plan.py's.
"""

from __future__ import annotations

from typing import Any

from modstream.contract.detector import first_finding_ms
from modstream.moderation.decide import decide
from modstream.moderation.rules import deadline
from modstream.moderation.state import Context, Evidence, Output, State, StepResult
from modstream.moderation.tally import PRE_ISSUE_12_KEY, add_to_tally, tally_of
from modstream.scanning import plan as scan_plan
from modstream.scanning.plan import segment as _segment


def on_detector_result(
    state: State, record: Any, ts: int, ctx: Context, result: StepResult
) -> bool:
    """Evidence stored under (detector, model version, segment); a repeated key is a
    duplicate."""
    key = f"{record.detector}|{record.model_version}|{record.segment_id}"
    normalized = (
        f"{record.detector}|{record.model_version}|"
        f"{0 if record.segment_id is None else record.segment_id}"
    )
    if key in state.evidence or normalized in state.evidence:
        return False  # the same evidence key again
    # Stamped after a deadline that still waits: the deadline decides first, as in replay.
    result.outputs += deadline.decide_if_passed(state, ts, ctx)
    entry = Evidence(
        record.detector,
        record.model_version,
        record.segment_id,
        record.status,
        dict(record.scores) if record.scores else None,
        record.evidence_ref,
        ts,
        record.language,
        record.language_confidence,
        first_finding_ms(record.findings),
    )
    result.outputs += _take_evidence(state, normalized, entry, ts, ctx)
    return True


def _take_evidence(state: State, key: str, entry: Evidence, ts: int, ctx: Context) -> list[Output]:
    """Store one detector result (and tally it: `tally.add_to_tally`), plan what it
    unlocks (cost order), and decide."""
    state.evidence[key] = entry
    tally = state.tally
    if tally is not None and not key.endswith(PRE_ISSUE_12_KEY):
        add_to_tally(tally, entry)
    else:  # a state stored before the tally: made once from what it holds (or None, for good)
        state.tally = tally_of(state.evidence)
    asked = scan_plan.on_evidence(state, ctx.resolution.decide, ts, entry.detector)
    if asked and ctx.clock_ms is not None:
        state.asked_at = ctx.clock_ms  # the models, asked after their gate (cost order)
    if state.content is None:
        return asked
    # Evidence stamped before its upload decides at the upload's ts, whether it was read
    # before the upload (joined at the upsert) or after it (a backlog's late evidence).
    return asked + decide(state, ctx, max(ts, state.content.ts), "evidence")


def join_early(
    state: State, early: dict[str, Evidence], ts: int, ctx: Context, result: StepResult
) -> None:
    """Evidence read before its upload, taken after the fast gate one piece at a time in its own
    ts order, as if read after the upload: the same revisions and the same cost-order steps
    either way, so the order in which a job read its lanes never shows. Requests for what the
    early evidence already answered are not sent."""
    for key, entry in sorted(early.items(), key=lambda item: (_taken_at(item[1], ts), item[0])):
        taken = _take_evidence(state, key, entry, _taken_at(entry, ts), ctx)
        result.outputs += unanswered(state, taken, early)


def _taken_at(entry: Evidence, ts: int) -> int:
    """The result's own `ts`, or `ts` for one stored before issue 12 (which kept none)."""
    return ts if entry.ts is None else entry.ts


def unanswered(state: State, outputs: list[Output], early: dict[str, Evidence]) -> list[Output]:
    """`outputs` without the scan requests that evidence in `early` already answers."""
    answered = scan_plan.answered(state, early)
    return [
        (topic, key, record)
        for topic, key, record in outputs
        if not topic.startswith("scan.requests.")
        or (record["detector"], _segment(state, record["segment_id"])) not in answered
    ]
