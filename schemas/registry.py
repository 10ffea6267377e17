"""Which model validates which topic, and the one parse function every job uses."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, TypeAdapter, ValidationError

from schemas.common import MAX_RECORD_BYTES
from schemas.content import CONTENT_VERSION_ADAPTER
from schemas.detector import DetectorResult
from schemas.dlq import DlqRecord, describe
from schemas.outputs import (
    AccountAction,
    Action,
    ContentVisibility,
    Decision,
    Discrepancy,
    Notification,
    ReviewTask,
    ScanRequest,
    ShadowDecision,
)
from schemas.policy import POLICY_RECORD_ADAPTER
from schemas.signals import Appeal, HashBankEntry, Reevaluate, ReviewDecision, UserReport

INPUT_TOPICS: dict[str, TypeAdapter[Any]] = {
    "content.versions": CONTENT_VERSION_ADAPTER,
    "detector.results": TypeAdapter(DetectorResult),
    "policy.rules": POLICY_RECORD_ADAPTER,
    "hash.bank": TypeAdapter(HashBankEntry),
    "moderation.reports": TypeAdapter(UserReport),
    "review.decisions": TypeAdapter(ReviewDecision),
    "moderation.appeals": TypeAdapter(Appeal),
    "moderation.reevaluate": TypeAdapter(Reevaluate),
}

OUTPUT_TOPICS: dict[str, TypeAdapter[Any]] = {
    "moderation.decisions": TypeAdapter(Decision),
    "moderation.actions": TypeAdapter(Action),
    "review.tasks": TypeAdapter(ReviewTask),
    "content.visibility": TypeAdapter(ContentVisibility),
    "moderation.discrepancies": TypeAdapter(Discrepancy),
    "account.actions": TypeAdapter(AccountAction),
    "user.notifications": TypeAdapter(Notification),
    "moderation.shadow": TypeAdapter(ShadowDecision),
    "moderation.dlq": TypeAdapter(DlqRecord),
}

# modstream's own topics (not in the contract), validated the same way.
OWN_TOPICS: dict[str, TypeAdapter[Any]] = {
    f"scan.requests.{modality}": TypeAdapter(ScanRequest)
    for modality in ("text", "image", "video", "audio")
}

TOPIC_MODELS: dict[str, TypeAdapter[Any]] = {**INPUT_TOPICS, **OUTPUT_TOPICS, **OWN_TOPICS}


class SchemaError(ValueError):
    """A record that does not satisfy the contract; its message is safe to log and store."""

    def __init__(self, topic: str, message: str) -> None:
        super().__init__(message)
        self.topic = topic


def parse(topic: str, raw: str | bytes) -> BaseModel:
    """Validate one JSON record of `topic`; raise SchemaError naming the field on any failure."""
    adapter = TOPIC_MODELS.get(topic)
    if adapter is None:
        raise SchemaError(topic, f"no schema for topic {topic!r}")
    size = len(raw.encode("utf-8")) if isinstance(raw, str) else len(raw)
    if size > MAX_RECORD_BYTES:
        raise SchemaError(topic, f"<record>: {size} bytes, over the {MAX_RECORD_BYTES}-byte limit")
    try:
        record: BaseModel = adapter.validate_json(raw)
    except ValidationError as error:
        raise SchemaError(topic, describe(error)) from None
    return record
