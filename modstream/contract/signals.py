"""Inputs that are not content or evidence: hash banks, reports, reviews, appeals, re-evaluation."""

from __future__ import annotations

from typing import Annotated, Literal, Self

from pydantic import Field, model_validator

from modstream.contract.common import (
    AppealId,
    ContentVersion,
    DecisionRevision,
    EventTime,
    Id,
    InputRecord,
    Outcome,
    ShortText,
)

_HASH_PATTERNS = {"sha256": 64, "phash": 16}
# `hmac-sha256:<hex>` of the producer (contract v1.1); checked by modstream/trust/signing.py, so a
# malformed one is refused as a signature, not as a schema error.
OptionalSignature = Annotated[str, Field(max_length=1024)] | None
_HEX = frozenset("0123456789abcdefABCDEF")


def hash_bank_key(bank: str, hash_type: str, hash_hex: str) -> str:
    """The Kafka key of a hash.bank record: `<bank>:<hash_type>:<lowercase hash>`, so the
    compacted topic keeps one record per (bank, hash) (docs/contract-notes.md, "hash.bank
    keys"; issue 27)."""
    return f"{bank}:{hash_type}:{hash_hex.lower()}"


def hash_bank_key_problem(key: str | None, record: HashBankEntry) -> str | None:
    """Why a hash.bank record's Kafka key does not name its body, or None. The bare hash
    (the contract's key) is still read."""
    if key == hash_bank_key(record.bank, record.hash_type, record.hash):
        return None
    if key is not None and key.lower() == record.hash.lower():
        return None
    return (
        "hash.bank: the record's key does not match its body's bank, hash_type and hash "
        "(expected `<bank>:<hash_type>:<hash>`); nothing changed"
    )


class HashBankEntry(InputRecord):
    """Adds a hash to, or removes it from, a named bank (hash.bank, keyed by bank and hash)."""

    event_id: Id
    bank: Id
    hash_type: Literal["sha256", "phash"]
    hash: Id
    op: Literal["add", "remove"]
    ts: EventTime
    signature: OptionalSignature = None

    @model_validator(mode="after")
    def _hash_matches_type(self) -> Self:
        width = _HASH_PATTERNS[self.hash_type]
        if len(self.hash) != width or not set(self.hash) <= _HEX:
            raise ValueError(f"hash must be {width} hex characters for hash_type {self.hash_type}")
        return self


class UserReport(InputRecord):
    """moderation.reports: a signal, never a sanction by itself."""

    event_id: Id
    report_id: Id
    content_id: Id
    content_version: ContentVersion
    reporter_id: Id
    reason: Id
    ts: EventTime


class ReviewDecision(InputRecord):
    """review.decisions: a human outcome, fenced to its content_version."""

    event_id: Id
    task_id: Id
    content_id: Id
    content_version: ContentVersion
    reviewer_id: Id
    outcome: Outcome
    reason: ShortText
    ts: EventTime
    signature: OptionalSignature = None


class Appeal(InputRecord):
    """moderation.appeals: the author contests a decision revision."""

    event_id: Id
    appeal_id: AppealId
    content_id: Id
    content_version: ContentVersion
    decision_revision: DecisionRevision
    user_id: Id
    ts: EventTime
    signature: OptionalSignature = None


class Reevaluate(InputRecord):
    """moderation.reevaluate: re-decide on stored evidence, no detector call."""

    event_id: Id
    content_id: Id
    content_version: ContentVersion
    reason: ShortText
    ts: EventTime
