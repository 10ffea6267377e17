"""Deletion: a deleted version is decided `deleted` (visibility hidden), ignores all later
input, and keeps only a tombstone with nothing of its content.

Contract: docs/CONTRACT.md, "content.versions" (`type`: `upsert` | `delete`) and
"moderation.decisions" (`trigger` ... `delete`; `state` ... `deleted`); the visibility of a
deleted version is `hidden` (docs/moderation.md, "The step").

Proved by:
    tests/operators/test_moderation.py::test_delete_hides_ignores_late_input_and_clears_state
    tests/operators/test_moderation_bounds.py::test_a_deleted_version_keeps_no_content_in_its_state
    tests/operators/test_moderation_bounds.py::test_late_input_after_a_delete_still_changes_nothing

The whole rule: `on_delete` (the handler of a `delete` on content.versions) decides, compacts the
state to its tombstone (`compact_tombstone`, `TOMBSTONE_KEEPS`) and keeps it for
`TOMBSTONE_TTL_MS`; modstream/moderation/step.py ignores later input for a deleted version.
"""

from __future__ import annotations

from typing import Any

import msgspec

from modstream.moderation.decide import decide
from modstream.moderation.rules.retention import arm_ttl, keep_only
from modstream.moderation.state import TOMBSTONE_TTL_MS, Context, State, StepResult


def on_delete(state: State, record: Any, ts: int, ctx: Context, result: StepResult) -> bool:
    """Decide `deleted` (hidden), then keep only a tombstone for `TOMBSTONE_TTL_MS`."""
    state.deleted = True
    if state.content is not None:
        result.outputs += decide(state, ctx, ts, "delete")
    compact_tombstone(state)
    result.timers += arm_ttl(state, ts, TOMBSTONE_TTL_MS, replace=True)
    return False


# What a deleted version's tombstone keeps: its identity, the event ids that make late and
# duplicate input a no-op, the revision and last decision (so nothing is decided twice), the
# active appeal's id, and its TTL. Nothing that holds or derives from the content (facts,
# hashes, evidence, scores, a reviewer's reason) survives the delete.
TOMBSTONE_KEEPS = (
    "content_id", "content_version", "events", "decision_revision", "last_decision", "appeal_id",
    "deleted", "ttl", "ttl_timer", "waiting_reviews", "review_wait_timer",
)  # fmt: skip


def compact_tombstone(state: State) -> None:
    """A deleted version keeps only what ignores late input (`TOMBSTONE_KEEPS`)."""
    keep_only(state, TOMBSTONE_KEEPS)
    if state.last_decision is not None:  # reason codes and evidence refs go with the content
        state.last_decision = msgspec.structs.replace(
            state.last_decision, reasons=None, evidence_refs=None
        )
