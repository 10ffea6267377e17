"""Shared builders for modstream tests: named instants, records, deterministic data.

Tests default to the same ports and run directory as `make test` (19092/19093/16379 in
.run/test), so a plain `pytest` never touches a stack started with `make up`, and to its
signing setup: every authority topic requires signatures, keys derived from one dev secret.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from modstream.trust.signing import Keyring

ROOT = Path(__file__).resolve().parent.parent
# `make test` hands its two workers one test at a time (pytest-xdist, --maxschedchunk 1); the
# slowest files (the CI's --durations) start first and the other integration tests next, so no
# worker is left running a long test alone at the end.
SLOWEST_FIRST = (
    "tests/integration/test_faults.py",
    "tests/integration/test_moderation_job.py",
    "tests/integration/test_demo.py",
    "tests/integration/test_secured_stack.py",
    "tests/integration/test_backlog.py",
    "tests/integration/test_event_time.py",
    "tests/integration/test_cluster.py",
    "tests/integration/test_restore.py",
    "tests/integration/test_engine_migration.py",
    "tests/integration/test_scan.py",
    "tests/integration/test_second_review.py",
    "tests/integration/test_console.py",
    "tests/integration/test_retention.py",
    "tests/integration/test_ingest_job.py",
    "tests/integration/test_archive_lifecycle.py",
    "tests/integration/test_policy_backtest.py",
)
for _name, _default in {
    "MODSTREAM_RUN_DIR": str(ROOT / ".run" / "test"),
    "MODSTREAM_KAFKA_PORT": "19092",
    "MODSTREAM_KAFKA_CONTROLLER_PORT": "19093",
    "MODSTREAM_REDIS_PORT": "16379",
    "MODSTREAM_SIGNING_DEV_SECRET": "modstream-test-signing",
    "MODSTREAM_SIGNATURES_REQUIRED": "all",
    # A developer's modstream.toml (their own broker, say) is not the tests' business.
    "MODSTREAM_CONFIG": "none",
}.items():
    os.environ.setdefault(_name, _default)


@pytest.fixture(autouse=True)
def _logging_as_it_was(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A test that runs `modstream.cli.main.main` or a job's main configures logging (and exports
    its format to the environment, modstream/core/logs.py): the next test starts as before."""
    import logging

    for name in ("MODSTREAM_LOG_FORMAT", "MODSTREAM_LOG_LEVEL"):
        monkeypatch.delenv(name, raising=False)
    root, own = logging.getLogger(), logging.getLogger("modstream")
    handlers, levels = list(root.handlers), (root.level, own.level)
    yield
    for handler in [h for h in root.handlers if h not in handlers]:
        root.removeHandler(handler)
    root.setLevel(levels[0])
    own.setLevel(levels[1])


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    rank = {path: index for index, path in enumerate(SLOWEST_FIRST)}

    def order(item: pytest.Item) -> tuple[int, int]:
        path = item.nodeid.split("::", 1)[0]
        return rank.get(path, len(rank)), 0 if item.get_closest_marker("integration") else 1

    items.sort(key=order)  # stable: within a rank, pytest's own order


T0 = 1_764_460_800_000  # 2025-11-30T00:00:00Z
ONE_SECOND = 1_000
ONE_MINUTE_LATER = T0 + 60 * ONE_SECOND
SECRET_TEXT = "SECRET-CONTENT-7f3a: never copy me into a message"

# The keys the test stack's jobs trust (the environment above): builders sign with them.
TEST_KEYRING = Keyring.from_env()
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


def without(record: dict[str, Any], field: str) -> dict[str, Any]:
    return {key: value for key, value in record.items() if key != field}
