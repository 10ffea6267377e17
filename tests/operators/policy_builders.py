"""Policy documents and records for tests."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml

from modstream.policy_service import control_record
from operators.policy_store import sign
from operators.signing import approval_record
from tests.conftest import T0, TEST_KEYRING

GLOBAL_YAML = Path(__file__).resolve().parents[2] / "policy_rules" / "global.yaml"
KEY = b"test-deployment-key"


def global_document(version: int = 1, **overrides: Any) -> dict[str, Any]:
    document = yaml.safe_load(GLOBAL_YAML.read_text())
    document["version"] = version
    document.update(copy.deepcopy(overrides))
    return document


def minimal_document(
    version: int = 1, rules: list[dict[str, Any]] | None = None, **overrides: Any
) -> dict[str, Any]:
    document: dict[str, Any] = {
        "policy_id": "global",
        "version": version,
        "detectors": {"image": {"required": ["nsfw_image"], "deadline_ms": 30000}},
        "rules": rules or [],
        "default": "ALLOW",
    }
    document.update(overrides)
    return document


def approval(document: dict[str, Any], approver: str = "bob", ts: int = T0) -> dict[str, Any]:
    """`approver`'s approval of `document`, signed with their key in the test keyring."""
    key = TEST_KEYRING.key_for(approver, "approver")
    assert key is not None, "the test keyring derives every person's key"
    return approval_record(document, approver, key, ts)


def version_record(
    document: dict[str, Any],
    *,
    ts: int = T0,
    mode: str = "active",
    key: bytes = KEY,
    event_id: str | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """A signed policy.rules version; an active one carries bob's approval (the author is
    alice) unless `approvals` is given."""
    if mode == "active" and "approvals" not in extra:
        extra["approvals"] = [approval(document)]
    record: dict[str, Any] = {
        "event_id": event_id or f"pv-{document['version']}-{mode}-{ts}",
        "policy_id": document["policy_id"],
        "version": document["version"],
        "parent_version": None,
        "mode": mode,
        "author": "alice",
        "ts": ts,
        "document": document,
        **extra,
    }
    record["signature"] = sign(record, key)
    return record


def control(
    command: str,
    *,
    ts: int = T0,
    version: int | None = None,
    key: bytes = KEY,
    policy_id: str = "global",
) -> dict[str, Any]:
    return control_record(
        policy_id,
        command,
        ts=ts,
        key=key,
        version=version,
        event_id=f"ctl-{command}-{version}-{ts}",
    )
