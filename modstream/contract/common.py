"""Shared field types and base models for the contract's records.

Input records ignore unknown fields (the contract says so) but are otherwise strict: no
coercion of "1" to 1, of 1 to True, or of an unknown enum value to anything. Output records
forbid extra fields, so what modstream writes is exactly what the contract and the exported
JSON Schema describe.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from modstream.core.limits import Limits

# Limits that keep one hostile record from costing more than it should. Documented in
# docs/contract-notes.md; a record over them goes to the DLQ with error_class "schema".
MAX_RECORD_BYTES = Limits().max_record_bytes
MAX_ID_CHARS = 256
MAX_TEXT_CHARS = 200_000

Id = Annotated[str, Field(min_length=1, max_length=MAX_ID_CHARS)]
# An appeal becomes review task `appeal-<appeal_id>`, itself an Id: the appeal's own id is
# bounded so that its task id fits (docs/contract-notes.md; the task id: docs/CONTRACT.md,
# moderation.appeals).
APPEAL_TASK_PREFIX = "appeal-"
MAX_APPEAL_ID_CHARS = MAX_ID_CHARS - len(APPEAL_TASK_PREFIX)
AppealId = Annotated[str, Field(min_length=1, max_length=MAX_APPEAL_ID_CHARS)]
ShortText = Annotated[str, Field(max_length=4096)]
EventTime = Annotated[int, Field(ge=0, description="event time, ms since the Unix epoch")]
ContentVersion = Annotated[int, Field(ge=1)]
DecisionRevision = Annotated[int, Field(ge=1)]
Probability = Annotated[float, Field(ge=0.0, le=1.0)]
# An ISO 639 code in lower case (`en`, `arz`), or `und` (issue 28 item 3:
# modstream/moderation/language.py).
LanguageCode = Annotated[str, Field(pattern=r"^[a-z]{2,3}$")]
# ISO 639-2 "undetermined": the language a policy reads while no result names one (the detectors,
# the policy, the version's language and the quality counters all say it with this one value).
UNDETERMINED = "und"
Sha256Hex = Annotated[str, Field(pattern=r"^[0-9a-fA-F]{64}$")]
PHashHex = Annotated[str, Field(pattern=r"^[0-9a-fA-F]{16}$")]

Outcome = Literal["ALLOW", "PROVISIONAL_ALLOW", "PENDING", "RESTRICT", "BLOCK"]
# Most severe first, as the contract orders them.
OUTCOME_SEVERITY: tuple[str, ...] = ("BLOCK", "PENDING", "RESTRICT", "PROVISIONAL_ALLOW", "ALLOW")

Modality = Literal["text", "image", "audio", "video"]
Audience = Literal["all", "adult", "minor"]
Visibility = Literal["public", "limited", "hidden", "pending"]
Trigger = Literal[
    "fast_gate",
    "evidence",
    "deadline",
    "review",
    "appeal",
    "report",
    "reevaluation",
    "policy_change",
    "delete",
    "emergency",
]
WorkflowState = Literal[
    "received",
    "validating",
    "scanning",
    "classifying",
    "pending_review",
    "approved",
    "restricted",
    "blocked",
    "failed",
    "expired",
    "deleted",
]


class InputRecord(BaseModel):
    """Base of every record modstream reads: strict types, unknown fields ignored."""

    model_config = ConfigDict(strict=True, extra="ignore", frozen=True)


class OutputRecord(BaseModel):
    """Base of every record modstream writes: strict types, nothing beyond the contract."""

    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)
