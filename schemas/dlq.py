"""moderation.dlq: the one way bad input leaves a job, with a class and a sanitized message.

`dead_letter` is the single function that turns any rejected input into a DLQ record. Its
message names the topic and the offending fields and never repeats the input's values: a
rejected record may carry content text or tokens, and the DLQ is read by more people than
the content is. Only `raw` keeps the input, capped at 4 KiB, so the record can be replayed.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, ValidationError

from schemas.common import EventTime, Id, OutputRecord

ErrorClass = Literal[
    "schema", "policy", "signature", "conflict", "transient_exhausted", "permanent", "stale"
]

# Bumped when a job's decision logic or state layout changes in a way a replay must know about.
WORKFLOW_VERSION = 1
RAW_LIMIT_BYTES = 4096
MESSAGE_LIMIT_CHARS = 1024
_MAX_LISTED_ERRORS = 5


class DlqRecord(OutputRecord):
    """A rejected input and why it was rejected."""

    source_topic: Id
    key: str | None
    error_class: ErrorClass
    message: Annotated[str, Field(max_length=MESSAGE_LIMIT_CHARS)]
    attempts: Annotated[int, Field(ge=1)]
    workflow_version: Annotated[int, Field(ge=1)]
    raw: str = Field(description="the input as received, cut to at most 4096 UTF-8 bytes")
    ts: EventTime


def cap_utf8(text: str, limit_bytes: int) -> tuple[str, int]:
    """Cut `text` to at most `limit_bytes` of UTF-8 on a character boundary; return it and the
    original size in bytes."""
    encoded = text.encode("utf-8", errors="replace")
    if len(encoded) <= limit_bytes:
        return text, len(encoded)
    return encoded[:limit_bytes].decode("utf-8", errors="ignore"), len(encoded)


def _location(loc: tuple[int | str, ...]) -> str:
    return ".".join(str(part) for part in loc) if loc else "<record>"


def _sanitized(error: dict[str, Any]) -> str:
    """One pydantic error as `field: message`, with the input's value masked if echoed."""
    if error.get("type") == "union_tag_invalid":
        context = error.get("ctx") or {}
        expected = context.get("expected_tags", "")
        discriminator = str(context.get("discriminator", "the tag")).strip("'")
        return f"{discriminator}: unknown value (expected one of {expected})"
    message = str(error.get("msg", "invalid"))
    value = error.get("input")
    if isinstance(value, str | int | float) and not isinstance(value, bool):
        echoed = str(value)
        if echoed and echoed in message:
            message = message.replace(echoed, "<value>")
    return f"{_location(tuple(error.get('loc', ())))}: {message}"


def describe(error: BaseException | str) -> str:
    """A safe, field-naming description of why a record was rejected."""
    if isinstance(error, str):
        return error
    if isinstance(error, ValidationError):
        details = error.errors(include_url=False)
        parts = [_sanitized(dict(detail)) for detail in details[:_MAX_LISTED_ERRORS]]
        if len(details) > _MAX_LISTED_ERRORS:
            parts.append(f"and {len(details) - _MAX_LISTED_ERRORS} more")
        return "; ".join(parts)
    if isinstance(error, ValueError):
        # SchemaError and the operators' own errors carry messages we wrote, naming fields.
        return str(error)
    return f"{type(error).__name__}: {error}"


def dead_letter(
    source_topic: str,
    key: str | None,
    raw: str | bytes | None,
    error: BaseException | str,
    *,
    ts: int,
    error_class: ErrorClass = "schema",
    attempts: int = 1,
    operator: str = "ingest",
) -> DlqRecord:
    """Build the DLQ record for an input that `operator` rejected.

    `ts` is the input's event time when it has one, else the Kafka record's timestamp, so a
    replay of the same input writes the same DLQ record.
    """
    if isinstance(raw, bytes):
        raw = raw.decode("utf-8", errors="replace")
    raw_text, raw_size = cap_utf8(raw or "", RAW_LIMIT_BYTES)
    message = f"{operator} rejected a {source_topic} record: {describe(error)}"
    if raw_size > RAW_LIMIT_BYTES:
        message += f" (raw cut from {raw_size} to {RAW_LIMIT_BYTES} bytes)"
    message, _ = cap_utf8(message, MESSAGE_LIMIT_CHARS)
    return DlqRecord(
        source_topic=source_topic,
        key=key,
        error_class=error_class,
        message=message[:MESSAGE_LIMIT_CHARS],
        attempts=max(1, attempts),
        workflow_version=WORKFLOW_VERSION,
        raw=raw_text,
        ts=max(0, ts),
    )
