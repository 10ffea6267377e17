"""The fast gate: every upload gets its first decision at once, on the deterministic checks
alone, without waiting for any model; its deadline is armed and its scan requests are sent in
cost order.

Contract: docs/CONTRACT.md, "Policy document": "Every `upsert` gets its first decision
(`trigger: fast_gate`) as soon as the deterministic checks have run, without waiting for any
model: BLOCK on a hash-bank match, `failed`/PENDING when a limit fails, otherwise the `scanning`
outcome. A hash-bank match decides without waiting for detectors." "content.versions": an edit
"goes through the whole gate again and inherits nothing from older versions".

Proved by:
    tests/operators/test_moderation.py::test_hash_bank_match_blocks_at_the_fast_gate
    tests/operators/test_moderation.py::test_a_failed_limit_is_failed_pending
    tests/operators/test_moderation.py::test_the_fast_gate_is_the_scanning_outcome_whatever_rules_could_match
    tests/operators/test_moderation.py::test_an_upload_asks_for_each_required_detector_and_segment_not_yet_answered
    tests/operators/test_moderation.py::test_fast_gate_then_evidence_then_approved_with_provenance

The whole rule: `on_upsert` (the handler of an upsert on content.versions) keeps the upload's
facts (`UPSERT_FACTS`), decides the fast gate (modstream/moderation/verdict.py `evaluate` with
`fast_gate`), arms the deadline (rules/deadline.py), asks the detectors in cost order
(modstream/scanning/plan.py) and joins evidence read before it (rules/evidence.py).
"""

from __future__ import annotations

from typing import Any

from modstream.contract.content import ContentUpsert
from modstream.moderation.decide import decide
from modstream.moderation.rules import deadline, evidence
from modstream.moderation.state import Content, Context, State, StepResult
from modstream.scanning import plan as scan_plan
from modstream.scanning.plan import required as _required

UPSERT_FACTS = {
    "modality", "surface", "region", "audience", "account_risk", "size_bytes", "mime_type",
    "sha256", "phash", "segments", "author_id", "ts",
}  # fmt: skip
# The same facts in the upsert model's field order (the order model_dump kept them in).
_UPSERT_FIELDS = tuple(name for name in ContentUpsert.model_fields if name in UPSERT_FACTS)


def on_upsert(state: State, record: Any, ts: int, ctx: Context, result: StepResult) -> bool:
    """The first decision (`fast_gate`), the deadline, the scan requests in cost order, and
    the evidence that came before the upload, joined at once."""
    if state.content is not None:
        return False  # the same version uploaded twice: the first one counts
    content = Content(**{name: getattr(record, name) for name in _UPSERT_FIELDS})
    state.content = content
    state.asked_at = ctx.clock_ms  # when the detectors are asked (None in replay)
    result.timers += deadline.arm_deadline(state, ctx.resolution.decide)
    early, state.evidence = state.evidence, {}
    state.tally = {}  # the early evidence is tallied again as it is joined (`join_early`)
    result.outputs += decide(state, ctx, ts, "fast_gate", fast_gate=True)
    planned = scan_plan.on_upsert(state, record, ctx.resolution.decide, ts, ctx.hash_matches)
    result.outputs += evidence.unanswered(state, planned, early)
    if early:
        evidence.join_early(state, early, ts, ctx, result)
    elif not _required(ctx.resolution.decide, content.modality):
        result.outputs += decide(state, ctx, ts, "evidence")
    return True
