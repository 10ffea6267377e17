"""Scan planning: which detector requests a content version needs, and when (docs/scanning.md).

Pure functions over the moderation step's state (modstream/moderation/step.py): its handlers
(modstream/moderation/rules/) call them after deciding; their outputs are
`scan.requests.<modality>` records.

Cost order (docs/scanning.md, "Cost order"): an upload the fast gate already decided (a
hash-bank match whose outcome is BLOCK, or a failed limit) gets no request at all; otherwise
the policy's `gate` detectors (deterministic checks such as `media_check`) are asked first
and the other required detectors (the models) only once every gate detector answered `ok` on
every segment and no rule that reads a gate detector matched with PENDING or BLOCK. When the
gate fails, the models are never asked and count as UNKNOWN at once (fail closed), so the
version is decided on that evidence without waiting for its deadline.

State kept here (fields of the version's `VersionState`, at their defaults in states written
before them):
- `scan`: `gate` (waiting for the gate), `models` (every required detector asked),
  `withheld` (the gate failed), `decided` (decided before any scan);
- `unasked`: the required detectors never asked; the moderation step does not wait for them
  and counts them UNKNOWN (`unknown_unasked`), except while a BLOCK bank match still decides;
- `backfilled`: detectors asked at `priority: backfill` by a re-evaluation.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

# Re-exported: the moderation step's modules import it from here (its home: modstream/core/ids.py).
from modstream.core.ids import sha256_hex as sha256_hex
from modstream.moderation import language
from modstream.moderation.state import Evidence, Output, State, uploaded
from modstream.moderation.tally import answered_segments, counted_tally
from modstream.policy.evaluate import SEVERITY_RANK, CompiledPolicy, ContentFacts, EvidenceView

# A rule reading a gate detector that matches with this outcome or worse fails the gate.
GATE_FAILS_AT = SEVERITY_RANK["PENDING"]


def segment(state: State, segment_id: int | None) -> int | None:
    segments = state.content.segments if state.content else 1
    if segments == 1 and segment_id in (None, 0):
        return 0
    return segment_id


def required(policy: CompiledPolicy | None, modality: str) -> list[str]:
    return list(policy.required_detectors(modality)) if policy else []


def sample_ms(policy: CompiledPolicy, modality: str) -> int | None:
    """The policy's frame sampling of `modality` (video: `detectors.video.sample_ms`), or None:
    every frame (modstream/detectors/video.py: Sampling)."""
    requirement = policy.document.detectors.get(modality)  # type: ignore[call-overload]
    return requirement.sample_ms if requirement is not None else None


def gate(policy: CompiledPolicy | None, modality: str) -> list[str]:
    """The required detectors that gate the others; empty when nothing would be gated (no
    `gate`, or every required detector is a gate detector)."""
    if policy is None:
        return []
    needed = policy.required_detectors(modality)
    gates = [d for d in policy.gate_detectors(modality) if d in needed]
    return gates if len(gates) < len(needed) else []


def facts(state: State) -> ContentFacts:
    """The policy's facts about the version (one place for the step and the scan plan)."""
    content = uploaded(state)
    return ContentFacts(
        modality=content.modality,
        surface=content.surface,
        region=content.region,
        audience=content.audience,
        account_risk=content.account_risk,
        size_bytes=content.size_bytes,
        mime_type=content.mime_type,
        report_count=state.report_weight,
        language=language.of_evidence(state.evidence),
    )


def bank_blocked(policy: CompiledPolicy | None, hash_matches: Iterable[str]) -> bool:
    """A hash-bank match with outcome BLOCK decides the version whatever a model says (nothing
    is more severe); a RESTRICT or PENDING bank still lets a model make it worse, so those
    versions are scanned."""
    if policy is None:
        return False
    banks = policy.hash_banks
    return any(bank in banks and banks[bank].outcome == "BLOCK" for bank in hash_matches)


def decided_without_scan(
    state: State, policy: CompiledPolicy | None, hash_matches: Iterable[str]
) -> bool:
    """Whether the fast gate decided for good: a BLOCK bank match or a failed limit."""
    if policy is None or state.content is None:
        return False
    return bank_blocked(policy, hash_matches) or bool(policy.limit_failures(facts(state)))


def answered(
    state: State, evidence: dict[str, Evidence] | None = None
) -> set[tuple[str, int | None]]:
    """(detector, segment) pairs the version's evidence (or `evidence`) already answers."""
    results = state.evidence if evidence is None else evidence
    return {(e.detector, segment(state, e.segment_id)) for e in results.values()}


def request_topic(modality: str, priority: str) -> str:
    """Live and backfill requests on topics of their own, so that a backfill never holds a
    live request back in Kafka (docs/contract-notes.md, "Scan requests")."""
    return f"scan.requests.{modality}" + (".backfill" if priority == "backfill" else "")


def _requests(
    state: State,
    policy: CompiledPolicy,
    detectors: Iterable[str],
    ts: int,
    *,
    priority: str = "live",
    text: str | None = None,
) -> list[Output]:
    """One request per (detector, segment) not already answered; the text travels inline,
    media by the reference kept in the content (`media_ref`)."""
    content = uploaded(state)
    modality = content.modality
    segments = content.segments
    received = answered(state)
    deadline = policy.deadline_ms(modality)
    optional = _optional_fields(content, policy, priority, text)
    ts = max(ts, content.ts)  # asked no earlier than the upload's own time
    if state.deadline is not None and priority == "live":
        deadline_ts: int | None = state.deadline  # models asked after the gate: same deadline
    else:
        deadline_ts = ts + deadline if deadline else None
    outputs: list[Output] = []
    for detector in detectors:
        for index in range(segments):
            if (detector, index) in received or (detector, None) in received:
                continue
            identity: tuple[object, ...] = (
                "scan",
                state.content_id,
                state.content_version,
                detector,
                index,
            )
            if priority != "live":
                identity = (*identity, priority, policy.version)
            request: dict[str, Any] = {
                "request_id": sha256_hex(*identity)[:32],
                "content_id": state.content_id,
                "content_version": state.content_version,
                "detector": detector,
                "segment_id": None if segments == 1 else index,
                "segments": segments,
                "modality": modality,
                "mime_type": content.mime_type,
                "priority": priority,
                "attempt": 1,
                "deadline_ts": deadline_ts,
                "ts": ts,
                **optional,
            }
            outputs.append((request_topic(modality, priority), state.content_id, request))
    return outputs


def _optional_fields(
    content: Any, policy: CompiledPolicy, priority: str, text: str | None
) -> dict[str, Any]:
    """A request's fields written only when they apply: the high-risk mark, the text inline,
    the media reference with its size, the video's frame sampling."""
    fields: dict[str, Any] = {}
    if priority == "live" and policy.is_high_risk(content.surface):
        fields["high_risk"] = True  # admitted first by the scan pool
    if text is not None and content.modality == "text":
        fields["text"] = text
    if content.media_ref is not None:
        fields["media_ref"] = content.media_ref
        fields["size_bytes"] = content.size_bytes  # the scan job reads no more
    sampling = sample_ms(policy, content.modality)
    if sampling is not None:
        fields["sample_ms"] = sampling
    return fields


def on_upsert(
    state: State,
    record: Any,
    policy: CompiledPolicy | None,
    ts: int,
    hash_matches: Iterable[str] = (),
) -> list[Output]:
    """The requests an upload needs once the fast gate decided: none when it decided for good;
    else the gate detectors first (the models too when the gate's evidence already came and
    passed), or every required detector when the policy gates nothing."""
    content = uploaded(state)
    if record.media_ref is not None:
        content.media_ref = record.media_ref  # the models asked after the gate need it
    detectors = required(policy, content.modality)
    if policy is None or not detectors:
        return []
    if decided_without_scan(state, policy, hash_matches):
        state.scan = "decided"
        state.unasked = detectors
        return []
    gates = gate(policy, content.modality)
    if not gates:
        state.scan = "models"
        return _requests(state, policy, detectors, ts, text=record.text)
    state.scan = "gate"
    return _requests(state, policy, gates, ts) + on_evidence(state, policy, ts)


def gate_status(state: State, policy: CompiledPolicy) -> str:
    """`waiting` (a gate detector has not answered every segment), `passed` or `failed`: a gate
    detector answered other than `ok` (or with a score that is not one), or a rule reading a
    gate detector matches with PENDING or BLOCK on the evidence so far."""
    return _gate_status(state, policy, gate(policy, uploaded(state).modality))


def _gate_status(state: State, policy: CompiledPolicy, gates: list[str]) -> str:
    """`gate_status` with the gate detectors (`gate`) already known. Only the gate detectors'
    results are read: first in any order (a result not `ok` fails the gate, a segment not yet
    answered keeps it waiting: what a video's gate does after most of its results), then, only
    once they all answered, in key order for their scores (a later key's replace an earlier
    one's, as in `EvidenceView.from_segments`)."""
    evidence = state.evidence
    segments = uploaded(state).segments
    settled = _gates_tallied(state, gates, segments)
    if settled is not None:
        return settled
    answered: dict[str, set[int | None]] = {detector: set() for detector in gates}
    keys = []
    for key, result in evidence.items():
        got = answered.get(result.detector)
        if got is None:
            continue
        if result.status != "ok":
            return "failed"
        got.add(segment(state, result.segment_id))  # None: every segment
        keys.append(key)
    span = range(segments)
    for got in answered.values():
        if None not in got and not got.issuperset(span):
            return "waiting"
    per_segment: dict[str, dict[Any, dict[str, Any]]] = {}
    for key in sorted(keys):
        result = evidence[key]
        at = segment(state, result.segment_id)
        per_segment.setdefault(result.detector, {})[(at, result.model_version)] = (
            result.scores or {}
        )
    view = EvidenceView.from_segments(per_segment, unknown=set(), outstanding=True)
    gating = set(gates)
    if view.unknown & gating:
        return "failed"
    return _gate_rule_fails(state, policy, view, gating)


def _gates_tallied(state: State, gates: list[str], segments: int) -> str | None:
    """What the walk of `_gate_status` returns before it reads scores, from the tally kept as
    the results were stored (modstream/moderation/tally.py): `failed` when a gate detector's
    result failed, `waiting` while one has not answered every segment; None once all answered
    (their scores are read then, once), or where the tally does not count every result. A
    video's gate is asked after each of its results: this keeps that ask from walking them."""
    tally = counted_tally(state)
    if tally is None:
        return None
    if any(detector in tally and tally[detector].failed for detector in gates):
        return "failed"
    if any(answered_segments(tally.get(detector), segments) < segments for detector in gates):
        return "waiting"
    return None


def _gate_rule_fails(
    state: State, policy: CompiledPolicy, view: EvidenceView, gating: set[str]
) -> str:
    """`failed` when a rule reading a gate detector matches with PENDING or BLOCK on the gate's
    evidence `view`, else `passed`."""
    verdict = policy.evaluate(facts(state), view, ts=0)
    rules = policy.rules_by_id
    for rule_id in verdict.matched_rules:
        compiled = rules.get(rule_id)
        if (
            compiled is not None
            and compiled.condition.detectors & gating
            and SEVERITY_RANK[compiled.rule.outcome] >= GATE_FAILS_AT
        ):
            return "failed"
    return "passed"


def on_evidence(
    state: State, policy: CompiledPolicy | None, ts: int, detector: str | None = None
) -> list[Output]:
    """After a detector result (of `detector`) was stored, before the version is decided:
    while the gate is pending, ask the models once it passed, or withhold them for good once
    it failed (they are then UNKNOWN at once: the decision that follows does not wait for the
    deadline). A gate result after the models were asked that fails the gate (a second
    `media_check` model version) withholds the models still unanswered too, so the decision
    depends on the evidence, not on the order it came in. Any other result, once the models
    were asked, is looked up in the policy's gate list alone (no gate built for it)."""
    if policy is None or state.content is None:
        return []
    modality = state.content.modality
    scan = state.scan
    if scan == "gate":
        recheck = False
    elif scan == "models" and detector in policy.gate_detectors(modality):
        recheck = True
    else:
        return []
    gates = gate(policy, modality)
    if recheck and detector not in gates:
        return []
    status = _gate_status(state, policy, gates)
    if recheck and status != "failed":
        return []
    if status == "waiting":
        return []
    gating = set(gates)
    models = [d for d in policy.required_detectors(modality) if d not in gating]
    if status == "failed":
        state.scan = "withheld"
        state.unasked = models
        return []
    state.scan = "models"
    priority = state.scan_priority or "live"
    state.scan_priority = None
    if priority != "live":
        state.backfilled = sorted(
            set(state.backfilled or ()) | {f"{policy.version}:{d}" for d in models}
        )
    return _requests(state, policy, models, ts, priority=priority)


def unasked(state: State) -> set[str]:
    """Required detectors this version never asked: the decision does not wait for them."""
    return set(state.unasked or ())


def unknown_unasked(
    state: State, policy: CompiledPolicy | None, hash_matches: Iterable[str]
) -> set[str]:
    """The never-asked detectors that count UNKNOWN now: all of them (fail closed), except
    while a BLOCK bank match still decides the version (nothing there to be unknown about: a
    model could not change a BLOCK, and a rule on `unknown()` would only add a needless review)."""
    if state.scan == "decided" and bank_blocked(policy, hash_matches):
        return set()
    return unasked(state)


def backfill(
    state: State,
    policy: CompiledPolicy | None,
    ts: int,
    hash_matches: Iterable[str] = (),
) -> list[Output]:
    """A re-evaluation under a policy that requires a detector the stored evidence lacks asks
    it at `priority: backfill`, once per policy version and detector. Not asked: text (not
    retained in state: the missing text detector stays UNKNOWN, fail closed), media whose
    reference was not kept (states from before `media_ref` was kept), detectors the gate
    withheld, and any version the fast gate decided for good."""
    content = state.content
    if policy is None or content is None or state.deleted or state.human is not None:
        return []
    if content.modality == "text" or content.media_ref is None:
        return []
    if state.scan == "withheld" or decided_without_scan(state, policy, hash_matches):
        return []
    done = set(state.backfilled or ())
    have = answered(state)
    segments = range(content.segments)
    wanted = [
        d
        for d in required(policy, content.modality)
        if f"{policy.version}:{d}" not in done
        and (d, None) not in have
        and any((d, s) not in have for s in segments)
    ]
    if state.scan == "gate":
        return []  # the live gate is still out: its models follow it
    gates = gate(policy, content.modality)
    status = gate_status(state, policy) if gates else "passed"
    if status == "failed":
        state.scan = "withheld"
        state.unasked = [d for d in required(policy, content.modality) if d not in gates]
        return []
    if status == "waiting":
        # Cost order holds for backfill too: the checks first, the models once they passed
        # (`on_evidence` asks them at the priority kept here).
        wanted = [d for d in wanted if d in gates]
        state.scan = "gate"
        state.scan_priority = "backfill"
    if not wanted:
        return []
    state.backfilled = sorted(done | {f"{policy.version}:{d}" for d in wanted})
    if state.unasked:  # asked now: no longer unknown by construction, but waited for
        state.unasked = [d for d in state.unasked if d not in wanted]
    return _requests(state, policy, wanted, ts, priority="backfill")


def calls_saved(
    uploads: Iterable[dict[str, Any]],
    policy: CompiledPolicy,
    asked: set[tuple[str, int, str, int]],
) -> dict[str, int]:
    """What cost ordering saved, counted from the uploads, the policy and what was asked:
    every (detector, segment) the policy requires of an upload that neither got a scan request
    nor a result (`asked`: (content_id, content_version, detector, segment index)), split into
    model calls and gate-check calls, beside the total a request per required detector would
    make (`required`). A result that came before its upload also needs no request, so it is
    in `asked` and never counted as saved."""
    counts = {"required": 0, "models": 0, "checks": 0}
    for upload in uploads:
        gates = set(policy.gate_detectors(upload["modality"]))
        for detector in required(policy, upload["modality"]):
            for index in range(upload.get("segments", 1)):
                counts["required"] += 1
                key = (upload["content_id"], upload["content_version"], detector, index)
                if key not in asked:
                    counts["checks" if detector in gates else "models"] += 1
    return counts
