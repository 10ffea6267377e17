"""Records modstream writes: decisions, actions, tasks, visibility, sanctions, notices."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from modstream.contract.common import (
    ContentVersion,
    DecisionRevision,
    EventTime,
    Id,
    LanguageCode,
    Outcome,
    OutputRecord,
    ShortText,
    Trigger,
    Visibility,
    WorkflowState,
)

Sha256Id = Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]


class EvidenceRef(OutputRecord):
    detector: Id
    model_version: Id
    segment_id: int | None
    evidence_ref: str | None
    # The language the result named (docs/contract-notes.md, "Language"); absent when none.
    language: LanguageCode | None = None
    # When in the media the result's best finding is, ms (docs/contract-notes.md, "Findings");
    # absent for results without a time (text, a still image, no findings).
    finding_ms: Annotated[int, Field(ge=0)] | None = None


class Completeness(OutputRecord):
    """`required`/`received` count (detector, segment) pairs; `unknown` names detectors."""

    required: Annotated[int, Field(ge=0)]
    received: Annotated[int, Field(ge=0)]
    unknown: list[Id]


class Decision(OutputRecord):
    """moderation.decisions: one revision of the decision for a content version."""

    decision_id: Id
    content_id: Id
    content_version: ContentVersion
    decision_revision: DecisionRevision
    outcome: Outcome
    restriction: Id | None = None
    expires_ts: int | None = None
    reasons: list[Id]
    matched_rules: list[Id]
    policy_id: Id
    policy_version: int
    evidence: list[EvidenceRef]
    completeness: Completeness
    trigger: Trigger
    state: WorkflowState
    ts: EventTime
    # modstream's addition (docs/contract-notes.md, "Workflow version"): the workflow that made
    # the revision (modstream/contract/workflow.py); absent on revisions written before it was
    # carried.
    workflow_version: Annotated[int, Field(ge=1)] | None = None
    # modstream's addition (docs/contract-notes.md, "Language"): the version's language as the
    # rules read it (`und`: no result named one); absent on revisions written before.
    language: LanguageCode | None = None


class ShadowDecision(Decision):
    """moderation.shadow: what a shadow or canary candidate policy would have decided."""

    shadow: Literal[True]


class Action(OutputRecord):
    """moderation.actions: what the Content Service must apply (action_id = sha256 of the key)."""

    action_id: Sha256Id
    content_id: Id
    content_version: ContentVersion
    decision_revision: DecisionRevision
    outcome: Outcome
    visibility: Visibility
    restriction: Id | None = None
    policy_version: int
    ts: EventTime


class SecondReviewNote(OutputRecord):
    """modstream's addition to a second-review or escalation task (docs/contract-notes.md,
    "Second review"): which round, the task reviewed first, whether it was sampled, and for an
    escalation both reviewers' outcomes (a second review never shows the first's)."""

    round: Literal["second", "escalation"]
    of_task: Id
    sampled: bool
    outcomes: list[Outcome] | None = None


class ReviewTask(OutputRecord):
    """review.tasks: work for a human reviewer."""

    task_id: Id
    kind: Literal["review", "appeal"]
    content_id: Id
    content_version: ContentVersion
    decision_revision: DecisionRevision
    policy_version: int
    queue: Id
    priority: Annotated[int, Field(ge=0)]
    reasons: list[Id]
    evidence: list[str]
    ts: EventTime
    # modstream's additions (docs/contract-notes.md, "Second review" and "Escalation").
    second_review: SecondReviewNote | None = None
    escalated_from: Id | None = None


class ContentVisibility(OutputRecord):
    """content.visibility: what users can actually see now (written by enforcement).
    `decision_revision` 0: no decision applied to this version yet (a new upload, pending)."""

    content_id: Id
    content_version: ContentVersion
    decision_revision: Annotated[int, Field(ge=0)]
    visibility: Visibility
    ts: EventTime


class Discrepancy(OutputRecord):
    """moderation.discrepancies: desired and effective visibility disagree."""

    content_id: Id
    content_version: ContentVersion
    desired_visibility: Visibility
    effective_visibility: Visibility
    decision_revision: DecisionRevision
    age_ms: Annotated[int, Field(ge=0)]
    action: Literal["retry", "alert"]
    ts: EventTime


Sanction = Literal[
    "strike", "strike_reversed", "posting_suspended", "account_suspended", "sanction_lifted"
]


class AccountAction(OutputRecord):
    """account.actions: a sanction on the author, exactly once per offense."""

    action_id: Sha256Id
    user_id: Id
    sanction: Sanction
    content_id: Id
    content_version: ContentVersion
    decision_revision: DecisionRevision
    policy_version: int
    reason: Id
    strike_count: Annotated[int, Field(ge=0)]
    expires_ts: int | None = None
    ts: EventTime


class Notification(OutputRecord):
    """user.notifications: what the author is told; never evidence, scores or rule text."""

    notification_id: Id
    user_id: Id
    content_id: Id
    content_version: ContentVersion
    decision_revision: DecisionRevision
    outcome: Outcome
    reason_code: Id
    message: ShortText
    appeal_allowed: bool
    ts: EventTime


class ScanRequest(OutputRecord):
    """scan.requests.<modality> and scan.requests.<modality>.backfill (modstream's own): one
    (content version, detector, segment) to scan; the text travels inline, media by reference.
    docs/scanning.md."""

    request_id: Id
    content_id: Id
    content_version: ContentVersion
    detector: Id
    segment_id: Annotated[int, Field(ge=0)] | None
    segments: Annotated[int, Field(ge=1)]
    modality: Literal["text", "image", "video", "audio"]
    mime_type: Annotated[str, Field(min_length=1, max_length=255)]
    priority: Literal["live", "backfill"]
    attempt: Annotated[int, Field(ge=1)]
    deadline_ts: int | None
    text: str | None = None
    media_ref: Annotated[str, Field(max_length=2048)] | None = None
    # The upload's declared size: the scan job reads at most this many bytes of `media_ref`.
    size_bytes: Annotated[int, Field(ge=0)] | None = None
    # A live request for a policy's high-risk surface: admitted first
    # (modstream/scanning/admission.py); written only when true.
    high_risk: bool = False
    # Video: the policy's frame sampling (`detectors.video.sample_ms`, docs/policy-language.md);
    # absent when the policy sets none (every frame is scored).
    sample_ms: Annotated[int, Field(ge=0)] | None = None
    ts: EventTime


class IndexEntry(OutputRecord):
    """moderation.index (modstream's own, compacted, key `<content_version>:<content_id>`): a
    content version's latest decision and the facts re-evaluation selects by."""

    content_id: Id
    content_version: ContentVersion
    decision_revision: DecisionRevision
    outcome: Outcome
    state: Annotated[str, Field(min_length=1, max_length=32)]
    policy_id: Id
    policy_version: Annotated[int, Field(ge=0)]
    surface: Id | None  # as content.versions has them
    region: Annotated[str, Field(max_length=8)] | None
    modality: Literal["text", "image", "video", "audio"] | None
    detectors: list[Id]
    human: bool
    upload_ts: int | None
    ts: EventTime
    # The version's language (`und`: none named; null: no content); absent before it was kept.
    language: LanguageCode | None = None


class Exposure(OutputRecord):
    """enforcement.exposure (modstream's own, key content_id): a content version's exposure
    window, from its first showing to the restriction that took effect
    (modstream/moderation/exposure.py, docs/enforcement.md "Exposure window"); both times are
    content.visibility `ts`."""

    content_id: Id
    content_version: ContentVersion
    decision_revision: DecisionRevision
    outcome: Literal["BLOCK", "RESTRICT"]
    surface: Id
    region: Annotated[str, Field(min_length=1, max_length=16)]
    trigger: Trigger
    shown_visibility: Literal["public", "limited"]
    shown_ts: EventTime
    restricted_visibility: Visibility
    restricted_ts: EventTime
    exposure_ms: Annotated[int, Field(ge=0)]
    ts: EventTime
