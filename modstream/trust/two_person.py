"""The two-person rule on policy versions (issue 27, point 5): who wrote a version, who
activated it and why, each signed with that person's own key.

The deployment key (MODSTREAM_POLICY_KEY) signs every policy.rules record, so it says only that
the record came through the deployment's tooling; whoever holds it could name anyone as
`author`. Here each person vouches with their own key for exactly one document (`policy_id`,
`version`, `document_sha256`):

- `authorship`: the author's signature, key of role `author` of the id the record names as
  `author`. Without it an approval by "someone other than the author" proves nothing.
- `promotion`: on an active version, the activation: who (`by`, key of role `author` or
  `approver`), from a shadow or canary candidate through the gate (`modstream policy
  promote`), or pushed active directly with a `reason` (`modstream policy push --mode active`).

Both are optional fields the contract's strictness allows (docs/contract-notes.md). Pure: no
PyFlink, no clock. docs/RELIABILITY.md, "The two-person rule".
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from modstream.trust.keyring import Keyring
from modstream.trust.signing import document_digest, sign, verify

AUTHORSHIP_FIELD = "authorship"
PROMOTION_FIELD = "promotion"
# The roles whose key may sign an activation (`promotion.by`): the author who pushes or
# promotes their own candidate, or an approver who promotes it.
PROMOTER_ROLES = ("author", "approver")
CANDIDATE_MODES = ("shadow", "canary")


def _vouching(document: Mapping[str, Any]) -> dict[str, Any]:
    """What a person's signature names: exactly this document."""
    return {
        "policy_id": document["policy_id"],
        "version": document["version"],
        "document_sha256": document_digest(document),
    }


def authorship_record(
    document: Mapping[str, Any], author: str, key: bytes, ts: int
) -> dict[str, Any]:
    """`{policy_id, version, document_sha256, author, ts, signature}`, signed by the author's
    own key (role author)."""
    record: dict[str, Any] = {**_vouching(document), "author": author, "ts": ts}
    record["signature"] = sign(record, key)
    return record


def signed_promotion(
    document: Mapping[str, Any], fields: Mapping[str, Any], key: bytes
) -> dict[str, Any]:
    """The `promotion` field (`fields`: by, from_mode, reason, the gate's figures...) naming
    this document, signed with the key of `fields['by']`."""
    record: dict[str, Any] = {**dict(fields), **_vouching(document)}
    record.pop("signature", None)
    record["signature"] = sign(record, key)
    return record


def _names(vouch: Mapping[str, Any], document: Mapping[str, Any]) -> bool:
    return all(vouch.get(name) == value for name, value in _vouching(document).items())


def authorship_refusal(record: Mapping[str, Any], keyring: Keyring) -> str | None:
    """Why the version `record` has no valid author signature, or None. The message names the
    policy, the version and the field, never a key."""
    name = f"policy_store: {record.get('policy_id')} v{record.get('version')}"
    authorship = record.get(AUTHORSHIP_FIELD)
    author = record.get("author")
    if not isinstance(authorship, Mapping):
        return f"{name} has no author signature (field {AUTHORSHIP_FIELD})"
    if authorship.get("author") != author or not _names(authorship, record["document"]):
        return (
            f"{name}: field {AUTHORSHIP_FIELD} is not the signature of the record's author "
            f"for this document"
        )
    key = keyring.key_for(str(author), "author")
    if key is None or not verify(authorship, key):
        return (
            f"{name}: field {AUTHORSHIP_FIELD} does not verify with the key of role author "
            f"of the id in field author"
        )
    return None


def promoter_key_verifies(promotion: Mapping[str, Any], keyring: Keyring) -> bool:
    """The promotion verifies with its `by`'s own key of role author or approver."""
    by = promotion.get("by")
    if not isinstance(by, str) or not by:
        return False
    keys = (keyring.key_for(by, role) for role in PROMOTER_ROLES)
    return any(key is not None and verify(promotion, key) for key in keys)


def promotion_refusal(record: Mapping[str, Any], keyring: Keyring, *, promotes: bool) -> str | None:
    """Why the active version `record` has no valid activation, or None: a `promotion` naming
    this document, signed by its `by`, and either the promotion of the candidate it was
    (`promotes`: the store saw it as shadow or canary with the same document) or a `reason`."""
    name = f"policy_store: {record.get('policy_id')} v{record.get('version')} mode active"
    promotion = record.get(PROMOTION_FIELD)
    if not isinstance(promotion, Mapping):
        return (
            f"{name} has no signed activation (field {PROMOTION_FIELD}): promote a shadow or "
            f"canary candidate, or push it active with a reason"
        )
    if not _names(promotion, record["document"]) or not promoter_key_verifies(promotion, keyring):
        return (
            f"{name}: field {PROMOTION_FIELD} does not verify with the key (role author or "
            f"approver) of the id in {PROMOTION_FIELD}.by for this document"
        )
    gated = promotion.get("from_mode") in CANDIDATE_MODES and promotes
    reason = promotion.get("reason")
    if not gated and not (isinstance(reason, str) and reason.strip()):
        return (
            f"{name}: activated without the promotion gate and without a reason "
            f"(field {PROMOTION_FIELD}.reason)"
        )
    return None
