"""The records the moderation step emits for one content version: a decision revision, its
action, the author's notification, the index entry, review tasks and the sanctions operator's
input. Builders only: what to emit, and when, is modstream/moderation/decide.py's.

Ids are sha256 of the version, the revision and the record's kind (modstream/scanning/plan.py
`sha256_hex`): one revision's records keep their ids when it is emitted again.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from modstream.contract.workflow import WORKFLOW_VERSION
from modstream.enforcement.sanctions import HUMAN_TRIGGERS, VIOLATING_OUTCOMES
from modstream.moderation import language
from modstream.moderation.evidence_view import Evaluation
from modstream.moderation.state import SANCTIONS, Output, State, uploaded
from modstream.policy.evaluate import CompiledPolicy, Verdict
from modstream.scanning.plan import sha256_hex

# The priority of an appeal's task (0 = most urgent).
APPEAL_PRIORITY = 1

# What the author is told when the policy has no notice for the decision's reason.
DEFAULT_NOTICES = {
    "ALLOW": "Your content is visible.",
    "PROVISIONAL_ALLOW": "Your content is visible while checks finish.",
    "PENDING": "Your content is being checked and is not visible yet.",
    "RESTRICT": "Your content is visible to a limited audience.",
    "BLOCK": "Your content was removed because it breaks the rules.",
}


def decision_record(
    state: State,
    evaluation: Evaluation,
    name: str,
    trigger: str,
    ts: int,
    policy: CompiledPolicy | None,
    revision: int | None = None,
) -> dict[str, Any]:
    """The moderation.decisions record of the revision just made (`decision_revision`), or of a
    shadow candidate's own `revision`."""
    cid, ver = state.content_id, state.content_version
    revision = revision or state.decision_revision
    verdict = evaluation.verdict
    record: dict[str, Any] = {
        "decision_id": sha256_hex("decision", cid, ver, revision),
        "content_id": cid,
        "content_version": ver,
        "decision_revision": revision,
        "outcome": verdict.outcome,
        "reasons": list(verdict.reasons),
        "matched_rules": list(verdict.matched_rules),
        "policy_id": policy.policy_id if policy else "none",
        "policy_version": policy.version if policy else 0,
        "evidence": evaluation.provenance,
        "completeness": evaluation.completeness,
        "trigger": trigger,
        "state": name,
        "ts": ts,
        "workflow_version": WORKFLOW_VERSION,  # where cost is attributed (issue 29 item 5)
        "language": language.of_evidence(state.evidence),  # the fact the rules read
    }
    if verdict.restriction:
        record["restriction"] = verdict.restriction
    if verdict.expires_ts is not None:
        record["expires_ts"] = verdict.expires_ts
    return record


def notification(
    state: State, verdict: Verdict, policy: CompiledPolicy | None, trigger: str, ts: int
) -> Output:
    """What the author is told about a visible change: the policy's notice for the first
    reason that has one (never evidence, scores or rule text), and whether an appeal is open."""
    notices = policy.notices if policy is not None else {}
    reason = next((r for r in verdict.reasons if r in notices), None)
    reason_code = reason or (verdict.reasons[0] if verdict.reasons else verdict.outcome.lower())
    message = notices[reason] if reason else DEFAULT_NOTICES[verdict.outcome]
    record = {
        "notification_id": sha256_hex(
            "notification", state.content_id, state.content_version, state.decision_revision
        ),
        "user_id": uploaded(state).author_id,
        "content_id": state.content_id,
        "content_version": state.content_version,
        "decision_revision": state.decision_revision,
        "outcome": verdict.outcome,
        "reason_code": reason_code,
        "message": message,
        "appeal_allowed": verdict.outcome in ("BLOCK", "RESTRICT") and trigger != "appeal",
        "ts": ts,
    }
    return ("user.notifications", state.content_id, record)


def sanction_input(
    state: State, decision: dict[str, Any], policy: CompiledPolicy | None
) -> list[Output]:
    """The decision for the author's sanctions operator, when it can add or reverse a strike."""
    reasons = policy.strike_reasons if policy is not None else frozenset()
    offense = decision["outcome"] in VIOLATING_OUTCOMES and not reasons.isdisjoint(
        decision["reasons"]
    )
    overturn = decision["trigger"] in HUMAN_TRIGGERS
    if decision["state"] == "deleted" or not (offense or overturn):
        return []
    return [
        (
            SANCTIONS,
            uploaded(state).author_id,
            {
                "decision": decision,
                "strikes": policy.strikes_json if policy is not None else None,
            },
        )
    ]


def task(
    state: State,
    task_id: str,
    kind: str,
    queue: str,
    priority: int,
    reasons: Iterable[str],
    provenance: list[dict[str, Any]],
    policy: CompiledPolicy | None,
    ts: int,
) -> dict[str, Any]:
    return {
        "task_id": task_id,
        "kind": kind,
        "content_id": state.content_id,
        "content_version": state.content_version,
        "decision_revision": max(state.decision_revision, 1),
        "policy_version": policy.version if policy else 0,
        "queue": queue,
        "priority": priority,
        "reasons": list(reasons),
        "evidence": refs(provenance),
        "ts": ts,
    }


def action(
    state: State, verdict: Verdict, visibility: str, policy: CompiledPolicy | None, ts: int
) -> Output:
    """The moderation.actions record of the revision just made (`state.decision_revision`)."""
    cid, ver, revision = state.content_id, state.content_version, state.decision_revision
    action: dict[str, Any] = {
        "action_id": sha256_hex(cid, ver, revision),
        "content_id": cid,
        "content_version": ver,
        "decision_revision": revision,
        "outcome": verdict.outcome,
        "visibility": visibility,
        "policy_version": policy.version if policy else 0,
        "ts": ts,
    }
    if verdict.restriction:
        action["restriction"] = verdict.restriction
    return ("moderation.actions", cid, action)


def refs(provenance: list[dict[str, Any]]) -> list[str]:
    return [p["evidence_ref"] for p in provenance if p.get("evidence_ref")]


def appeal_task(state: State, task_id: str, policy: CompiledPolicy | None, ts: int) -> Output:
    """The appeal's review task carries the appealed decision's reason codes and evidence refs
    (contract v1.1): the decision in force, the latest revision the author was told about."""
    last = state.last_decision
    reasons = (last.reasons if last else None) or ["appeal"]
    provenance = [{"evidence_ref": ref} for ref in (last.evidence_refs if last else None) or []]
    record = task(
        state, task_id, "appeal", "appeals", APPEAL_PRIORITY, reasons, provenance, policy, ts
    )
    return ("review.tasks", state.content_id, record)


def index_key(content_id: str, content_version: int) -> str:
    """The `moderation.index` key: one compacted record per content version (the version's
    digits first, so no content id can make two versions share a key)."""
    return f"{content_version}:{content_id}"


def index_entry(state: State, decision: dict[str, Any]) -> Output:
    """The version's compact index record (docs/moderation.md, "Index"): its latest decision
    and the facts re-evaluation selects by, one record per version after compaction."""
    content = state.content
    record = {
        "content_id": state.content_id,
        "content_version": state.content_version,
        "decision_revision": decision["decision_revision"],
        "outcome": decision["outcome"],
        "state": decision["state"],
        "policy_id": decision["policy_id"],
        "policy_version": decision["policy_version"],
        "surface": content.surface if content else None,
        "region": content.region if content else None,
        "modality": content.modality if content else None,
        "detectors": sorted({e.detector for e in state.evidence.values()}),
        "human": state.human is not None,
        "upload_ts": content.ts if content else None,
        "ts": decision["ts"],
        # The decision's own: read from the same evidence in the same step (`decision_record`).
        "language": decision["language"] if content else None,
    }
    return ("moderation.index", index_key(state.content_id, state.content_version), record)
