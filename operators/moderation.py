"""The moderation step for one content version: evidence join, completeness, deadlines,
human review, appeals, reports, deletes, and decisions that change only when they must.

Pure Python over plain dict state (compact, JSON-serializable, no pickled objects): the Flink
adapter (jobs/moderation_moderate.py) loads the state of a `(content_id, content_version)` key,
calls `step` or `on_timer` with the input in event-time order and the policy resolution for its
`ts`, stores the returned state, registers the returned timers and emits the returned outputs.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from modstream.limits import Limits
from operators import scan_plan
from operators.policy import (
    CompiledPolicy,
    EvidenceView,
    ReviewAsk,
    Verdict,
    most_severe,
)
from operators.policy_store import Resolution
from operators.reports import ReportWeight
from operators.sanctions import HUMAN_TRIGGERS, VIOLATING_OUTCOMES
from operators.scan_plan import required as _required
from operators.scan_plan import segment as _segment
from operators.scan_plan import sha256_hex
from schemas.common import MAX_ID_CHARS
from schemas.content import ContentUpsert

# The moderation job's topics (contract names).
KEYED_TOPICS = (
    "content.versions",
    "detector.results",
    "moderation.reports",
    "review.decisions",
    "moderation.appeals",
    "moderation.reevaluate",
)
BROADCAST_TOPICS = ("policy.rules", "hash.bank")
OUTPUT_TOPICS = (
    "moderation.decisions",
    "moderation.actions",
    "review.tasks",
    "moderation.shadow",
    "moderation.dlq",
    "account.actions",
    "user.notifications",
    "scan.requests.text",
    "scan.requests.image",
    "scan.requests.video",
    "scan.requests.audio",
    "moderation.index",
)
# Internal: a decision that may add or reverse a strike, on its way to the author-keyed
# sanctions operator (operators/sanctions.py); never written to Kafka.
SANCTIONS = "_sanctions"
# Internal: a bank addition reaching a version decided before it (operators/retro.py, keyed to
# the version at the addition's ts); never written to Kafka.
RETRO = "moderation.retro"
# What the author is told when the policy has no notice for the decision's reason.
DEFAULT_NOTICES = {
    "ALLOW": "Your content is visible.",
    "PROVISIONAL_ALLOW": "Your content is visible while checks finish.",
    "PENDING": "Your content is being checked and is not visible yet.",
    "RESTRICT": "Your content is visible to a limited audience.",
    "BLOCK": "Your content was removed because it breaks the rules.",
}
ALL_TOPICS = (*KEYED_TOPICS, *BROADCAST_TOPICS, *OUTPUT_TOPICS)

VISIBILITY = {
    "ALLOW": "public",
    "PROVISIONAL_ALLOW": "public",
    "RESTRICT": "limited",
    "PENDING": "pending",
    "BLOCK": "hidden",
}
HUMAN_STATE = {
    "BLOCK": "blocked",
    "RESTRICT": "restricted",
    "ALLOW": "approved",
    "PROVISIONAL_ALLOW": "approved",
    "PENDING": "pending_review",
}
# How long a decided version keeps its state for review, appeal and re-evaluation, and how long
# a deleted version (or evidence whose upsert never came) is remembered. docs/moderation.md.
STATE_TTL_MS = 30 * 86_400_000
# After STATE_TTL_MS a decided version is retired to a compact record (`_retire`) that keeps its
# right to be reviewed and appealed (contract v1.1) this long after its last input.
REVIEW_RETENTION_MS = 400 * 86_400_000
# Live deployments' defaults (docs/moderation.md, "Time"): a deadline reached more than
# LIVE_WINDOW_MS behind the processing clock was reached while catching up; a detector's answer
# reaches the job within EVIDENCE_GRACE_MS (the scan job's transaction interval and the job's).
LIVE_WINDOW_MS = 30_000
EVIDENCE_GRACE_MS = 5_000
TOMBSTONE_TTL_MS = 86_400_000
ORPHAN_TTL_MS = 86_400_000
# Reports from new reporters that reach the review threshold within this window are flagged as
# possible brigading (a review task in queue `brigading`) instead of counted.
BRIGADE_WINDOW_MS = 600_000
# A PROVISIONAL_ALLOW that reaches its `expires_ts` with evidence still incomplete or unknown
# is decided again (contract v1.1) and a reviewer looks, in this queue at this priority.
PROVISIONAL_QUEUE = "provisional"
PROVISIONAL_PRIORITY = 2
PROVISIONAL_REASON = "provisional_expired"
DEFAULT_LIMITS = Limits()


Output = tuple[str, str, dict[str, Any]]  # (contract topic, Kafka key, record)
State = dict[str, Any]


@dataclass(frozen=True)
class Context:
    """What the adapter knows at the event's time: policies, the content's bank matches, and
    for a report its weight from the reporter-side gate (operators/reports.py), and the
    deployment's bounds on one version's state (modstream/limits.py)."""

    resolution: Resolution
    hash_matches: frozenset[str] = frozenset()
    report: ReportWeight | None = None
    limits: Limits = DEFAULT_LIMITS
    # The processing clock when event time follows it (live deployments), None where event time
    # is the input's alone (replay): a deadline reached before the detectors had their time
    # waits for it (`_postponed`; docs/moderation.md, "Time").
    clock_ms: int | None = None
    live_window_ms: int = LIVE_WINDOW_MS
    # How long an answer may take to reach the job after the detector made it.
    evidence_grace_ms: int = EVIDENCE_GRACE_MS
    # How long a version keeps its full state after its last input, then its compact record.
    state_ttl_ms: int = STATE_TTL_MS
    review_retention_ms: int = REVIEW_RETENTION_MS


@dataclass
class StepResult:
    state: State | None
    outputs: list[Output] = field(default_factory=list)
    timers: list[int] = field(default_factory=list)
    dead_letters: list[tuple[str, str]] = field(default_factory=list)  # (error_class, message)


def new_state(content_id: str, content_version: int) -> State:
    return {
        "cid": content_id,
        "ver": content_version,
        "content": None,
        "events": {},  # event id -> 1: O(1) duplicate checks however many inputs a key sees
        "evidence": {},
        "reporters": {},
        "report_weight": 0.0,  # the sum of the counted reporters' weights (report_count)
        "burst": [],  # [ts, new_reporter] of recent reports, oldest first
        "burst_new": 0,
        "human": None,
        "appeal": None,
        "rev": 0,
        "last": None,
        "tasks": [],
        "open_tasks": [],
        "deadline": None,  # upsert ts + deadline_ms: the event time a deadline decides at
        "deadline_timer": None,  # while a deadline waits for the detectors: when it fires
        "asked_at": None,  # processing time the detectors were asked (live jobs only)
        "deleted": False,
        "shadow": {},
        "ttl": None,
        "ttl_timer": None,  # the one TTL timer armed; it re-arms itself if the TTL moved on
        "expiry": None,  # `expires_ts` of the PROVISIONAL_ALLOW in force, while one is
        "expiry_timer": None,  # the one expiry timer armed
        "provisional_expired": False,  # once set, never armed again: no timer chain
    }


def _evidence(
    state: State, policy: CompiledPolicy | None, ts: int, hash_matches: frozenset[str] = frozenset()
) -> tuple[EvidenceView, dict[str, Any], list[dict[str, Any]], bool]:
    """The evidence view for `policy`, the completeness record, the provenance list, and
    whether the deadline has passed with evidence still missing (state `expired`). Detectors
    cost ordering never asked (operators/scan_plan.py) are not waited for: UNKNOWN at once."""
    content = state["content"]
    segments = content.get("segments", 1)
    required = _required(policy, content)
    wanted = {(d, s) for d in required for s in range(segments)}
    received: set[tuple[str, int]] = set()
    failed: set[str] = set()
    # Scores per (segment, model version): score() reads the highest, so two model versions of
    # a detector never make content look safer than either says.
    per_segment: dict[str, dict[Any, dict[str, Any]]] = {}
    provenance = []
    evidence = state["evidence"]
    for key in sorted(evidence):
        result = evidence[key]
        detector = result["detector"]
        segment = _segment(state, result["segment_id"])
        if segment is None:
            received.update((detector, s) for s in range(segments) if (detector, s) in wanted)
        elif (detector, segment) in wanted:
            received.add((detector, segment))
        if result["status"] != "ok":
            failed.add(detector)
        else:
            per_segment.setdefault(detector, {})[(segment, result["model_version"])] = (
                result["scores"] or {}
            )
        provenance.append(
            {
                "detector": detector,
                "model_version": result["model_version"],
                "segment_id": result["segment_id"],
                "evidence_ref": result.get("evidence_ref"),
            }
        )
    absent = {detector for detector, _ in wanted - received}
    missing = absent - scan_plan.unasked(state)
    unasked = absent & scan_plan.unknown_unasked(state, policy, hash_matches)
    # Passed: reached by `ts`, or already decided (an input stamped before the deadline but
    # applied after it, as a report batch at its window's end is, does not reopen scanning).
    passed = state["deadline"] is not None and (
        ts >= state["deadline"] or bool(state.get("deadline_decided"))
    )
    expired = (
        bool(missing)
        and passed
        and state.get("deadline_timer") is None  # a deadline still waiting has not passed
    )
    view = EvidenceView.from_segments(
        per_segment,
        unknown=failed | unasked | (missing if expired else set()),
        outstanding=bool(missing) and not expired,
    )
    completeness = {
        "required": len(wanted),
        "received": len(received),
        "unknown": sorted(view.unknown),
    }
    return view, completeness, provenance, expired


def _state_name(state: State, verdict: Verdict, view: EvidenceView, expired: bool) -> str:
    if state["deleted"]:
        return "deleted"
    if verdict.limit_failed:
        return "failed"
    if state["human"] is not None:
        return HUMAN_STATE[verdict.outcome]
    if expired:
        return "expired"
    if verdict.outcome == "BLOCK":
        return "blocked"
    if state["open_tasks"]:
        return "pending_review"
    if view.outstanding:
        return "scanning"
    return {"RESTRICT": "restricted", "PENDING": "pending_review"}.get(verdict.outcome, "approved")


@dataclass(frozen=True)
class _Evaluation:
    verdict: Verdict
    view: EvidenceView
    completeness: dict[str, Any]
    provenance: list[dict[str, Any]]
    expired: bool


def _evaluate(
    state: State, policy: CompiledPolicy | None, ctx: Context, ts: int, fast_gate: bool = False
) -> _Evaluation:
    view, completeness, provenance, expired = _evidence(state, policy, ts, ctx.hash_matches)
    facts = scan_plan.facts(state)
    human = state["human"]
    # The reviewer's free text never reaches the policy: `reasons` are built below.
    human_outcome = (human["outcome"], None) if human else None
    if policy is None:
        verdict = Verdict("PENDING", None, ("no_policy",), (), (), None)
    elif fast_gate:
        # The gate waits for no model: the state is `scanning` unless the gate decided. It is
        # made on the upload alone, so evidence read before it (stamped earlier) does not show:
        # the same fast gate whichever was read first (`tests/integration/test_backlog.py`).
        view = EvidenceView(outstanding=bool(completeness["required"]))
        completeness = {**completeness, "received": 0, "unknown": []}
        provenance = []
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
            reasons=_human_reasons(human["reason"], policy),
        )
    evaluation = _Evaluation(
        verdict, view, completeness, provenance, expired and not verdict.limit_failed
    )
    if state.get("provisional_expired") and not fast_gate:
        evaluation = _provisional_floor(state, evaluation, policy)
    return evaluation


def _human_restriction(state: State, verdict: Verdict) -> str | None:
    """A review record names no restriction: a reviewer's RESTRICT keeps the restriction in
    force (an age gate confirmed stays an age gate), so nothing changes for the Content Service."""
    last = state["last"] or {}
    if verdict.outcome == "RESTRICT" and verdict.restriction is None:
        return last.get("restriction") if last.get("outcome") == "RESTRICT" else None
    return verdict.restriction


def _human_reasons(reason: str | None, policy: CompiledPolicy | None) -> tuple[str, ...]:
    """A human decision's reason codes (contract v1.1): `human_review`, plus the reviewer's
    `reason` only when it is one of the policy's rule reasons. Anything else a reviewer writes
    is free text: it never becomes a code, so it never reaches a notification either."""
    rule_reasons = {rule.reason for rule in policy.document.rules} if policy else set()
    if reason is not None and reason in rule_reasons and reason != "human_review":
        return ("human_review", reason)
    return ("human_review",)


def _incomplete(completeness: dict[str, Any]) -> bool:
    return completeness["received"] < completeness["required"] or bool(completeness["unknown"])


def _provisional_floor(
    state: State, evaluation: _Evaluation, policy: CompiledPolicy | None
) -> _Evaluation:
    """After its PROVISIONAL_ALLOW expired, a version whose evidence is still incomplete or
    unknown stays at the policy's `unknown.high_risk` outcome (or anything more severe the
    policy now says), state `expired`, with a review in queue `provisional`: a later report or
    re-evaluation must not publish it again on the same missing evidence. A human decision, a
    failed limit or complete evidence decide as usual."""
    verdict = evaluation.verdict
    if (
        policy is None
        or state["human"] is not None
        or verdict.limit_failed
        or not _incomplete(evaluation.completeness)
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


def _decide(
    state: State, ctx: Context, ts: int, trigger: str, *, fast_gate: bool = False
) -> list[Output]:
    """Evaluate; emit a decision revision only when outcome, restriction or state changed,
    with an action when what the Content Service applies (visibility or restriction) changed;
    open the review tasks the policy asks for."""
    if state["content"] is None:
        return []
    policy = ctx.resolution.decide
    evaluation = _evaluate(state, policy, ctx, ts, fast_gate)
    verdict = evaluation.verdict
    cid, ver = state["cid"], state["ver"]
    new_tasks = []
    if state["human"] is None:
        for ask in verdict.review:
            task_id = f"review-{sha256_hex(cid, ver, ask.queue)[:20]}"
            if task_id not in state["tasks"]:
                state["tasks"].append(task_id)
                state["open_tasks"].append(task_id)
                new_tasks.append((task_id, ask))
    name = _state_name(state, verdict, evaluation.view, evaluation.expired)
    outputs: list[Output] = []
    last = state["last"]
    current = {"outcome": verdict.outcome, "restriction": verdict.restriction, "state": name}
    if (
        last is None
        or last["outcome"] != verdict.outcome
        or last["restriction"] != verdict.restriction
        or last["state"] != name
    ):
        state["rev"] += 1
        outputs.append(
            (
                "moderation.decisions",
                cid,
                _decision_record(state, evaluation, name, trigger, ts, policy),
            )
        )
        visibility = "hidden" if name == "deleted" else VISIBILITY[verdict.outcome]
        if (
            last is None
            or last["visibility"] != visibility
            or last["restriction"] != verdict.restriction
        ):
            outputs.append(_action(state, verdict, visibility, policy, ts))
            if name != "deleted":
                outputs.append(_notification(state, verdict, policy, trigger, ts))
        decision = outputs[0][2]
        state["last"] = {
            **current,
            "visibility": visibility,
            # What an appeal of this decision shows its reviewer (contract v1.1).
            "reasons": decision["reasons"],
            "refs": _refs(evaluation.provenance),
        }
        _track_expiry(state, decision)
        outputs.append(_index_entry(state, decision))
        outputs += _sanction_input(state, decision, policy)
    for task_id, ask in new_tasks:
        outputs.append(
            (
                "review.tasks",
                cid,
                _task(
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


def index_key(content_id: str, content_version: int) -> str:
    """The `moderation.index` key: one compacted record per content version (the version's
    digits first, so no content id can make two versions share a key)."""
    return f"{content_version}:{content_id}"


def _index_entry(state: State, decision: dict[str, Any]) -> Output:
    """The version's compact index record (docs/moderation.md, "Index"): its latest decision
    and the facts re-evaluation selects by, one record per version after compaction."""
    content = state["content"] or {}
    record = {
        "content_id": state["cid"],
        "content_version": state["ver"],
        "decision_revision": decision["decision_revision"],
        "outcome": decision["outcome"],
        "state": decision["state"],
        "policy_id": decision["policy_id"],
        "policy_version": decision["policy_version"],
        "surface": content.get("surface"),
        "region": content.get("region"),
        "modality": content.get("modality"),
        "detectors": sorted({e["detector"] for e in state["evidence"].values()}),
        "human": state["human"] is not None,
        "upload_ts": content.get("ts"),
        "ts": decision["ts"],
    }
    return ("moderation.index", index_key(state["cid"], state["ver"]), record)


def _action(
    state: State, verdict: Verdict, visibility: str, policy: CompiledPolicy | None, ts: int
) -> Output:
    """The moderation.actions record of the revision just made (`state["rev"]`)."""
    cid, ver, revision = state["cid"], state["ver"], state["rev"]
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


def _refs(provenance: list[dict[str, Any]]) -> list[str]:
    return [p["evidence_ref"] for p in provenance if p.get("evidence_ref")]


def _track_expiry(state: State, decision: dict[str, Any]) -> None:
    """Remember the `expires_ts` of the PROVISIONAL_ALLOW now in force (the latest revision's,
    as the Content Service sees it), or forget it when a revision leaves PROVISIONAL_ALLOW. A
    human's outcome is sticky and a version decided again at its expiry is never armed again."""
    provisional = decision["outcome"] == "PROVISIONAL_ALLOW" and "expires_ts" in decision
    if provisional and state["human"] is None and not state.get("provisional_expired"):
        state["expiry"] = decision["expires_ts"]
    else:
        state["expiry"] = None


def _decision_record(
    state: State,
    evaluation: _Evaluation,
    name: str,
    trigger: str,
    ts: int,
    policy: CompiledPolicy | None,
    revision: int | None = None,
) -> dict[str, Any]:
    cid, ver = state["cid"], state["ver"]
    revision = revision or state["rev"]
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
    }
    if verdict.restriction:
        record["restriction"] = verdict.restriction
    if verdict.expires_ts is not None:
        record["expires_ts"] = verdict.expires_ts
    return record


def _notification(
    state: State, verdict: Verdict, policy: CompiledPolicy | None, trigger: str, ts: int
) -> Output:
    """What the author is told about a visible change: the policy's notice for the first
    reason that has one (never evidence, scores or rule text), and whether an appeal is open."""
    notices = policy.document.notices if policy is not None else {}
    reason = next((r for r in verdict.reasons if r in notices), None)
    reason_code = reason or (verdict.reasons[0] if verdict.reasons else verdict.outcome.lower())
    message = notices[reason] if reason else DEFAULT_NOTICES[verdict.outcome]
    record = {
        "notification_id": sha256_hex("notification", state["cid"], state["ver"], state["rev"]),
        "user_id": state["content"]["author_id"],
        "content_id": state["cid"],
        "content_version": state["ver"],
        "decision_revision": state["rev"],
        "outcome": verdict.outcome,
        "reason_code": reason_code,
        "message": message,
        "appeal_allowed": verdict.outcome in ("BLOCK", "RESTRICT") and trigger != "appeal",
        "ts": ts,
    }
    return ("user.notifications", state["cid"], record)


def _sanction_input(
    state: State, decision: dict[str, Any], policy: CompiledPolicy | None
) -> list[Output]:
    """The decision for the author's sanctions operator, when it can add or reverse a strike."""
    strikes = policy.document.strikes if policy is not None else None
    reasons = set(strikes.reasons) if strikes is not None else set()
    offense = decision["outcome"] in VIOLATING_OUTCOMES and bool(reasons & set(decision["reasons"]))
    overturn = decision["trigger"] in HUMAN_TRIGGERS
    if decision["state"] == "deleted" or not (offense or overturn):
        return []
    return [
        (
            SANCTIONS,
            state["content"]["author_id"],
            {
                "decision": decision,
                "strikes": strikes.model_dump(mode="json") if strikes is not None else None,
            },
        )
    ]


def _task(
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
        "content_id": state["cid"],
        "content_version": state["ver"],
        "decision_revision": max(state["rev"], 1),
        "policy_version": policy.version if policy else 0,
        "queue": queue,
        "priority": priority,
        "reasons": list(reasons),
        "evidence": _refs(provenance),
        "ts": ts,
    }


def _shadows(state: State, ctx: Context, ts: int, trigger: str) -> list[Output]:
    """Shadow and canary candidates on the same input, into moderation.shadow."""
    outputs: list[Output] = []
    for policy in ctx.resolution.shadows:
        evaluation = _evaluate(state, policy, ctx, ts)
        name = _state_name(state, evaluation.verdict, evaluation.view, evaluation.expired)
        key = str(policy.version)
        last = state["shadow"].get(key)
        current = [evaluation.verdict.outcome, evaluation.verdict.restriction, name]
        if last is not None and last[:3] == current:
            continue
        revision = (last[3] if last else 0) + 1
        state["shadow"][key] = [*current, revision]
        record = _decision_record(state, evaluation, name, trigger, ts, policy, revision=revision)
        record["shadow"] = True
        outputs.append(("moderation.shadow", state["cid"], record))
    return outputs


def _deadline_timer(state: State, policy: CompiledPolicy | None) -> list[int]:
    content = state["content"]
    deadline = policy.deadline_ms(content["modality"]) if policy else None
    if deadline is None:
        return []
    state["deadline"] = content["ts"] + deadline
    return [state["deadline"]]


def _postponed(state: State, ctx: Context, ts: int) -> int | None:
    """When event time reaches a deadline (`ts`: the deadline, or a postponed firing) with
    evidence missing: the processing time to decide it at, or None to decide now.

    A deadline fires only when the detectors had their full deadline to answer: `deadline_ms`
    of real time since the job asked them (`asked_at`, when it read the upload and sent the scan
    requests) plus `evidence_grace_ms` for an answer to reach the job (the scanner's and this
    job's transactions). Reached while catching up (event time more than the live window behind
    the clock), they get that again from now. Replay (no clock) never waits: its event time is
    the input's alone. docs/moderation.md, "Time"."""
    if ctx.clock_ms is None:
        return None
    policy = ctx.resolution.decide
    # Evidence outstanding just before the deadline: asked and not answered (detectors cost
    # ordering never asked are not waited for; a timeout or error is an answer).
    view, _, _, _ = _evidence(state, policy, state["deadline"] - 1, ctx.hash_matches)
    deadline = policy.deadline_ms(state["content"]["modality"]) if policy else None
    if deadline is None or not view.outstanding:
        return None
    wait = deadline + ctx.evidence_grace_ms
    target = int(state.get("asked_at") or ctx.clock_ms) + wait
    if ts < ctx.clock_ms - ctx.live_window_ms:
        target = max(target, ctx.clock_ms + wait)
    return target if target > ctx.clock_ms else None


def _decide_deadline(state: State, ctx: Context) -> list[Output]:
    """The deadline decision, at the deadline's own event time, once it is no longer pending."""
    state["deadline_timer"] = None
    state["deadline_decided"] = True
    return _decide(state, ctx, state["deadline"], "deadline")


def _arm_expiry(state: State) -> list[int]:
    """The timer for the provisional expiry in force: one armed at a time, as for the TTL. A
    later expiry waits for the armed timer, which re-arms it when it fires (`on_timer`)."""
    expiry, armed = state.get("expiry"), state.get("expiry_timer")
    if expiry is None or (armed is not None and armed <= expiry):
        return []
    state["expiry_timer"] = expiry
    return [expiry]


def _expire_provisional(state: State, ts: int, ctx: Context) -> StepResult:
    """The provisional expiry timer fired: decide again (contract v1.1, trigger `deadline`)
    when the PROVISIONAL_ALLOW in force reached its `expires_ts` with evidence incomplete or
    unknown; re-arm for a later `expires_ts`; else nothing (complete evidence is not touched).
    `provisional_expired` is set once, so the chain ends with this firing."""
    result = StepResult(state)
    state["expiry_timer"] = None
    expiry = state.get("expiry")
    if expiry is None or state["deleted"] or state["content"] is None:
        return result
    if ts < expiry:
        result.timers += _arm_expiry(state)
        return result
    policy = ctx.resolution.decide
    _, completeness, _, _ = _evidence(state, policy, ts)
    if state["human"] is not None or not _incomplete(completeness):
        state["expiry"] = None
        return result
    if ctx.clock_ms is not None and ts < ctx.clock_ms - ctx.live_window_ms:
        # Reached while the job catches up on a backlog: the evidence it is reading may complete
        # the version. Looked at again once event time is live (contract v1.1, "Quiet time": a
        # backfill must not expire everything at once).
        state["expiry_timer"] = ctx.clock_ms + ctx.evidence_grace_ms
        result.timers.append(state["expiry_timer"])
        return result
    state["expiry"] = None
    state["provisional_expired"] = True
    result.outputs += _decide(state, ctx, expiry, "deadline")
    return result


def _ttl(state: State, ts: int, ttl_ms: int, *, replace: bool = False) -> list[int]:
    """Keep the state until `ttl_ms` after the latest input. One timer is armed at a time
    (not one per input: each firing loads the state); when it fires early it re-arms."""
    state["ttl"] = ts + ttl_ms if replace else max(state["ttl"] or 0, ts + ttl_ms)
    armed = state.get("ttl_timer")
    if armed is None or state["ttl"] < armed:
        state["ttl_timer"] = state["ttl"]
        return [state["ttl"]]
    return []


def _retro(state: State | None, record: Any, ts: int, ctx: Context) -> StepResult:
    """A bank addition at `ts` for a version uploaded before it (contract v1.1): decide again at
    `ts` (`trigger: policy_change`) when the version, as stored, matches the added bank then
    (`ctx.hash_matches`: HashBanks at `ts`, the policy's phash distance). A version without
    content, deleted or expired is left alone; nothing of it is created, its TTL does not move."""
    if state is None or state["deleted"] or state["content"] is None:
        return StepResult(state)
    if record.event_id in state["events"]:
        return StepResult(state)
    state["events"][record.event_id] = 1
    if record.bank not in ctx.hash_matches:
        return StepResult(state)
    return StepResult(state, outputs=_decide(state, ctx, ts, "policy_change"))


def step(state: State | None, topic: str, record: Any, ts: int, ctx: Context) -> StepResult:
    """Apply one input of this content version at event time `ts` (its own `ts`)."""
    state = _expanded(state)
    refusal = _over_bounds(topic, record, ctx.limits)
    if refusal is not None:
        return StepResult(state, dead_letters=[("schema", refusal)])
    if topic == RETRO:
        return _retro(state, record, ts, ctx)
    if topic == "moderation.reports" and not _report_kept(state, record, ctx):
        # Not counted: nothing of it is kept (not even its event id) and the version's TTL
        # does not move, so a flood of reports beyond the reporter's limit costs no state.
        return StepResult(state)
    if topic in HUMAN_TOPICS and (
        state is None or (state["content"] is None and not state["deleted"])
    ):
        # Never decided here (or its record's retention ended): nothing to apply it to, and
        # nothing dropped silently (contract v1.1).
        return StepResult(state, dead_letters=[("stale", _stale(topic, record))])
    if state is None:
        state = new_state(record.content_id, record.content_version)
    result = StepResult(state)
    if record.event_id in state["events"]:
        return result  # a duplicate changes nothing and emits nothing
    if state["deleted"]:
        state["events"][record.event_id] = 1
        return result  # late input for a deleted version is ignored
    state["events"][record.event_id] = 1
    if _apply(state, topic, record, ts, ctx, result):
        ttl = ORPHAN_TTL_MS if state["content"] is None else ctx.state_ttl_ms
        result.timers += _arm_expiry(state)
        result.timers += _ttl(state, ts, ttl)
    return result


def _apply(
    state: State, topic: str, record: Any, ts: int, ctx: Context, result: StepResult
) -> bool:
    """One new input's effect on `result`; False when it ends there (its own TTL handling)."""
    if topic == "content.versions":
        if record.type == "delete":
            return _delete(state, ts, ctx, result)
        return _upsert(state, record, ts, ctx, result)
    if topic == "detector.results":
        return _detector_result(state, record, ts, ctx, result)
    if topic == "moderation.reports":
        result.outputs += _report(state, record, ts, ctx)
        if record.reporter_id not in state["reporters"]:
            # Flagged as a possible brigade, not counted: the burst window remembers it (bounded
            # by `max_reporters`); its event id is not kept, so events stay bounded too.
            del state["events"][record.event_id]
    elif topic == "review.decisions":
        appeal = state["appeal"]
        trigger = "appeal" if appeal and record.task_id == f"appeal-{appeal}" else "review"
        state["human"] = {"outcome": record.outcome, "reason": record.reason, "ts": ts}
        state["open_tasks"] = []
        if trigger == "appeal":
            state["appeal"] = None
        result.outputs += _decide(state, ctx, ts, trigger)
    elif topic == "moderation.appeals":
        return _appeal(state, record, ts, ctx, result)
    elif topic == "moderation.reevaluate":
        if state["content"] is not None:
            result.outputs += scan_plan.backfill(state, ctx.resolution.decide, ts, ctx.hash_matches)
        result.outputs += _decide(state, ctx, ts, "reevaluation")
    return True


def _delete(state: State, ts: int, ctx: Context, result: StepResult) -> bool:
    state["deleted"] = True
    if state["content"] is not None:
        result.outputs += _decide(state, ctx, ts, "delete")
    _compact_tombstone(state)
    result.timers += _ttl(state, ts, TOMBSTONE_TTL_MS, replace=True)
    return False


UPSERT_FACTS = {
    "modality", "surface", "region", "audience", "account_risk", "size_bytes", "mime_type",
    "sha256", "phash", "segments", "author_id", "ts",
}  # fmt: skip
# The same facts in the upsert model's field order (the order model_dump kept them in).
_UPSERT_FIELDS = tuple(name for name in ContentUpsert.model_fields if name in UPSERT_FACTS)


def _upsert(state: State, record: Any, ts: int, ctx: Context, result: StepResult) -> bool:
    if state["content"] is not None:
        return False  # the same version uploaded twice: the first one counts
    content: dict[str, Any] = {name: getattr(record, name) for name in _UPSERT_FIELDS}
    state["content"] = content
    state["asked_at"] = ctx.clock_ms  # when the detectors are asked (None in replay)
    result.timers += _deadline_timer(state, ctx.resolution.decide)
    early, state["evidence"] = state["evidence"], {}
    result.outputs += _decide(state, ctx, ts, "fast_gate", fast_gate=True)
    planned = scan_plan.on_upsert(state, record, ctx.resolution.decide, ts, ctx.hash_matches)
    result.outputs += _unanswered(state, planned, early)
    if early:
        _join_early_evidence(state, early, ts, ctx, result)
    elif not _required(ctx.resolution.decide, content):
        result.outputs += _decide(state, ctx, ts, "evidence")
    return True


def _detector_result(state: State, record: Any, ts: int, ctx: Context, result: StepResult) -> bool:
    key = f"{record.detector}|{record.model_version}|{record.segment_id}"
    normalized = (
        f"{record.detector}|{record.model_version}|"
        f"{0 if record.segment_id is None else record.segment_id}"
    )
    if key in state["evidence"] or normalized in state["evidence"]:
        return False  # the same evidence key again
    if state.get("deadline_timer") is not None and ts > state["deadline"]:
        # Stamped after its deadline: the detector did not answer in time, so the deadline
        # decides first, as in replay, and this evidence after it.
        result.outputs += _decide_deadline(state, ctx)
    entry = {
        "detector": record.detector,
        "model_version": record.model_version,
        "segment_id": record.segment_id,
        "status": record.status,
        "scores": dict(record.scores) if record.scores else None,
        "evidence_ref": record.evidence_ref,
        "ts": ts,
    }
    result.outputs += _take_evidence(state, normalized, entry, ts, ctx)
    return True


def _take_evidence(
    state: State, key: str, entry: dict[str, Any], ts: int, ctx: Context
) -> list[Output]:
    """Store one detector result, plan what it unlocks (cost order), and decide."""
    state["evidence"][key] = entry
    asked = scan_plan.on_evidence(state, ctx.resolution.decide, ts, entry["detector"])
    if asked and ctx.clock_ms is not None:
        state["asked_at"] = ctx.clock_ms  # the models, asked after their gate (cost order)
    if state["content"] is None:
        return asked
    # Evidence stamped before its upload decides at the upload's ts, whether it was read
    # before the upload (joined at the upsert) or after it (a backlog's late evidence).
    return asked + _decide(state, ctx, max(ts, state["content"]["ts"]), "evidence")


def _appeal(state: State, record: Any, ts: int, ctx: Context, result: StepResult) -> bool:
    if state["appeal"] is not None:
        result.dead_letters.append(
            (
                "conflict",
                f"appeal {record.appeal_id}: appeal "
                f"{state['appeal']} is still active for this version",
            )
        )
        return False
    state["appeal"] = record.appeal_id
    task_id = f"appeal-{record.appeal_id}"
    state["tasks"].append(task_id)
    state["open_tasks"].append(task_id)
    result.outputs.append(_appeal_task(state, task_id, ctx.resolution.decide, ts))
    return True


def _join_early_evidence(
    state: State, early: dict[str, Any], ts: int, ctx: Context, result: StepResult
) -> None:
    """Evidence read before its upload, taken after the fast gate one piece at a time in its own
    ts order, as if read after the upload: the same revisions and the same cost-order steps
    either way, so the order in which a job read its lanes never shows. Requests for what the
    early evidence already answered are not sent."""
    for key, entry in sorted(early.items(), key=lambda item: (item[1].get("ts", ts), item[0])):
        taken = _take_evidence(state, key, entry, entry.get("ts", ts), ctx)
        result.outputs += _unanswered(state, taken, early)


def _unanswered(state: State, outputs: list[Output], early: dict[str, Any]) -> list[Output]:
    """`outputs` without the scan requests that evidence in `early` already answers."""
    answered = scan_plan.answered(state, early)
    return [
        (topic, key, record)
        for topic, key, record in outputs
        if not topic.startswith("scan.requests.")
        or (record["detector"], _segment(state, record["segment_id"])) not in answered
    ]


def _appeal_task(state: State, task_id: str, policy: CompiledPolicy | None, ts: int) -> Output:
    """The appeal's review task carries the appealed decision's reason codes and evidence refs
    (contract v1.1): the decision in force, the latest revision the author was told about."""
    last = state["last"] or {}
    reasons = last.get("reasons") or ["appeal"]
    refs = [{"evidence_ref": ref} for ref in last.get("refs", [])]
    task = _task(state, task_id, "appeal", "appeals", 1, reasons, refs, policy, ts)
    return ("review.tasks", state["cid"], task)


def _over_bounds(topic: str, record: Any, limits: Limits) -> str | None:
    """Why one input would make this version's state larger than the deployment allows
    (modstream/limits.py), or None. Such an input goes to the DLQ (`schema`) and changes
    nothing: an upsert declaring too many segments is never decided, its version waits for
    a valid upsert."""
    if topic == "content.versions" and record.type == "upsert":
        if record.segments > limits.max_segments:
            return (
                f"moderation: content.versions.segments: {record.segments} declared, over "
                f"the limit of {limits.max_segments}"
            )
    elif topic == "moderation.appeals" and len(f"appeal-{record.appeal_id}") > MAX_ID_CHARS:
        return (
            f"moderation: moderation.appeals.appeal_id: its task id `appeal-<appeal_id>` would "
            f"be longer than {MAX_ID_CHARS} characters"
        )
    elif topic == "detector.results" and (record.segment_id or 0) >= limits.max_segments:
        return (
            f"moderation: detector.results.segment_id: {record.segment_id} is beyond the "
            f"limit of {limits.max_segments} segments"
        )
    return None


def _report_kept(state: State | None, record: Any, ctx: Context) -> bool:
    """Whether a report can count (or be flagged) on this version: the reporter gate gave it a
    weight, the version is not deleted, the reporter is not counted yet, and fewer than
    `max_reporters` reporters are. Beyond that bound the report count saturates: review
    thresholds are far below it."""
    weight = ctx.report or ReportWeight(1.0, new_reporter=False)
    if weight.weight <= 0:
        return False
    if state is None:
        return True
    if state["deleted"] or record.reporter_id in state["reporters"]:
        return False
    return len(state["reporters"]) < ctx.limits.max_reporters


def _report(state: State, record: Any, ts: int, ctx: Context) -> list[Output]:
    """Count a report (distinct reporters, weighted), or flag a burst from new reporters as
    possible brigading instead of counting it. Reports never decide an outcome themselves."""
    weight = ctx.report or ReportWeight(1.0, new_reporter=False)
    if record.reporter_id in state["reporters"] or weight.weight <= 0:
        return []
    burst = state["burst"]
    expired = 0
    while expired < len(burst) and burst[expired][0] <= ts - BRIGADE_WINDOW_MS:
        expired += 1
    state["burst_new"] -= sum(1 for _, new in burst[:expired] if new)
    del burst[:expired]
    burst.append([ts, weight.new_reporter])
    state["burst_new"] += int(weight.new_reporter)
    overflow = len(burst) - ctx.limits.max_reporters
    if overflow > 0:  # a bounded window: the oldest reports of a storm leave it first
        state["burst_new"] -= sum(1 for _, new in burst[:overflow] if new)
        del burst[:overflow]
    policy = ctx.resolution.decide
    reports = policy.document.reports if policy is not None else None
    new_in_burst = state["burst_new"]
    if (
        weight.new_reporter
        and reports is not None
        and new_in_burst >= reports.review_threshold
        and new_in_burst * 2 > len(state["burst"])
    ):
        task_id = f"brigading-{sha256_hex(state['cid'], state['ver'])[:20]}"
        if task_id in state["tasks"] or state["content"] is None:
            return []
        state["tasks"].append(task_id)
        state["open_tasks"].append(task_id)
        outputs: list[Output] = [
            (
                "review.tasks",
                state["cid"],
                _task(
                    state,
                    task_id,
                    "review",
                    "brigading",
                    reports.priority,
                    ["possible_brigading"],
                    [],
                    policy,
                    ts,
                ),
            )
        ]
        return outputs + _decide(state, ctx, ts, "report")
    state["reporters"][record.reporter_id] = weight.weight
    state["report_weight"] += weight.weight
    return _decide(state, ctx, ts, "report")


# What a deleted version's tombstone keeps: its identity, the event ids that make late and
# duplicate input a no-op, the revision and last decision (so nothing is decided twice), the
# active appeal's id, and its TTL. Nothing that holds or derives from the content (facts,
# hashes, evidence, scores, a reviewer's reason) survives the delete.
TOMBSTONE_KEEPS = ("cid", "ver", "events", "rev", "last", "appeal", "deleted", "ttl", "ttl_timer")


def _compact_tombstone(state: State) -> None:
    """A deleted version keeps only what ignores late input (`TOMBSTONE_KEEPS`)."""
    kept = {key: state[key] for key in TOMBSTONE_KEEPS if key in state}
    if kept.get("last"):  # reason codes and evidence refs go with the content
        kept["last"] = {k: v for k, v in kept["last"].items() if k not in ("reasons", "refs")}
    state.clear()
    state.update(new_state(kept["cid"], kept["ver"]))
    state.update(kept)


HUMAN_TOPICS = ("review.decisions", "moderation.appeals")
# What a retired version keeps (`_retire`): enough to apply a review or an appeal and decide it
# again with the same revision numbers, the evidence it was decided on included. Input event
# ids, reporters, shadow decisions and timers go.
RETIRED_KEEPS = (
    "cid", "ver", "content", "evidence", "report_weight", "human", "appeal", "rev", "last",
    "tasks", "open_tasks", "provisional_expired",
)  # fmt: skip


def _stale(topic: str, record: Any) -> str:
    return (
        f"moderation: {topic}: no decision of content version {record.content_version} is "
        "kept (never decided here, or its retention ended: docs/moderation.md, 'Retention')"
    )


def _retire(state: State, ts: int, ctx: Context) -> StepResult:
    """The full state's TTL passed: keep the compact record for `review_retention_ms`. It is
    stored without the fields at their defaults (`_expanded` restores them on load); the
    content's hashes go (bank retroaction reaches retained full states only)."""
    defaults = new_state(state["cid"], state["ver"])
    record = {k: state[k] for k in RETIRED_KEEPS if state[k] != defaults[k] or k in ("cid", "ver")}
    record["content"] = {
        k: v for k, v in (state["content"] or {}).items() if k not in ("sha256", "phash")
    }
    ttl = ts + ctx.review_retention_ms
    record.update(retired=True, ttl=ttl, ttl_timer=ttl)
    return StepResult(record, timers=[ttl])


def _expanded(state: State | None) -> State | None:
    """A retired record with its omitted fields back at their defaults."""
    if state is None or not state.get("retired") or "events" in state:
        return state
    return {**new_state(state["cid"], state["ver"]), **state}


def on_timer(state: State | None, ts: int, ctx: Context) -> StepResult:
    """A deadline, a provisional expiry or a state TTL fired at event time `ts`."""
    state = _expanded(state)
    if state is None:
        return StepResult(None)
    if state["ttl"] is not None and ts >= state["ttl"]:
        if state["rev"] > 0 and not state["deleted"] and not state.get("retired"):
            return _retire(state, ts, ctx)
        return StepResult(None)  # every other final state clears its keyed state
    result = StepResult(state)
    if state.get("ttl_timer") is not None and ts >= state["ttl_timer"]:
        state["ttl_timer"] = state["ttl"]  # the TTL moved on since this timer was armed
        result.timers.append(state["ttl"])
    pending = state.get("deadline_timer")
    due = state["deadline"] is not None and not state["deleted"]
    if due and ((ts == state["deadline"] and pending is None) or ts == pending):
        postponed = _postponed(state, ctx, ts)
        if postponed is not None:
            state["deadline_timer"] = postponed
            result.timers.append(postponed)
        else:
            result.outputs += _decide_deadline(state, ctx)
            # A deadline that waited decides after later input: its PROVISIONAL_ALLOW can
            # expire before the expiry already armed (or already be past it).
            result.timers += _arm_expiry(state)
    armed = state.get("expiry_timer")
    if armed is not None and ts >= armed:
        expiry = _expire_provisional(state, ts, ctx)
        result.outputs += expiry.outputs
        result.timers += expiry.timers
    return result
