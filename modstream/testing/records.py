"""Record builders for tests of modstream: named instants and valid contract records.

Every builder returns a plain dict as its producer would send it (docs/CONTRACT.md), with
defaults for one content item `c-1` at `T0`; keyword arguments override any field, so a test
names only what it is about:

    from modstream.testing.records import T0, ONE_SECOND, evidence, upload

    version.send("content.versions", upload(surface="public_post"))
    version.send("detector.results", evidence(at=T0 + ONE_SECOND, scores={"offensive": 0.97}))

Authority records (reviews, grants, banks, appeals) come unsigned: sign them with
`modstream.trust.signing.signed` and a key of `TEST_KEYRING`, the keyring a test stack's jobs
trust, or feed them to a job configured with `NOTHING_REQUIRED`.
"""

from __future__ import annotations

import os
from typing import Any

from modstream.trust.keyring import DEV_SECRET_VARIABLE, REQUIRED_VARIABLE
from modstream.trust.signing import Keyring

T0 = 1_764_460_800_000  # 2025-11-30T00:00:00Z
ONE_SECOND = 1_000
ONE_MINUTE_LATER = T0 + 60 * ONE_SECOND
SECRET_TEXT = "SECRET-CONTENT-7f3a: never copy me into a message"

# The signing setup of a test stack: every authority topic signed, keys derived from one dev
# secret. A variable already set wins (a developer's own stack), as it does for the jobs.
TEST_SIGNING_ENV = {
    DEV_SECRET_VARIABLE: "modstream-test-signing",
    REQUIRED_VARIABLE: "all",
}
# The keys the test stack's jobs trust: builders sign with them.
TEST_KEYRING = Keyring.from_env({**TEST_SIGNING_ENV, **os.environ})
# Unit tests of rules other than signing feed unsigned authority records to Decode.
NOTHING_REQUIRED = Keyring(required=frozenset())


def upload(content_id: str = "c-1", at: int = T0, **overrides: Any) -> dict[str, Any]:
    """A valid content.versions upsert as its producer would send it."""
    record: dict[str, Any] = {
        "event_id": f"ev-{content_id}-{at}",
        "type": "upsert",
        "content_id": content_id,
        "content_version": 1,
        "ts": at,
        "author_id": "author-1",
        "modality": "text",
        "surface": "comment",
        "region": "DE",
        "audience": "all",
        "account_risk": 0.2,
        "size_bytes": 52,
        "mime_type": "text/plain",
        "sha256": "ab" * 32,
        "text": SECRET_TEXT,
    }
    record.update(overrides)
    return record


def delete(content_id: str = "c-1", at: int = T0, **overrides: Any) -> dict[str, Any]:
    """A content.versions delete of version 1."""
    record: dict[str, Any] = {
        "event_id": f"del-{content_id}-{at}",
        "type": "delete",
        "content_id": content_id,
        "content_version": 1,
        "ts": at,
    }
    record.update(overrides)
    return record


def evidence(content_id: str = "c-1", at: int = T0, **overrides: Any) -> dict[str, Any]:
    """A detector.results record: offensive_text scored version 1 low (0.12)."""
    record: dict[str, Any] = {
        "event_id": f"det-{content_id}-{at}",
        "content_id": content_id,
        "content_version": 1,
        "detector": "offensive_text",
        "model_version": "alt-profanity-check-1.6",
        "status": "ok",
        "ts": at,
        "segment_id": None,
        "scores": {"offensive": 0.12},
    }
    record.update(overrides)
    return record


def review_decision(**overrides: Any) -> dict[str, Any]:
    """A review.decisions record (unsigned: sign with modstream.trust.signing.signed)."""
    return {
        "event_id": "rv-1",
        "task_id": "t-1",
        "content_id": "c-1",
        "content_version": 1,
        "reviewer_id": "alice",
        "outcome": "ALLOW",
        "reason": "looks fine",
        "ts": T0,
        **overrides,
    }


def review_grant(**overrides: Any) -> dict[str, Any]:
    """A review.grants record: alice may work every queue from T0 (unsigned: sign with
    modstream.trust.signing.signed, as lead `lead-1`)."""
    return {
        "event_id": "grant-alice-1",
        "reviewer_id": "alice",
        "queues": ["*"],
        "granted_by": "lead-1",
        "ts": T0,
        **overrides,
    }


def review_lease(**overrides: Any) -> dict[str, Any]:
    """A review.leases record: alice holds task t-1 of c-1 for 15 minutes from T0."""
    return {
        "event_id": "lease-t-1-alice",
        "task_id": "t-1",
        "queue": "general",
        "content_id": "c-1",
        "content_version": 1,
        "reviewer_id": "alice",
        "ts": T0,
        "expires_ts": T0 + 900_000,
        **overrides,
    }


def blocking_review(content_id: str, at: int, reason: str = "spam") -> dict[str, Any]:
    """A reviewer's BLOCK of version 1 of `content_id` at `at` (unsigned), on a task of its own;
    `reason` is free text, not a rule reason."""
    return review_decision(
        event_id=f"rv-{content_id}-{at}",
        task_id=f"t-{content_id}",
        content_id=content_id,
        outcome="BLOCK",
        reason=reason,
        ts=at,
    )


def bank_entry(**overrides: Any) -> dict[str, Any]:
    """A hash.bank addition (unsigned)."""
    return {
        "event_id": "hb-1",
        "bank": "known_bad",
        "hash_type": "sha256",
        "hash": "a" * 64,
        "op": "add",
        "ts": T0,
        **overrides,
    }


def appeal_record(**overrides: Any) -> dict[str, Any]:
    """A moderation.appeals record (unsigned)."""
    return {
        "event_id": "ap-1",
        "appeal_id": "a-1",
        "content_id": "c-1",
        "content_version": 1,
        "decision_revision": 1,
        "user_id": "author-1",
        "ts": T0,
        **overrides,
    }


def report_record(at: int = T0, **overrides: Any) -> dict[str, Any]:
    """A moderation.reports record: user u-1 reports c-1 as spam."""
    return {
        "event_id": f"rep-{at}",
        "report_id": "r-1",
        "content_id": "c-1",
        "content_version": 1,
        "reporter_id": "u-1",
        "reason": "spam",
        "ts": at,
        **overrides,
    }


def without(record: dict[str, Any], field: str) -> dict[str, Any]:
    """`record` less `field`: the record a producer that forgot it would send."""
    return {key: value for key, value in record.items() if key != field}
