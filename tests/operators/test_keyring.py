"""Keys bound to roles and topics, the secure defaults, and where a dev secret may be used
(modstream/trust/keyring.py, issue 27)."""

from __future__ import annotations

import json
import logging
import pickle
from pathlib import Path
from typing import Any

import pytest

from modstream.jobs.keys import job_keyring
from modstream.testing.records import T0, appeal_record, bank_entry, evidence, review_decision
from modstream.trust.keyring import ROLE_TOPICS, TOPIC_ROLES, refuse_dev_secret
from modstream.trust.signing import (
    AUTHORITY_TOPICS,
    Keyring,
    SigningKey,
    approval_record,
    approver_key,
    check,
    derive_key,
    sign,
    signed,
    valid_approvals,
)

SECRET = b"unit-dev-secret"
DEV = Keyring(dev_secret=SECRET)
FILE_KEYS = {
    "offensive_text": {"role": "detector", "key": "detector-key"},
    "alice": {"role": "reviewer", "key": "alice-key"},
    "known_bad": {"role": "bank", "key": "bank-key"},
    "appeals": {"role": "appeals", "key": "appeals-key"},
    "carol": {"role": "approver", "key": "carol-key"},
}


def keys_file(tmp_path: Path, content: dict[str, Any] = FILE_KEYS) -> Path:
    path = tmp_path / "keys.json"
    path.write_text(json.dumps(content))
    return path


def from_file(tmp_path: Path) -> Keyring:
    return Keyring.from_env({"MODSTREAM_SIGNING_KEYS_FILE": str(keys_file(tmp_path))})


def signed_with(record: dict[str, Any], key: bytes) -> dict[str, Any]:
    body = {name: value for name, value in record.items() if name != "signature"}
    return {**body, "signature": sign(body, key)}


def test_every_authority_topic_has_one_role_and_every_role_its_topics() -> None:
    assert set(TOPIC_ROLES) == set(AUTHORITY_TOPICS)
    for topic, role in TOPIC_ROLES.items():
        assert topic in ROLE_TOPICS[role]
    assert set(ROLE_TOPICS) >= {"detector", "reviewer", "bank", "appeals", "approver", "author"}


# The measured attacks (issue 27, point 2), with a keys file and with a dev secret.
def test_a_review_signed_with_a_detectors_key_is_refused(tmp_path: Path) -> None:
    keyring = from_file(tmp_path)
    as_detector = signed_with(review_decision(reviewer_id="offensive_text"), b"detector-key")
    message = check("review.decisions", as_detector, keyring)
    assert message == (
        "signing: review.decisions signature refused: the producer in field 'reviewer_id' "
        "holds a key of role detector, which may not sign review.decisions"
    )
    as_appeals = signed_with(review_decision(reviewer_id="appeals"), b"appeals-key")
    assert "role appeals" in (check("review.decisions", as_appeals, keyring) or "")
    genuine = signed("review.decisions", review_decision(), keyring)
    assert check("review.decisions", genuine, keyring) is None


def test_a_bank_entry_signed_with_a_reviewers_key_is_refused(tmp_path: Path) -> None:
    keyring = from_file(tmp_path)
    as_reviewer = signed_with(bank_entry(bank="alice"), b"alice-key")
    message = check("hash.bank", as_reviewer, keyring)
    assert message is not None and "role reviewer, which may not sign hash.bank" in message
    assert check("hash.bank", signed("hash.bank", bank_entry(), keyring), keyring) is None


def test_a_derived_key_is_bound_to_its_role() -> None:
    """With a dev secret the scan job signs as detector `offensive_text`: that key signs no
    review naming `offensive_text`, and the appeals producer's key no review naming it."""
    detector_key = DEV.key_for("offensive_text", "detector")
    assert detector_key is not None
    assert check("detector.results", signed("detector.results", evidence(), DEV), DEV) is None
    as_detector = signed_with(review_decision(reviewer_id="offensive_text"), detector_key)
    message = check("review.decisions", as_detector, DEV)
    assert message is not None and "does not verify" in message
    appeals_key = DEV.key_for("appeals", "appeals")
    assert appeals_key is not None
    assert (
        check("moderation.appeals", signed("moderation.appeals", appeal_record(), DEV), DEV) is None
    )
    as_appeals = signed_with(review_decision(reviewer_id="appeals"), appeals_key)
    assert check("review.decisions", as_appeals, DEV) is not None
    reviewer_key = DEV.key_for("alice", "reviewer")
    assert reviewer_key is not None
    as_bank = signed_with(bank_entry(bank="alice"), reviewer_key)
    assert check("hash.bank", as_bank, DEV) is not None


def test_an_id_in_the_keys_file_gets_no_derived_key_for_another_role(tmp_path: Path) -> None:
    """The keys file wins: a detector listed there is a detector, whatever the dev secret."""
    keyring = Keyring.from_env(
        {
            "MODSTREAM_SIGNING_KEYS_FILE": str(keys_file(tmp_path)),
            "MODSTREAM_SIGNING_DEV_SECRET": "d",
        }
    )
    assert keyring.key_for("offensive_text", "reviewer") is None
    forged = signed_with(
        review_decision(reviewer_id="offensive_text"),
        derive_key(b"d", "offensive_text", "reviewer"),
    )
    assert "role detector" in (check("review.decisions", forged, keyring) or "")


def test_only_an_approvers_key_approves_a_policy(tmp_path: Path) -> None:
    keyring = from_file(tmp_path)
    document = {"policy_id": "global", "version": 3, "rules": []}
    by_carol = approval_record(document, "carol", b"carol-key", T0)
    by_alice = approval_record(document, "alice", b"alice-key", T0)  # a reviewer
    found = valid_approvals(document, "dave", [by_carol, by_alice], approver_key(keyring))
    assert [approval["approver"] for approval in found] == ["carol"]


def test_a_role_key_outside_the_roles_topics_is_never_granted() -> None:
    entry = SigningKey.of(b"k", "approver")
    keyring = Keyring(keys={"carol": entry})
    review = signed_with(review_decision(reviewer_id="carol"), b"k")
    assert "role approver" in (check("review.decisions", review, keyring) or "")


# Secure defaults and the insecure settings that lower them.
def test_the_defaults_require_everything_and_insecure_settings_are_named() -> None:
    secure = Keyring.from_env({})
    assert secure.required == set(AUTHORITY_TOPICS) and secure.require_approval
    assert secure.insecure_settings() == []
    lowered = Keyring.from_env(
        {
            "MODSTREAM_INSECURE_UNSIGNED_TOPICS": "hash.bank",
            "MODSTREAM_INSECURE_NO_APPROVAL": "1",
            "MODSTREAM_SIGNING_DEV_SECRET": "s3cr3t-value",
        }
    )
    lines = lowered.insecure_settings()
    assert lines == [
        "MODSTREAM_INSECURE_UNSIGNED_TOPICS: unsigned records are accepted on hash.bank",
        "MODSTREAM_INSECURE_NO_APPROVAL: an active policy version needs no approval",
        "MODSTREAM_SIGNING_DEV_SECRET: keys derived from a dev secret (local stacks only)",
    ]
    assert not any("s3cr3t" in line for line in lines)  # the secret itself is never logged


def test_a_job_logs_its_insecure_settings_at_start(caplog: pytest.LogCaptureFixture) -> None:
    env = {"MODSTREAM_INSECURE_UNSIGNED_TOPICS": "all", "MODSTREAM_SIGNING_DEV_SECRET": "s3cr3t"}
    with caplog.at_level(logging.WARNING):
        keyring = job_keyring("moderation", "127.0.0.1:9092", {}, env)
    assert keyring.required == frozenset()
    assert "moderation: insecure setting MODSTREAM_INSECURE_UNSIGNED_TOPICS" in caplog.text
    assert "s3cr3t" not in caplog.text


# Where the dev secret may be used.
@pytest.mark.parametrize(
    ("bootstrap", "protocol", "local"),
    [
        ("127.0.0.1:9092", "PLAINTEXT", True),
        ("localhost:19092,127.0.0.2:19093", "PLAINTEXT", True),
        ("[::1]:9092", "PLAINTEXT", True),
        ("127.0.0.1:23092", "SASL_PLAINTEXT", True),  # the local stack with SCRAM
        ("127.0.0.1:9093", "SASL_SSL", False),  # TLS on loopback: a tunnel to a real cluster
        ("127.0.0.1:9093", "SSL", False),
        ("kafka.modstream.svc:9093", "SASL_SSL", False),
        ("10.0.0.5:9092", "PLAINTEXT", False),
        ("127.0.0.1:9092,kafka-1:9092", "PLAINTEXT", False),
    ],
)
def test_a_dev_secret_is_refused_unless_the_brokers_are_local(
    bootstrap: str, protocol: str, local: bool
) -> None:
    if local:
        refuse_dev_secret(DEV, bootstrap, protocol)
    else:
        with pytest.raises(ValueError, match="MODSTREAM_SIGNING_DEV_SECRET is for local stacks"):
            refuse_dev_secret(DEV, bootstrap, protocol)
    refuse_dev_secret(Keyring(), bootstrap, protocol)  # no dev secret: nothing to refuse


def test_a_job_beside_sasl_tls_with_a_dev_secret_does_not_start() -> None:
    env = {"MODSTREAM_SIGNING_DEV_SECRET": "s3cr3t"}
    properties = {"security.protocol": "SASL_SSL"}
    with pytest.raises(SystemExit) as refused:
        job_keyring("scan", "kafka.modstream.svc:9093", properties, env)
    message = str(refused.value)
    assert message.startswith("scan: MODSTREAM_SIGNING_DEV_SECRET is for local stacks only")
    assert "brokers on kafka.modstream.svc" in message and "s3cr3t" not in message


# The keys stay out of a job graph.
def test_a_keyring_from_a_file_pickles_as_its_path(tmp_path: Path) -> None:
    keyring = from_file(tmp_path)
    shipped = pickle.dumps(keyring)
    assert b"alice-key" not in shipped and b"detector-key" not in shipped
    assert pickle.loads(shipped) == keyring  # re-read where it is unpickled
    keys_file(tmp_path, {"alice": {"role": "reviewer", "key": "rotated"}})
    assert pickle.loads(shipped).key_for("alice", "reviewer") == b"rotated"
    extended = keyring.with_keys({"bob": SigningKey.of(b"bob-key", "reviewer")})
    assert pickle.loads(pickle.dumps(extended)) == extended  # not a file's keys: carried
