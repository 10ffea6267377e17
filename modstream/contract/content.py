"""content.versions: uploads, edits (a higher content_version) and deletes."""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import AfterValidator, Field, TypeAdapter

from modstream.contract.common import (
    MAX_TEXT_CHARS,
    Audience,
    ContentVersion,
    EventTime,
    Id,
    InputRecord,
    Modality,
    PHashHex,
    Probability,
    Sha256Hex,
)

# Where the bytes live: `scheme://…` with no control character (NUL included), no backslash and
# no `..` path segment, plain or percent-encoded. Whether the place may be read at all (media
# root, file type, size) is the scan job's check (docs/scanning.md).
_DOT_DOT = re.compile(r"(^|[/\\])(\.|%2e){2}([/\\]|$)", re.IGNORECASE)


def _safe_reference(ref: str) -> str:
    if _DOT_DOT.search(ref.split("://", 1)[-1]):
        raise ValueError("a media reference may not contain a '..' path segment")
    return ref


MediaRef = Annotated[
    str,
    Field(max_length=2048, pattern=r"^[a-z][a-z0-9+.-]*://[^\x00-\x1f\x7f\\]+$"),
    AfterValidator(_safe_reference),
]


class _ContentEvent(InputRecord):
    event_id: Id
    content_id: Id
    content_version: ContentVersion
    ts: EventTime


class ContentUpsert(_ContentEvent):
    """A new content version; it goes through the whole gate and inherits nothing."""

    type: Literal["upsert"]
    author_id: Id
    modality: Modality
    surface: Id
    region: Annotated[str, Field(pattern=r"^[A-Z]{2}$", description="ISO 3166-1 alpha-2")]
    audience: Audience
    account_risk: Probability
    size_bytes: Annotated[int, Field(ge=0)]
    mime_type: Annotated[str, Field(min_length=1, max_length=255)]
    sha256: Sha256Hex
    phash: PHashHex | None = None
    text: Annotated[str, Field(max_length=MAX_TEXT_CHARS)] | None = None
    media_ref: MediaRef | None = None
    segments: Annotated[int, Field(ge=1, le=100_000)] = 1


class ContentDelete(_ContentEvent):
    """The author or the platform removed this content version."""

    type: Literal["delete"]


ContentVersionRecord = Annotated[ContentUpsert | ContentDelete, Field(discriminator="type")]
CONTENT_VERSION_ADAPTER: TypeAdapter[ContentUpsert | ContentDelete] = TypeAdapter(
    ContentVersionRecord
)
