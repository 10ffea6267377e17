"""Signed authority inputs (contract v1.1): who may say what, checked before a record counts.

Contract: docs/CONTRACT.md, "v1.1 additions", "Authority inputs can be signed":
`detector.results`, `review.decisions`, `hash.bank` and `moderation.appeals` may carry
`signature`, "`hmac-sha256:<hex>` over the canonical JSON of the record without `signature`",
with the key of its producer; "where the deployment requires signatures for a topic, an unsigned
or wrongly signed record goes to the DLQ with `error_class: "signature"`."

Proved by:
    tests/operators/test_signing.py::test_a_record_signed_by_its_producer_passes_and_a_forged_one_is_refused
    tests/operators/test_signing.py::test_unsigned_is_refused_only_where_required
    tests/operators/test_signing.py::test_a_reviewer_cannot_decide_as_another
    tests/operators/test_signing.py::test_signature_is_hmac_sha256_over_canonical_json_without_signature
    tests/operators/test_signing.py::test_any_change_to_a_signed_record_is_refused
    tests/jobs/test_moderation_adapter.py::test_forged_authority_records_are_refused_with_class_signature

`detector.results`, `review.decisions`, `hash.bank` and `moderation.appeals` carry authority:
evidence, a human's outcome, a known-bad hash, an author's appeal. Each may carry `signature`,
`hmac-sha256:<hex>` over the canonical JSON of the record without `signature` (the same bytes
policy records sign), with the key of its producer: the detector, the reviewer, the bank or
`appeals`. A deployment lists the topics whose records must be signed; a present signature is
always checked, so a forged one never passes because signatures happen to be optional.

Keys (modstream/trust/keyring.py, docs/RELIABILITY.md, "Keys and roles"): each id's key is bound
to a role and the topics it may sign, so a record signed by a key of the wrong role is refused
even where the key is genuine. People (reviewers, policy approvers) share the producers' namespace.

Pure: no PyFlink, no clock; the environment is read only by `Keyring.from_env`.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import msgspec

from modstream.trust.keyring import (
    DEV_SECRET_VARIABLE,
    KEYS_FILE_VARIABLE,
    PERSON_KEYS_VARIABLE,
    TOPIC_ROLES,
    Keyring,
    SigningKey,
    approval_required,
    derive_key,
    person_keys_path,
    read_keys_file,
    read_person_keys,
    refuse_dev_secret,
)

SIGNATURE_PREFIX = "hmac-sha256:"


# The bytes a signature covers, and the signature itself (policy records use the same).
def canonical_json(record: Mapping[str, Any]) -> bytes:
    """The record without `signature`, keys sorted, separators `,` and `:`, no other
    whitespace, non-ASCII kept as UTF-8, floats as Python's `repr` writes them (the bytes
    `json.dumps` gives, which every producer's signer reproduces). NaN and infinities raise
    ValueError (not JSON).

    msgspec writes the same bytes about ten times faster (2 against 18 µs for a detector
    result: the largest cost of admitting a signed record) except for floats that `repr`
    writes with an exponent (below 1e-4, or from 1e16): msgspec writes `0.00001` and `1e16`
    where `json` writes `1e-05` and `1e+16`. Bytes that may hold such a number, and every
    record msgspec refuses or does not read back as it was (NaN, a datetime), take
    `json.dumps`, which then decides (tests/operators/test_signing.py holds the two equal on
    generated JSON)."""
    body = {key: value for key, value in record.items() if key != "signature"}
    try:
        fast = _CANONICAL.encode(body)
    except (TypeError, ValueError, OverflowError, RecursionError):  # a key, a big int, a surrogate
        fast = None
    if fast is not None and _reads_back(fast, body):
        return fast
    return json.dumps(
        body, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    ).encode("utf-8")


_CANONICAL = msgspec.json.Encoder(order="sorted")


class _SpelledOtherwise(ValueError):
    """A float that `repr` writes with an exponent: msgspec spells it otherwise."""


def _positional(text: str) -> float:
    """msgspec's float hook: the number, unless `repr` writes it with an exponent (Python's
    float repr is positional exactly for 0 and 1e-4 <= |x| < 1e16)."""
    value = float(text)
    size = abs(value)
    if size != 0.0 and not 1e-4 <= size < 1e16:
        raise _SpelledOtherwise(text)
    return value


_READ = msgspec.json.Decoder(float_hook=_positional).decode


def _reads_back(fast: bytes, body: Mapping[str, Any]) -> bool:
    """True when msgspec's bytes are json's: every float positional, and the bytes read back
    as the record (msgspec writes NaN and infinities as `null`, and some values of no JSON
    type, a datetime, bytes or a set, as text or lists, where json raises)."""
    try:
        return bool(_READ(fast) == body)
    except msgspec.ValidationError:  # what msgspec makes of the hook's _SpelledOtherwise
        return False


def sign(record: Mapping[str, Any], key: bytes) -> str:
    """`hmac-sha256:<hex>` over `canonical_json(record)`."""
    return SIGNATURE_PREFIX + hmac_sha256_hex(key, canonical_json(record))


def hmac_sha256_hex(key: bytes, message: bytes) -> str:
    """HMAC-SHA256 (RFC 2104) of `message` under `key`, in hex: `hmac.digest(key, message,
    "sha256").hex()`. The key's two padded blocks are hashed once per key and kept
    (`_pads`); each message then costs two copies of those hashes, its own bytes and one block.
    OpenSSL's one-shot `hmac.digest` sets up its MAC context at every call: about 29,600
    instructions for a detector result's bytes against 17,100 (callgrind; `hmac.new` then
    `copy`, the hmac module's Python class, 22,500)."""
    pads = _PADS.get(key)
    if pads is None:
        pads = _pads(key)
    inner, outer = pads[0].copy(), pads[1].copy()
    inner.update(message)
    outer.update(inner.digest())
    return str(outer.hexdigest())


_BLOCK = 64  # SHA-256's block in bytes
_PADS: dict[bytes, tuple[Any, Any]] = {}  # key -> (inner, outer) hashes of its padded blocks
_PADS_KEPT = 256  # more keys than a keyring holds; past it the kept pads start again


def _pads(key: bytes) -> tuple[Any, Any]:
    """The key's inner and outer hashes (a key longer than a block is its digest first)."""
    block = (hashlib.sha256(key).digest() if len(key) > _BLOCK else key).ljust(_BLOCK, b"\0")
    inner = hashlib.sha256(bytes([byte ^ 0x36 for byte in block]))
    outer = hashlib.sha256(bytes([byte ^ 0x5C for byte in block]))
    if len(_PADS) >= _PADS_KEPT:
        _PADS.clear()
    _PADS[key] = (inner, outer)
    return inner, outer


def verify(record: Mapping[str, Any], key: bytes, raw: str | bytes | None = None) -> bool:
    """Constant-time check of `record['signature']` against `key`: over `canonical_json` of
    the record, or, with `raw` (the text `record` was parsed from), over the bytes received
    without their last member `"signature":"<claimed>"` (`_sent_body`). A record sent as
    `wire_json` writes it verifies the second way without being written again. The second way
    also accepts a record whose key holder signed its fields written otherwise than
    canonically (keys in another order, another spelling of a number) and sent the signature
    last: the bytes signed are still exactly this record's, so nobody without the key gains
    anything (docs/RELIABILITY.md, "Checked over the bytes sent")."""
    claimed = record.get("signature")
    if not isinstance(claimed, str):
        return False
    body = _sent_body(raw, claimed) if raw is not None else None
    if body is not None and _matches(claimed, SIGNATURE_PREFIX + hmac_sha256_hex(key, body)):
        return True
    try:
        expected = sign(record, key)
    except (TypeError, ValueError, RecursionError):
        return False
    return _matches(claimed, expected)


def _matches(claimed: str, expected: str) -> bool:
    return hmac.compare_digest(claimed.encode("utf-8"), expected.encode("utf-8"))


def wire_json(record: Mapping[str, Any]) -> str:
    """`record` as JSON text in the form its signature is cheapest to check: the canonical JSON
    of its fields but `signature` (`canonical_json`), then `signature` last. Any JSON writer
    may send a signed record; one sent so is checked over the bytes received (`verify`): a
    fifth fewer instructions to admit a detector result (docs/BENCHMARKS.md, stop 52). A record
    without `signature` is its canonical JSON."""
    body = canonical_json(record).decode("utf-8")
    if "signature" not in record:
        return body
    member = '"signature":' + json.dumps(record["signature"], ensure_ascii=False) + "}"
    return body[:-1] + ("" if body == "{}" else ",") + member


def _sent_body(raw: str | bytes, claimed: str) -> bytes | None:
    """The bytes a record sent as `wire_json` writes it was signed over: `raw` without its
    last member, `"signature":"<claimed>"`; None when `raw` does not end so.

    A text that parses as one JSON object and ends with `,"signature":"..."}` ends with a
    member of its outermost object, never with text inside a string (inside one, `,"` would
    close the string before a bare `signature`), and `<claimed>`, equal to its own unescaped
    text, holds no `"` or `\\`. So these bytes are the record without `signature`, written as
    it was sent, and a signature that verifies over them was made by the key's holder over
    exactly this record."""
    # A lone surrogate (no UTF-8 text holds one) gives bytes no signer made: no match.
    sent = raw if isinstance(raw, bytes) else raw.encode("utf-8", "surrogatepass")
    tail = b',"signature":"' + claimed.encode("utf-8", "surrogatepass") + b'"}'
    return sent[: -len(tail)] + b"}" if sent.endswith(tail) else None


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
    "review.grants": Producer(field="granted_by"),
    "review.leases": Producer(field="reviewer_id"),
}


# The check every consumer of an authority topic runs, and what producers call.
def check(
    topic: str, record: Mapping[str, Any], keyring: Keyring, raw: str | bytes | None = None
) -> str | None:
    """None when `record` (the parsed JSON object as received, `signature` included) may pass;
    else a message for a DLQ row of class `signature`. Unsigned passes only where the topic
    does not require signatures; a present signature must verify with its producer's key,
    which must be of the topic's role and granted the topic (modstream/trust/keyring.py).
    `raw`: the text `record` was parsed from, when the caller has it (`verify`)."""
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
    refusal = keyring.refusal(producer, topic)
    key = keyring.key_for(producer, TOPIC_ROLES[topic])
    if refusal is not None or key is None:
        # No key at all, or a key of another role or topic (a detector's key on a review).
        return (
            f"signing: {topic} signature refused: the producer in {producer_rule.describe()} "
            f"{refusal or 'has no key in this deployment'}"
        )
    if not verify(record, key, raw):
        return (
            f"signing: {topic} signature does not verify with the key of the producer in "
            f"{producer_rule.describe()}"
        )
    return None


def signed(topic: str, record: Mapping[str, Any], keyring: Keyring) -> dict[str, Any]:
    """`record` signed with its producer's key of the topic's role where the keyring has one
    (any old signature replaced); unchanged otherwise, as for topics that carry no authority."""
    out = dict(record)
    producer_rule = AUTHORITY_TOPICS.get(topic)
    producer = producer_rule.of(out) if producer_rule else None
    key = keyring.key_for(producer, TOPIC_ROLES[topic]) if producer else None
    if key is not None:
        out.pop("signature", None)
        out["signature"] = sign(out, key)
    return out


# Policy approvals: a person other than the author vouches for exactly this document.
def approver_key(keyring: Keyring) -> Callable[[str], bytes | None]:
    """An approver's key by id: only a key of role approver verifies an approval."""
    return lambda approver: keyring.key_for(approver, "approver")


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
    other than `author`, whose signature verifies with the approver's own key (`key_for`:
    an approver's key by id, e.g. `approver_key(keyring)`)."""
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
    "DEV_SECRET_VARIABLE",
    "KEYS_FILE_VARIABLE",
    "PERSON_KEYS_VARIABLE",
    "SIGNATURE_PREFIX",
    "TOPIC_ROLES",
    "Keyring",
    "Producer",
    "SigningKey",
    "approval_record",
    "approval_required",
    "approver_key",
    "canonical_json",
    "check",
    "derive_key",
    "document_digest",
    "person_keys_path",
    "read_keys_file",
    "read_person_keys",
    "refuse_dev_secret",
    "sign",
    "signed",
    "valid_approvals",
    "verify",
]
