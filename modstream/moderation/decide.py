"""Deciding one content version: a decision revision only when outcome, restriction or state
changed, an action and a notification only when what the Content Service applies changed, the
review tasks the policy asks for, and shadow candidates on the same input.

Contract: docs/CONTRACT.md, "moderation.decisions": "`decision_revision` starts at 1 and rises by
one per new decision of that content version." "A new revision is emitted only when outcome,
restriction or state changes." "moderation.actions": "Emitted when the visibility the Content
Service must apply changes." "v1.1 additions", "Actions": "Actions are emitted when the
visibility or the restriction the Content Service must apply changes." "moderation.shadow":
shadow and canary candidates, with `shadow: true`.

Proved by:
    tests/operators/test_moderation.py::test_revisions_strictly_increase_and_each_decision_differs_from_the_previous
    tests/operators/test_moderation.py::test_an_action_only_when_the_visibility_changes
    tests/operators/test_moderation.py::test_a_restriction_only_change_emits_an_action
    tests/operators/test_moderation.py::test_each_visible_change_tells_the_author_with_the_policys_notice
    tests/operators/test_moderation.py::test_shadow_policy_decisions_go_to_moderation_shadow_only

Every rule module decides through `decide`. What the policy says is
modstream/moderation/verdict.py's; the records, modstream/moderation/records.py's; the
provisional expiry a revision sets, modstream/moderation/rules/provisional.py's (`track_expiry`).
"""

from __future__ import annotations

from modstream.moderation.evidence_view import Evaluation
from modstream.moderation.records import (
    action,
    decision_record,
    index_entry,
    notification,
    refs,
    sanction_input,
    task,
)
from modstream.moderation.rules.provisional import track_expiry
from modstream.moderation.state import Context, LastDecision, Output, ShadowDecision, State
from modstream.moderation.verdict import evaluate, state_name
from modstream.policy.evaluate import CompiledPolicy
from modstream.review import escalation
from modstream.scanning.plan import sha256_hex

# What the Content Service applies for each outcome (a deleted version is hidden).
VISIBILITY = {
    "ALLOW": "public",
    "PROVISIONAL_ALLOW": "public",
    "RESTRICT": "limited",
    "PENDING": "pending",
    "BLOCK": "hidden",
}


def decide(
    state: State, ctx: Context, ts: int, trigger: str, *, fast_gate: bool = False
) -> list[Output]:
    """Evaluate; emit a decision revision only when outcome, restriction or state changed,
    with an action when what the Content Service applies (visibility or restriction) changed;
    open the review tasks the policy asks for."""
    if state.content is None:
        return []
    policy = ctx.resolution.decide
    evaluation = evaluate(state, policy, ctx, ts, fast_gate)
    verdict = evaluation.verdict
    cid, ver = state.content_id, state.content_version
    new_tasks = []
    if state.human is None:
        for ask in verdict.review:
            task_id = f"review-{sha256_hex(cid, ver, ask.queue)[:20]}"
            if task_id not in state.tasks:
                state.tasks.append(task_id)
                escalation.track(state, task_id, ask.queue, ask.priority, ts)
                new_tasks.append((task_id, ask))
    name = state_name(state, verdict, evaluation.view, evaluation.expired)
    last = state.last_decision
    outputs: list[Output] = (
        _revise(state, evaluation, name, trigger, ts, policy)
        if last is None
        or last.outcome != verdict.outcome
        or last.restriction != verdict.restriction
        or last.state != name
        else []
    )
    for task_id, ask in new_tasks:
        outputs.append(
            (
                "review.tasks",
                cid,
                task(
                    state,
                    task_id,
                    "review",
                    ask.queue,
                    ask.priority,
                    verdict.reasons,
                    evaluation.provenance,
                    policy,
                    ts,
                ),
            )
        )
    outputs += _shadows(state, ctx, ts, trigger)
    return outputs


def _revise(
    state: State,
    evaluation: Evaluation,
    name: str,
    trigger: str,
    ts: int,
    policy: CompiledPolicy | None,
) -> list[Output]:
    """The next decision revision and what goes with it: the action and the author's notice
    when visibility or restriction changed, the index entry, the sanctions operator's input."""
    verdict = evaluation.verdict
    last = state.last_decision
    state.decision_revision += 1
    decision = decision_record(state, evaluation, name, trigger, ts, policy)
    outputs: list[Output] = [("moderation.decisions", state.content_id, decision)]
    visibility = "hidden" if name == "deleted" else VISIBILITY[verdict.outcome]
    if last is None or last.visibility != visibility or last.restriction != verdict.restriction:
        outputs.append(action(state, verdict, visibility, policy, ts))
        if name != "deleted":
            outputs.append(notification(state, verdict, policy, trigger, ts))
    state.last_decision = LastDecision(
        verdict.outcome,
        verdict.restriction,
        name,
        visibility,
        # What an appeal of this decision shows its reviewer (contract v1.1).
        reasons=decision["reasons"],
        evidence_refs=refs(evaluation.provenance),
    )
    track_expiry(state, decision)
    outputs.append(index_entry(state, decision))
    outputs += sanction_input(state, decision, policy)
    return outputs


def _shadows(state: State, ctx: Context, ts: int, trigger: str) -> list[Output]:
    """Shadow and canary candidates on the same input, into moderation.shadow."""
    outputs: list[Output] = []
    for policy in ctx.resolution.shadows:
        evaluation = evaluate(state, policy, ctx, ts)
        name = state_name(state, evaluation.verdict, evaluation.view, evaluation.expired)
        key = str(policy.version)
        last = state.shadow.get(key)
        verdict = evaluation.verdict
        if (
            last is not None
            and last.outcome == verdict.outcome
            and last.restriction == verdict.restriction
            and last.state == name
        ):
            continue
        revision = (last.decision_revision if last else 0) + 1
        state.shadow[key] = ShadowDecision(verdict.outcome, verdict.restriction, name, revision)
        record = decision_record(state, evaluation, name, trigger, ts, policy, revision=revision)
        record["shadow"] = True
        outputs.append(("moderation.shadow", state.content_id, record))
    return outputs
