"""The two-person rule (issue 27, point 5): the author signs with their own key, an approval
by the author does not count, and an active version carries a signed activation."""

from __future__ import annotations

from typing import Any

import pytest

from modstream.policy.store import PolicyStore, Rejected, sign
from modstream.testing.policies import (
    KEY,
    approval,
    authorship,
    global_document,
    promotion,
    version_record,
)
from modstream.testing.records import T0, TEST_KEYRING
from modstream.trust.two_person import authorship_record


def _refused(record: dict[str, Any], store: PolicyStore | None = None) -> Rejected:
    store = store or PolicyStore(TEST_KEYRING)
    with pytest.raises(Rejected) as caught:
        store.apply(record, KEY)
    assert store.snapshot("global") is None  # nothing changed
    return caught.value


@pytest.mark.parametrize("mode", ["active", "shadow"])
def test_a_version_without_its_authors_signature_is_refused(mode: str) -> None:
    refused = _refused(version_record(global_document(2), mode=mode, authorship=None))
    assert refused.error_class == "signature"
    assert "has no author signature (field authorship)" in str(refused)


def test_an_author_signature_made_with_another_ids_key_is_refused() -> None:
    document = global_document(2)
    # mallory signs with her own author key but the record (and its authorship) name alice.
    mallory_key = TEST_KEYRING.key_for("mallory", "author")
    assert mallory_key is not None
    forged = authorship_record(document, "alice", mallory_key, T0)
    refused = _refused(version_record(document, authorship=forged))
    assert refused.error_class == "signature"
    assert "does not verify with the key of role author" in str(refused)
    # alice's key of another role (approver) does not sign as an author either.
    approver_key = TEST_KEYRING.key_for("alice", "approver")
    assert approver_key is not None
    wrong_role = authorship_record(document, "alice", approver_key, T0)
    assert _refused(version_record(document, authorship=wrong_role)).error_class == "signature"


def test_an_authorship_of_another_author_or_document_is_refused() -> None:
    document = global_document(2)
    bobs = authorship(document, "bob")  # genuine, but the record names alice as author
    assert "not the signature of the record's author" in str(
        _refused(version_record(document, authorship=bobs))
    )
    other = authorship(global_document(2, default="BLOCK"))
    assert _refused(version_record(document, authorship=other)).error_class == "signature"


def test_an_approval_by_the_author_does_not_count() -> None:
    """One person with an author and an approver key cannot publish alone: naming bob as
    author needs bob's author key, and approving as the author does not count."""
    document = global_document(2)
    alone = version_record(document, approvals=[approval(document, "alice")])
    refused = _refused(alone)
    assert (refused.error_class, "has no approval" in str(refused)) == ("policy", True)
    # Naming someone else as author, signed with one's own key, is refused as a signature.
    mallory_key = TEST_KEYRING.key_for("mallory", "author")
    assert mallory_key is not None
    record = version_record(document, approvals=[approval(document, "mallory")])
    record["author"] = "bob"
    record["authorship"] = authorship_record(document, "bob", mallory_key, T0)
    record["signature"] = sign(record, KEY)
    assert _refused(record).error_class == "signature"
    assert PolicyStore(TEST_KEYRING).apply(version_record(document), KEY)  # alice and bob


def test_an_active_version_needs_a_signed_activation() -> None:
    document = global_document(2)
    missing = _refused(version_record(document, promotion=None))
    assert missing.error_class == "policy"
    assert "has no signed activation (field promotion)" in str(missing)
    no_reason = _refused(version_record(document, promotion=promotion(document, reason=" ")))
    assert "without the promotion gate and without a reason" in str(no_reason)
    # A gate result on a version that was never a candidate is not a promotion.
    gate_claimed = promotion(document, from_mode="shadow", reason=None)
    assert _refused(version_record(document, promotion=gate_claimed)).error_class == "policy"


def test_a_promotion_signed_with_someone_elses_key_is_refused() -> None:
    document = global_document(2)
    forged = promotion(document, by="alice")
    forged["by"] = "carol"  # alice's signature, claimed as carol's
    refused = _refused(version_record(document, promotion=forged))
    assert "does not verify with the key (role author or approver)" in str(refused)
    of_another = promotion(global_document(2, default="BLOCK"))
    assert _refused(version_record(document, promotion=of_another)).error_class == "policy"
    by_an_approver = promotion(document, by="bob", role="approver")
    assert PolicyStore(TEST_KEYRING).apply(version_record(document, promotion=by_an_approver), KEY)


def test_a_promoted_candidate_needs_no_reason() -> None:
    candidate = global_document(2, default="PENDING")
    store = PolicyStore(TEST_KEYRING)
    store.apply(version_record(candidate, ts=T0, mode="shadow"), KEY)
    gated = promotion(candidate, by="bob", role="approver", from_mode="shadow", reason=None)
    assert store.apply(version_record(candidate, ts=T0 + 10, event_id="p", promotion=gated), KEY)
    assert store.snapshot("global").active == 2  # type: ignore[union-attr]
