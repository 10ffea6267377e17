"""Re-evaluation: decide a version again on its stored evidence under the policy as of the
request's `ts`, without any new detector call (a media detector the policy now requires and the
evidence lacks is asked at backfill priority).

Contract: docs/CONTRACT.md, "moderation.reevaluate (lower priority than live traffic)":
"re-decide this content version on its stored evidence under the current policy, without any new
detector call." "v1.1 additions", "Quiet time": "Re-evaluation requests never hold back live
input" (the job's own lane: modstream/jobs/moderation/decode.py).

Proved by:
    tests/operators/test_scan_plan.py::test_a_reevaluation_under_a_policy_needing_a_new_detector_asks_it_at_backfill
    tests/operators/test_scan_plan.py::test_text_is_not_retained_so_a_reevaluation_asks_no_text_backfill
    tests/operators/test_moderation.py::test_human_review_is_sticky_until_another_human_decides

The whole rule: `on_reevaluate` (the handler of moderation.reevaluate), `trigger: reevaluation`;
the backfill requests are modstream/scanning/plan.py `backfill`.
"""

from __future__ import annotations

from typing import Any

from modstream.moderation.decide import decide
from modstream.moderation.state import Context, State, StepResult
from modstream.scanning import plan as scan_plan


def on_reevaluate(state: State, record: Any, ts: int, ctx: Context, result: StepResult) -> bool:
    """Decide again on the stored evidence; ask (backfill) what the policy now requires."""
    if state.content is not None:
        result.outputs += scan_plan.backfill(state, ctx.resolution.decide, ts, ctx.hash_matches)
    result.outputs += decide(state, ctx, ts, "reevaluation")
    return True
