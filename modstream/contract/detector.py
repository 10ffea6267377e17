"""detector.results: evidence from one detector for one segment; never a decision by itself."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Annotated, Any, Literal, Self

from pydantic import Field, model_validator

from modstream.contract.common import (
    ContentVersion,
    EventTime,
    Id,
    InputRecord,
    LanguageCode,
    Probability,
)

DetectorStatus = Literal["ok", "timeout", "error"]
MediaMs = Annotated[int, Field(ge=0)]


class Finding(InputRecord):
    """Where a reader of text in media found what it scored (modstream/detectors/text_in_media.py):
    a text box (in a frame at `frame_ms` of a video), or a stretch of speech; modstream's extra
    field (docs/contract-notes.md, "Findings")."""

    offensive: Probability | None = None
    confidence: Probability | None = None
    box: list[int] | None = None
    frame_ms: MediaMs | None = None
    start_ms: MediaMs | None = None
    end_ms: MediaMs | None = None


def first_finding_ms(findings: Iterable[Finding | dict[str, Any]] | None) -> int | None:
    """When in the media the best (first) finding is: a video frame's time, else where its
    speech starts; None for a still image or no findings. Takes the model's findings or, as
    the moderation job reads its own records back (modstream/contract/own.py), their dicts."""
    for finding in findings or ():
        fields = finding if isinstance(finding, dict) else finding.model_dump()
        at = fields.get("frame_ms")
        at = fields.get("start_ms") if at is None else at
        return at if isinstance(at, int) and not isinstance(at, bool) else None
    return None


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
    # What a reader of text in media found, best first (issue 28; docs/contract-notes.md,
    # "Findings"): the moderation job keeps the first one's time (`finding_ms`).
    findings: Annotated[list[Finding], Field(max_length=64)] | None = None

    @property
    def finding_ms(self) -> int | None:
        return first_finding_ms(self.findings)

    @model_validator(mode="after")
    def _scores_when_ok(self) -> Self:
        if self.status == "ok" and self.scores is None:
            raise ValueError("scores is required when status is ok")
        return self
