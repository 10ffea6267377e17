"""detector.results: evidence from one detector for one segment; never a decision by itself."""

from __future__ import annotations

from typing import Annotated, Literal, Self

from pydantic import Field, model_validator

from schemas.common import (
    ContentVersion,
    EventTime,
    Id,
    InputRecord,
    LanguageCode,
    Probability,
)

DetectorStatus = Literal["ok", "timeout", "error"]


class DetectorResult(InputRecord):
    """One detector's evidence. `timeout` and `error` mean UNKNOWN, never safe."""

    event_id: Id
    content_id: Id
    content_version: ContentVersion
    detector: Id
    model_version: Id
    status: DetectorStatus
    ts: EventTime
    segment_id: Annotated[int, Field(ge=0)] | None = None
    scores: dict[Annotated[str, Field(min_length=1, max_length=128)], Probability] | None = None
    evidence_ref: Annotated[str, Field(max_length=2048)] | None = None
    signature: Annotated[str, Field(max_length=1024)] | None = None
    # modstream's scan job adds its share of the batch's model call, ms (docs/contract-notes.md,
    # "Workflow version and cost"); other producers may leave it out.
    inference_ms: Annotated[int, Field(ge=0)] | None = None
    # The language of the text the detector read (issue 28 item 3; docs/contract-notes.md,
    # "Language"): an ISO 639 code in lower case and the identifier's confidence. Absent when it
    # read no text or named no language; the policy reads `und` then.
    language: LanguageCode | None = None
    language_confidence: Probability | None = None

    @model_validator(mode="after")
    def _scores_when_ok(self) -> Self:
        if self.status == "ok" and self.scores is None:
            raise ValueError("scores is required when status is ok")
        return self
