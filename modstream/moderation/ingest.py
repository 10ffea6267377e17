"""The ingest check: validate one raw input record against the contract.

A valid record leaves normalized (defaults filled in, unknown fields dropped) and keyed by its
content_id; anything else leaves as a DLQ record. Nothing is dropped and nothing raises.
"""

from __future__ import annotations

from typing import Final

from modstream.contract import SchemaError, dead_letter, parse
from modstream.core.values import Value
from modstream.moderation.admission import document_of, event_time


class Routed(Value):
    """One output record: where it goes, its Kafka key and its JSON value."""

    FIELDS = ("topic", "key", "value", "rejected")

    def __init__(self, topic: str, key: str | None, value: str, rejected: bool) -> None:
        self.topic: Final = topic
        self.key: Final = key
        self.value: Final = value
        self.rejected: Final = rejected


def check(
    source_topic: str,
    key: str | None,
    value: str | None,
    record_ts: int,
    *,
    valid_topic: str,
    dlq_topic: str,
    schema_topic: str | None = None,
) -> Routed:
    """Route one record read from `source_topic` to `valid_topic` or to the DLQ.

    `schema_topic` is the contract topic whose schema applies when the physical topic has
    another name (a deployment prefix, a test's unique topic); it defaults to `source_topic`.
    """
    try:
        record = parse(schema_topic or source_topic, value if value is not None else "")
    except SchemaError as error:
        letter = dead_letter(
            source_topic,
            key,
            value,
            error,
            ts=event_time(document_of(value), record_ts),
            operator="ingest_check",
        )
        return Routed(dlq_topic, key, letter.model_dump_json(), rejected=True)
    content_id = getattr(record, "content_id", None)
    return Routed(
        valid_topic,
        content_id if content_id is not None else key,
        record.model_dump_json(exclude_none=True),
        rejected=False,
    )
