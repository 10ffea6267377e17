"""Policy documents and signed policy records for tests of rules and of the policy workflow.

`global_document(version, **changes)` is the shipped policy (policy_rules/global.yaml) with
top-level fields replaced; `minimal_document(rules=[...])` a policy with only the rules a test
names. `version_record` wraps a document as a signed policy.rules record (authored by alice,
approved by bob, activated), as the policy service would publish it:

    from modstream.testing.policies import global_document, version_record
    from modstream.policy.store import PolicyStore

    store = PolicyStore()
    store.install(global_document(1, default="PENDING"), ts=0)

A rule test usually goes through `modstream.testing.versions.context(**changes)`, which
installs `global_document(1, **changes)` for the per-version driver.
"""

from __future__ import annotations

import copy
from typing import Any

import yaml

from modstream.core.config import PROJECT_ROOT
from modstream.ops.policy_service import control_record
from modstream.policy.evaluate import EvidenceView
from modstream.policy.store import sign
from modstream.testing.records import T0, TEST_KEYRING
from modstream.trust.signing import approval_record
from modstream.trust.two_person import authorship_record, signed_promotion

GLOBAL_YAML = PROJECT_ROOT / "policy_rules" / "global.yaml"
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


def authorship(document: dict[str, Any], author: str = "alice", ts: int = T0) -> dict[str, Any]:
    """`author`'s own signature of `document` (role author, the test keyring's key)."""
    key = TEST_KEYRING.key_for(author, "author")
    assert key is not None, "the test keyring derives every person's key"
    return authorship_record(document, author, key, ts)


def promotion(
    document: dict[str, Any], by: str = "alice", role: str = "author", **fields: Any
) -> dict[str, Any]:
    """`by`'s signed activation of `document`: a direct push with a reason unless `fields`
    say otherwise (from_mode shadow or canary: the promotion of a candidate)."""
    key = TEST_KEYRING.key_for(by, role)
    assert key is not None
    body = {"by": by, "from_mode": "push", "forced": True, "reason": "test: pushed active"}
    chosen = {name: value for name, value in {**body, **fields}.items() if value is not None}
    return signed_promotion(document, chosen, key)


def version_record(
    document: dict[str, Any],
    *,
    ts: int = T0,
    mode: str = "active",
    key: bytes = KEY,
    event_id: str | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """A signed policy.rules version, signed by its author alice (field `authorship`); an
    active one carries bob's approval and alice's activation with a reason unless
    `approvals` or `promotion` is given (None: the field left out)."""
    if "authorship" not in extra:
        extra["authorship"] = authorship(document)
    if mode == "active" and "approvals" not in extra:
        extra["approvals"] = [approval(document)]
    if mode == "active" and "promotion" not in extra:
        extra["promotion"] = promotion(document)
    extra = {name: value for name, value in extra.items() if value is not None}
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


def evidence_view(
    outstanding: bool = False, unknown: frozenset[str] = frozenset(), **scores: float
) -> EvidenceView:
    """What policy evaluation reads of a version's evidence: `detector__label=score` keyword
    arguments (`nsfw_image__nsfw=0.97`), detectors `unknown`, or some still `outstanding`."""
    keyed = {tuple(name.split("__")): value for name, value in scores.items()}
    return EvidenceView(scores=keyed, unknown=unknown, outstanding=outstanding)  # type: ignore[arg-type]
