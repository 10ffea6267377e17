"""What the console lets a reviewer do, from grant records checked as the moderation job checks
them: a signed grant applies, a forged or unsigned one does not; the queues in force at a time;
a lease held by another refuses; outcomes and reason codes from the policy."""

from __future__ import annotations

import json

import pytest

from modstream.console.permissions import (
    Refused,
    admit_grant,
    check_decision,
    granted_queues,
    reason_codes,
    require_grant,
    require_lease,
    sensitive,
)
from modstream.review.access import ReviewGrants
from modstream.review.queue import grant_record
from modstream.testing.records import T0
from modstream.trust.keyring import Keyring
from modstream.trust.signing import signed

KEYRING = Keyring(dev_secret=b"console-permissions-test")


def grant(reviewer: str, queues: list[str], ts: int, lead: str = "lead-1") -> bytes:
    record = signed("review.grants", grant_record(reviewer, queues, lead, ts), KEYRING)
    return json.dumps(record).encode()


def test_a_signed_grant_applies_from_its_ts_and_a_revocation_ends_it() -> None:
    grants = ReviewGrants()
    assert admit_grant(grant("carol", ["adult"], T0), KEYRING, grants) is None
    assert admit_grant(grant("carol", [], T0 + 1_000), KEYRING, grants) is None
    require_grant(grants, "carol", "adult", T0 + 500)
    with pytest.raises(Refused, match="no grant of queue 'adult'"):
        require_grant(grants, "carol", "adult", T0 + 1_000)
    with pytest.raises(Refused):
        require_grant(grants, "carol", "adult", T0 - 1)


def test_an_unsigned_or_forged_grant_gives_nothing() -> None:
    grants = ReviewGrants()
    unsigned = json.dumps(grant_record("mallory", ["*"], "lead-1", T0)).encode()
    assert "unsigned" in (admit_grant(unsigned, KEYRING, grants) or "")
    forged = json.loads(grant("mallory", ["*"], T0))
    forged["queues"] = ["*", "adult"]  # changed after signing
    assert "does not verify" in (admit_grant(json.dumps(forged).encode(), KEYRING, grants) or "")
    assert "Field required" in (admit_grant(b'{"reviewer_id": 1}', KEYRING, grants) or "")
    assert grants.queues_at("mallory", T0 + 1) == frozenset()


def test_granted_queues_are_the_known_ones_the_grant_covers() -> None:
    grants = ReviewGrants()
    grants.apply("carol", ["adult", "media"], T0)
    grants.apply("alice", ["*"], T0)
    known = ["text", "adult", "appeals"]
    assert granted_queues(grants, "carol", known, T0) == ["adult"]
    assert granted_queues(grants, "alice", known, T0) == ["adult", "appeals", "text"]
    assert granted_queues(grants, "bob", known, T0) == []


def test_only_the_lease_holder_may_open_or_decide_a_task() -> None:
    require_lease({"reviewer": "carol"}, "carol", "t-1")
    for lease in ({"reviewer": "bob"}, {}):
        with pytest.raises(Refused, match="not claimed by reviewer carol"):
            require_lease(lease, "carol", "t-1")


POLICY = {
    "rules": [{"id": "r", "reason": "sexual_content"}, {"id": "s"}],
    "hash_banks": {"known_bad": {"outcome": "BLOCK", "reason": "known_match"}},
    "notices": {"spam": "..."},
}


def test_reason_codes_are_the_policys() -> None:
    assert reason_codes(POLICY) == ["known_match", "sexual_content", "spam"]
    check_decision("BLOCK", "sexual_content", reason_codes(POLICY))
    check_decision("ALLOW", "", reason_codes(POLICY))
    with pytest.raises(Refused, match="not a reason code"):
        check_decision("BLOCK", "because I said so", reason_codes(POLICY))
    with pytest.raises(Refused, match="outcome 'DELETE'"):
        check_decision("DELETE", "", reason_codes(POLICY))


@pytest.mark.parametrize(
    ("queue", "reasons", "blurred"),
    [
        ("adult", [], True),
        ("media", ["sexual_content"], True),
        ("appeals", ["csam_match"], True),
        ("text", ["harassment"], False),
        ("appeals", ["appeal"], False),
    ],
)
def test_sensitive_evidence_is_blurred(queue: str, reasons: list[str], blurred: bool) -> None:
    assert sensitive({"queue": queue, "reasons": reasons}) is blurred
