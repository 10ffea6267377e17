"""Signed authority inputs (contract v1.1): who may say what, checked before a record counts.

`detector.results`, `review.decisions`, `hash.bank` and `moderation.appeals` carry authority:
evidence, a human's outcome, a known-bad hash, an author's appeal. Each may carry `signature`,
`hmac-sha256:<hex>` over the canonical JSON of the record without `signature` (the same bytes
policy records sign), with the key of its producer: the detector, the reviewer, the bank or
`appeals`. A deployment lists the topics whose records must be signed; a present signature is
always checked, so a forged one never passes because signatures happen to be optional.

Keys (docs/reliability/signing.md): a JSON keys file `{producer: key}` named by
MODSTREAM_SIGNING_KEYS_FILE, and, for local stacks, MODSTREAM_SIGNING_DEV_SECRET, from which
every producer's key is derived (`derive_key`), so a test stack needs one variable. People
(reviewers, policy approvers) share the producers' namespace: an id names one key.

Pure: no PyFlink, no clock; the environment is read only by `Keyring.from_env`.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

SIGNATURE_PREFIX = "hmac-sha256:"
KEYS_FILE_VARIABLE = "MODSTREAM_SIGNING_KEYS_FILE"
DEV_SECRET_VARIABLE = "MODSTREAM_SIGNING_DEV_SECRET"
REQUIRED_VARIABLE = "MODSTREAM_SIGNATURES_REQUIRED"
APPROVAL_VARIABLE = "MODSTREAM_REQUIRE_APPROVAL"
# A person's own keys (reviewers, policy approvers): the file on their machine.
PERSON_KEYS_VARIABLE = "MODSTREAM_KEYS_FILE"


# The bytes a signature covers, and the signature itself (policy records use the same).
def canonical_json(record: Mapping[str, Any]) -> bytes:
    """The record without `signature`, keys sorted, separators `,` and `:`, no other
    whitespace, non-ASCII kept as UTF-8. NaN and infinities raise ValueError (not JSON)."""
    body = {key: value for key, value in record.items() if key != "signature"}
    return json.dumps(
        body, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    ).encode("utf-8")


def sign(record: Mapping[str, Any], key: bytes) -> str:
    """`hmac-sha256:<hex>` over `canonical_json(record)`."""
    return SIGNATURE_PREFIX + hmac.new(key, canonical_json(record), hashlib.sha256).hexdigest()


def verify(record: Mapping[str, Any], key: bytes) -> bool:
    """Constant-time check of `record['signature']` against `key`."""
    claimed = record.get("signature")
    if not isinstance(claimed, str):
        return False
    try:
        expected = sign(record, key)
    except (TypeError, ValueError, RecursionError):
        return False
    return hmac.compare_digest(claimed.encode("utf-8"), expected.encode("utf-8"))


def derive_key(secret: bytes, producer: str) -> bytes:
    """A producer's key under a dev secret: the hex HMAC-SHA256 of its id, as ASCII bytes (a
    string, so it can be written into a person's keys file as it is)."""
    return hmac.new(secret, producer.encode("utf-8"), hashlib.sha256).hexdigest().encode("ascii")


# Which topics carry authority, and whose key signs each record.
@dataclass(frozen=True)
class Producer:
    """Where a topic's records name their producer: a field, or one fixed producer."""

    field: str | None = None
    fixed: str | None = None

    def of(self, record: Mapping[str, Any]) -> str | None:
        if self.fixed is not None:
            return self.fixed
        value = record.get(self.field or "")
        return value if isinstance(value, str) and value else None

    def describe(self) -> str:
        return f"field {self.field!r}" if self.field else f"the fixed producer {self.fixed!r}"


AUTHORITY_TOPICS: dict[str, Producer] = {
    "detector.results": Producer(field="detector"),
    "review.decisions": Producer(field="reviewer_id"),
    "hash.bank": Producer(field="bank"),
    "moderation.appeals": Producer(fixed="appeals"),
}


@dataclass(frozen=True)
class Keyring:
    """The keys a deployment trusts and the topics whose records must be signed.

    Picklable (a job ships it in its config). `keys` wins over the dev secret for a producer
    it names. `require_approval`: an active policy version needs a verified approval by someone
    other than its author (operators/policy_store.py)."""

    keys: Mapping[str, bytes] = field(default_factory=dict)
    required: frozenset[str] = frozenset()
    dev_secret: bytes | None = None
    require_approval: bool = True

    def key_for(self, producer: str) -> bytes | None:
        key = self.keys.get(producer)
        if key is not None:
            return key
        if self.dev_secret is not None and producer:
            return derive_key(self.dev_secret, producer)
        return None

    def requires(self, topic: str) -> bool:
        return topic in self.required

    def with_keys(self, extra: Mapping[str, bytes]) -> Keyring:
        """This keyring plus `extra` (its own keys win)."""
        return replace(self, keys={**extra, **self.keys})

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Keyring:
        """MODSTREAM_SIGNING_KEYS_FILE (JSON `{producer: key}`, keys as UTF-8 strings),
        MODSTREAM_SIGNING_DEV_SECRET, MODSTREAM_SIGNATURES_REQUIRED (comma-separated topics,
        or `all`) and MODSTREAM_REQUIRE_APPROVAL (0 turns the policy approval check off).
        A malformed setting raises ValueError naming its variable."""
        env = os.environ if env is None else env
        keys = read_keys_file(Path(env[KEYS_FILE_VARIABLE])) if env.get(KEYS_FILE_VARIABLE) else {}
        secret = env.get(DEV_SECRET_VARIABLE)
        return cls(
            keys=keys,
            required=parse_required(env.get(REQUIRED_VARIABLE) or ""),
            dev_secret=secret.encode("utf-8") if secret else None,
            require_approval=(env.get(APPROVAL_VARIABLE) or "1").strip().lower()
            not in ("0", "false", "no"),
        )


def read_keys_file(path: Path, variable: str = KEYS_FILE_VARIABLE) -> dict[str, bytes]:
    """A JSON object `{id: key}` with string keys; anything else is a ValueError naming the
    `variable` that named the file."""
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise ValueError(f"{variable}: cannot read {path}: {error}") from None
    if not isinstance(raw, dict) or not all(
        isinstance(name, str) and name and isinstance(key, str) and key for name, key in raw.items()
    ):
        raise ValueError(f"{variable}: {path} must be a JSON object of id -> key")
    return {name: key.encode("utf-8") for name, key in raw.items()}


def person_keys_path(env: Mapping[str, str]) -> Path:
    """The person's keys file: MODSTREAM_KEYS_FILE, default ~/.config/modstream/keys.json."""
    return Path(env.get(PERSON_KEYS_VARIABLE) or Path.home() / ".config/modstream/keys.json")


def parse_required(setting: str) -> frozenset[str]:
    """`all`, or comma-separated authority topics; an unknown topic is a ValueError."""
    names = {name.strip() for name in setting.split(",") if name.strip()}
    if "all" in names:
        return frozenset(AUTHORITY_TOPICS)
    unknown = sorted(names - set(AUTHORITY_TOPICS))
    if unknown:
        raise ValueError(
            f"{REQUIRED_VARIABLE}: {', '.join(unknown)} carry no signature; "
            f"choose from {', '.join(sorted(AUTHORITY_TOPICS))} or all"
        )
    return frozenset(names)


# The check every consumer of an authority topic runs, and what producers call.
def check(topic: str, record: Mapping[str, Any], keyring: Keyring) -> str | None:
    """None when `record` (the parsed JSON object as received, `signature` included) may pass;
    else a message for a DLQ row of class `signature`. Unsigned passes only where the topic
    does not require signatures; a present signature must verify with its producer's key."""
    producer_rule = AUTHORITY_TOPICS.get(topic)
    if producer_rule is None:
        return None
    claimed = record.get("signature")
    if claimed is None:
        if keyring.requires(topic):
            return f"signing: {topic} record is unsigned; this deployment requires signatures"
        return None
    if not isinstance(claimed, str) or not claimed.startswith(SIGNATURE_PREFIX):
        return f"signing: {topic} field 'signature' is not of the form hmac-sha256:<hex>"
    producer = producer_rule.of(record)
    if producer is None:
        return f"signing: {topic} record names no producer in {producer_rule.describe()}"
    key = keyring.key_for(producer)
    if key is None:
        return (
            f"signing: {topic} signature cannot be checked: the producer in "
            f"{producer_rule.describe()} has no key in this deployment"
        )
    if not verify(record, key):
        return (
            f"signing: {topic} signature does not verify with the key of the producer in "
            f"{producer_rule.describe()}"
        )
    return None


def signed(topic: str, record: Mapping[str, Any], keyring: Keyring) -> dict[str, Any]:
    """`record` signed with its producer's key where the keyring has one (any old signature
    replaced); unchanged otherwise, as for topics that carry no authority."""
    out = dict(record)
    producer_rule = AUTHORITY_TOPICS.get(topic)
    producer = producer_rule.of(out) if producer_rule else None
    key = keyring.key_for(producer) if producer else None
    if key is not None:
        out.pop("signature", None)
        out["signature"] = sign(out, key)
    return out


# Policy approvals: a person other than the author vouches for exactly this document.
def document_digest(document: Mapping[str, Any]) -> str:
    return hashlib.sha256(canonical_json(document)).hexdigest()


def approval_record(
    document: Mapping[str, Any], approver: str, key: bytes, ts: int
) -> dict[str, Any]:
    """`{policy_id, version, document_sha256, approver, ts, signature}`, signed by the
    approver's own key."""
    record: dict[str, Any] = {
        "policy_id": document["policy_id"],
        "version": document["version"],
        "document_sha256": document_digest(document),
        "approver": approver,
        "ts": ts,
    }
    record["signature"] = sign(record, key)
    return record


def valid_approvals(
    document: Mapping[str, Any],
    author: object,
    approvals: Iterable[object],
    key_for: Callable[[str], bytes | None],
) -> list[dict[str, Any]]:
    """The approvals of exactly this document (policy_id, version and digest), by someone
    other than `author`, whose signature verifies with the approver's own key."""
    digest = document_digest(document)
    found = []
    for approval in approvals:
        if not isinstance(approval, Mapping):
            continue
        approver = approval.get("approver")
        if not isinstance(approver, str) or not approver or approver == author:
            continue
        if (
            approval.get("document_sha256") != digest
            or approval.get("policy_id") != document.get("policy_id")
            or approval.get("version") != document.get("version")
        ):
            continue
        key = key_for(approver)
        if key is not None and verify(approval, key):
            found.append(dict(approval))
    return found


__all__ = [
    "AUTHORITY_TOPICS",
    "SIGNATURE_PREFIX",
    "Keyring",
    "Producer",
    "approval_record",
    "canonical_json",
    "check",
    "derive_key",
    "document_digest",
    "parse_required",
    "person_keys_path",
    "read_keys_file",
    "sign",
    "signed",
    "valid_approvals",
    "verify",
]
