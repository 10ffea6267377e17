"""Signed authority inputs: what `check` lets through, what it refuses and why, the keyring."""

from __future__ import annotations

import hashlib
import hmac
import json
import pickle
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from modstream.core.ids import SHA256, sha256_hex
from modstream.testing.records import (
    SECRET_TEXT,
    T0,
    appeal_record,
    bank_entry,
    evidence,
    review_decision,
    review_grant,
    review_lease,
)
from modstream.trust import signing
from modstream.trust.signing import (
    AUTHORITY_TOPICS,
    Keyring,
    SigningKey,
    approval_record,
    approver_key,
    canonical_json,
    check,
    derive_key,
    hmac_sha256_hex,
    sign,
    signed,
    valid_approvals,
    verify,
)

SECRET = b"unit-dev-secret"
ALL = frozenset(AUTHORITY_TOPICS)
REQUIRED = Keyring(dev_secret=SECRET, required=ALL)
OPTIONAL = Keyring(dev_secret=SECRET, required=frozenset())


RECORDS = {
    "review.decisions": review_decision,
    "hash.bank": bank_entry,
    "moderation.appeals": appeal_record,
    "detector.results": lambda **o: evidence(**o),
    "review.grants": review_grant,
    "review.leases": review_lease,
}
# What a forger changes in each: the outcome, the bank op, the appealed revision, a score.
FORGERIES: dict[str, dict[str, Any]] = {
    "review.decisions": {"outcome": "BLOCK"},
    "hash.bank": {"op": "remove"},
    "moderation.appeals": {"decision_revision": 2},
    "detector.results": {"scores": {"offensive": 0.0}},
    "review.grants": {"queues": ["appeals"]},
    "review.leases": {"expires_ts": T0 + 86_400_000},
}


def test_the_authority_topics_and_their_producers() -> None:
    producers = {topic: rule.of(RECORDS[topic]()) for topic, rule in AUTHORITY_TOPICS.items()}
    assert producers == {
        "review.decisions": "alice",
        "hash.bank": "known_bad",
        "moderation.appeals": "appeals",
        "detector.results": "offensive_text",
        "review.grants": "lead-1",
        "review.leases": "alice",
    }


@pytest.mark.parametrize("topic", sorted(AUTHORITY_TOPICS))
def test_a_record_signed_by_its_producer_passes_and_a_forged_one_is_refused(topic: str) -> None:
    record = signed(topic, RECORDS[topic](), REQUIRED)
    assert record["signature"].startswith("hmac-sha256:")
    assert check(topic, record, REQUIRED) is None
    # Round trip through JSON, as the job receives it.
    assert check(topic, json.loads(json.dumps(record)), REQUIRED) is None
    forged = {**record, **FORGERIES[topic]}
    message = check(topic, forged, REQUIRED)
    assert message is not None and "does not verify" in message and topic in message
    # Refused even where signatures are optional: a present signature must verify.
    assert check(topic, forged, OPTIONAL) == message


@pytest.mark.parametrize("topic", sorted(AUTHORITY_TOPICS))
def test_unsigned_is_refused_only_where_required(topic: str) -> None:
    record = RECORDS[topic]()
    message = check(topic, record, REQUIRED)
    assert message == f"signing: {topic} record is unsigned; this deployment requires signatures"
    assert check(topic, record, OPTIONAL) is None
    assert check(topic, {**record, "signature": None}, REQUIRED) == message
    only_reviews = Keyring(dev_secret=SECRET, required=frozenset({"review.decisions"}))
    assert (check(topic, record, only_reviews) is None) == (topic != "review.decisions")


@pytest.mark.parametrize("topic", sorted(AUTHORITY_TOPICS))
def test_a_signature_made_with_another_key_is_refused(topic: str) -> None:
    record = RECORDS[topic]()
    record["signature"] = sign(record, b"not-the-producers-key")
    message = check(topic, record, REQUIRED)
    assert message is not None and "does not verify" in message
    other_secret = Keyring(dev_secret=b"another deployment", required=ALL)
    assert check(topic, signed(topic, RECORDS[topic](), other_secret), REQUIRED) == message


def test_a_reviewer_cannot_decide_as_another() -> None:
    alice_key = REQUIRED.key_for("alice", "reviewer")
    assert alice_key is not None
    as_bob = review_decision(reviewer_id="bob")
    as_bob["signature"] = sign(as_bob, alice_key)  # alice's key, bob's name
    message = check("review.decisions", as_bob, REQUIRED)
    assert message is not None and "field 'reviewer_id'" in message
    # And a decision alice signed cannot be re-attributed to bob.
    mine = signed("review.decisions", review_decision(), REQUIRED)
    assert check("review.decisions", {**mine, "reviewer_id": "bob"}, REQUIRED) is not None


def test_an_unknown_producer_is_refused_whether_or_not_required() -> None:
    keys = Keyring(keys={"alice": SigningKey.of(b"alice-key", "reviewer")}, required=ALL)
    mallory = review_decision(reviewer_id="mallory")
    mallory["signature"] = sign(mallory, b"mallory-key")
    message = check("review.decisions", mallory, keys)
    assert message == (
        "signing: review.decisions signature refused: the producer in field "
        "'reviewer_id' has no key in this deployment"
    )
    optional = Keyring(keys=keys.keys, required=frozenset())
    assert check("review.decisions", mallory, optional) == message
    assert (
        check("review.decisions", signed("review.decisions", review_decision(), keys), keys) is None
    )


@pytest.mark.parametrize(
    ("signature", "expected"),
    [
        (12345, "is not of the form hmac-sha256:<hex>"),
        ("sha1:abcd", "is not of the form hmac-sha256:<hex>"),
        ("hmac-sha256:" + "0" * 64, "does not verify"),
        ("hmac-sha256:zz", "does not verify"),
    ],
)
def test_malformed_signatures_are_refused(signature: object, expected: str) -> None:
    message = check("hash.bank", {**bank_entry(), "signature": signature}, OPTIONAL)
    assert message is not None and expected in message


def test_a_signed_record_without_its_producer_field_is_refused() -> None:
    record = signed("hash.bank", bank_entry(), REQUIRED)
    del record["bank"]
    assert check("hash.bank", record, REQUIRED) == (
        "signing: hash.bank record names no producer in field 'bank'"
    )
    assert check("hash.bank", {**record, "bank": 7}, REQUIRED) is not None


def test_messages_never_echo_the_record() -> None:
    hostile = review_decision(reviewer_id=SECRET_TEXT, reason=SECRET_TEXT)
    hostile["signature"] = sign(hostile, b"whatever")
    for keyring in (
        REQUIRED,
        Keyring(keys={"alice": SigningKey.of(b"k", "reviewer")}, required=ALL),
    ):
        message = check("review.decisions", hostile, keyring)
        assert message is not None and SECRET_TEXT not in message and "SECRET" not in message


def test_records_that_cannot_be_canonicalized_do_not_verify() -> None:
    record = signed("detector.results", evidence(), REQUIRED)
    record["scores"] = {"nsfw": float("nan")}
    message = check("detector.results", record, REQUIRED)
    assert message is not None and "does not verify" in message


def test_other_topics_pass_untouched() -> None:
    assert check("content.versions", {"signature": "junk"}, REQUIRED) is None
    assert signed("content.versions", {"a": 1}, REQUIRED) == {"a": 1}


def test_signed_replaces_an_old_signature_and_skips_producers_without_a_key() -> None:
    stale = {**review_decision(), "signature": "hmac-sha256:" + "1" * 64}
    fresh = signed("review.decisions", stale, REQUIRED)
    assert fresh["signature"] != stale["signature"]
    assert check("review.decisions", fresh, REQUIRED) is None
    no_keys = Keyring()
    assert signed("review.decisions", review_decision(), no_keys) == review_decision()


def test_signature_is_hmac_sha256_over_canonical_json_without_signature() -> None:
    key = derive_key(SECRET, "known_bad", "bank")
    record = signed("hash.bank", bank_entry(), REQUIRED)
    expected = hmac.new(key, canonical_json(record), hashlib.sha256).hexdigest()
    assert record["signature"] == f"hmac-sha256:{expected}"
    assert b"signature" not in canonical_json(record)
    assert verify(record, key)


def test_derived_keys_differ_per_producer_role_and_secret() -> None:
    alice = derive_key(SECRET, "alice", "reviewer")
    assert alice == derive_key(SECRET, "alice", "reviewer")
    assert alice != derive_key(SECRET, "bob", "reviewer")
    assert alice != derive_key(SECRET, "alice", "detector")
    assert alice != derive_key(b"other", "alice", "reviewer")
    assert alice.decode("ascii").isalnum()  # writable in a keys file


@given(
    topic=st.sampled_from(sorted(AUTHORITY_TOPICS)),
    field=st.text(min_size=1, max_size=8),
    value=st.one_of(st.integers(), st.text(max_size=12), st.booleans(), st.none()),
)
def test_any_change_to_a_signed_record_is_refused(topic: str, field: str, value: object) -> None:
    record = signed(topic, RECORDS[topic](), REQUIRED)
    if field == "signature" or record.get(field, object()) == value:
        return
    changed = {**record, field: value}
    assert check(topic, changed, REQUIRED) is not None
    if AUTHORITY_TOPICS[topic].of(changed) is not None:  # a record naming no producer: no key
        assert check(topic, signed(topic, changed, REQUIRED), REQUIRED) is None


# The keyring and its settings.
def test_keyring_from_env(tmp_path: Path) -> None:
    keys = tmp_path / "keys.json"
    keys.write_text(
        json.dumps(
            {
                "offensive_text": {"role": "detector", "key": "detector-key"},
                "alice": {"role": "reviewer", "key": "alice-key"},
            }
        )
    )
    keyring = Keyring.from_env(
        {
            "MODSTREAM_SIGNING_KEYS_FILE": str(keys),
            "MODSTREAM_SIGNING_DEV_SECRET": "dev",
            "MODSTREAM_INSECURE_UNSIGNED_TOPICS": "detector.results, moderation.appeals",
        }
    )
    assert keyring.key_for("alice", "reviewer") == b"alice-key"  # the keys file wins
    assert keyring.key_for("bob", "reviewer") == derive_key(b"dev", "bob", "reviewer")
    assert keyring.required == {"review.decisions", "hash.bank", "review.grants", "review.leases"}
    assert keyring.require_approval and keyring.require_review_access
    ungranted = Keyring.from_env({"MODSTREAM_INSECURE_UNGRANTED_REVIEWS": "1"})
    assert not ungranted.require_review_access
    assert "MODSTREAM_INSECURE_UNGRANTED_REVIEWS" in " ".join(ungranted.insecure_settings())
    assert not pickle.loads(pickle.dumps(ungranted)).require_review_access
    with pytest.raises(ValueError, match="MODSTREAM_INSECURE_UNGRANTED_REVIEWS"):
        Keyring.from_env({"MODSTREAM_INSECURE_UNGRANTED_REVIEWS": "maybe"})
    assert Keyring.from_env({"MODSTREAM_SIGNATURES_REQUIRED": "all"}).required == ALL
    assert Keyring.from_env({"MODSTREAM_INSECURE_UNSIGNED_TOPICS": "all"}).required == set()
    empty = Keyring.from_env({})
    assert (empty.required, empty.key_for("bob", "reviewer"), empty.require_approval) == (
        ALL,  # secure by default
        None,
        True,
    )
    assert not Keyring.from_env({"MODSTREAM_INSECURE_NO_APPROVAL": "1"}).require_approval
    assert Keyring.from_env({"MODSTREAM_REQUIRE_APPROVAL": "1"}).require_approval
    assert pickle.loads(pickle.dumps(keyring)) == keyring  # shipped in a job's config


@pytest.mark.parametrize(
    ("env", "variable"),
    [
        ({"MODSTREAM_INSECURE_UNSIGNED_TOPICS": "moderation.actions"},
         "MODSTREAM_INSECURE_UNSIGNED_TOPICS"),
        # The retired switches no longer lower a default: each names the insecure setting.
        ({"MODSTREAM_SIGNATURES_REQUIRED": "review.decisions"},
         "MODSTREAM_INSECURE_UNSIGNED_TOPICS"),
        ({"MODSTREAM_REQUIRE_APPROVAL": "0"}, "MODSTREAM_INSECURE_NO_APPROVAL"),
        ({"MODSTREAM_INSECURE_NO_APPROVAL": "maybe"}, "MODSTREAM_INSECURE_NO_APPROVAL"),
        ({"MODSTREAM_SIGNING_KEYS_FILE": "/nonexistent/keys.json"}, "MODSTREAM_SIGNING_KEYS_FILE"),
    ],
)  # fmt: skip
def test_bad_settings_name_their_variable(env: dict[str, str], variable: str) -> None:
    with pytest.raises(ValueError, match=variable):
        Keyring.from_env(env)


@pytest.mark.parametrize(
    "content",
    [
        "[1, 2]",
        "not json",
        '{"alice": "alice-key"}',  # no role: the format before roles
        '{"alice": {"key": "k"}}',
        '{"alice": {"role": "admin", "key": "k"}}',
        '{"alice": {"role": "reviewer", "key": ""}}',
        '{"alice": {"role": "reviewer", "key": "k", "topics": ["hash.bank"]}}',
        '{"alice": {"role": "reviewer", "key": "k", "topics": []}}',
        '{"": {"role": "reviewer", "key": "k"}}',
    ],
)
def test_a_malformed_keys_file_is_refused(tmp_path: Path, content: str) -> None:
    keys = tmp_path / "keys.json"
    keys.write_text(content)
    with pytest.raises(ValueError, match="MODSTREAM_SIGNING_KEYS_FILE") as refused:
        Keyring.from_env({"MODSTREAM_SIGNING_KEYS_FILE": str(keys)})
    assert "alice-key" not in str(refused.value)  # a key is never echoed


# Policy approvals (the rule PolicyStore.apply and `modstream policy push` share).
def test_approvals_count_only_for_this_document_by_someone_else_with_their_own_key() -> None:
    document = {"policy_id": "global", "version": 3, "rules": []}
    bob = approval_record(document, "bob", REQUIRED.key_for("bob", "approver") or b"", T0)
    alice = approval_record(document, "alice", REQUIRED.key_for("alice", "approver") or b"", T0)
    forged = approval_record(document, "carol", b"not-carols-key", T0)
    other = approval_record(
        {**document, "rules": [1]}, "dave", REQUIRED.key_for("dave", "approver") or b"", T0
    )
    candidates = [bob, alice, forged, other, "junk"]
    found = valid_approvals(document, "alice", candidates, approver_key(REQUIRED))
    assert [a["approver"] for a in found] == ["bob"]
    assert valid_approvals(document, "bob", [bob], approver_key(REQUIRED)) == []
    assert valid_approvals({**document, "version": 4}, "alice", [bob], approver_key(REQUIRED)) == []


# canonical_json's fast path (msgspec) must write the bytes json.dumps writes, or defer to it.
JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(),  # surrogates included: the bytes cannot be UTF-8, json.dumps refuses them
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


def slow_canonical(record: dict[str, Any]) -> bytes:
    """The definition: json.dumps, as every producer's signer writes it."""
    body = {key: value for key, value in record.items() if key != "signature"}
    text = json.dumps(
        body, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    )
    return text.encode("utf-8")


@given(st.dictionaries(st.text(), JSON_VALUES, max_size=6))
def test_canonical_json_writes_the_bytes_json_dumps_writes(record: dict[str, Any]) -> None:
    try:
        expected: bytes | type[Exception] = slow_canonical(record)
    except ValueError as error:  # NaN, infinity, a surrogate
        expected = type(error)
    try:
        got: bytes | type[Exception] = canonical_json(record)
    except ValueError as error:
        got = type(error)
    assert got == expected


@pytest.mark.parametrize(
    "score", [1e-05, 3.2e-07, 1e16, 1.5e300, 0.0001, 0.5, -0.0, 5.0, 123456789.25]
)
def test_canonical_json_spells_floats_as_python_repr(score: float) -> None:
    """The floats msgspec spells otherwise (1e-05 as 0.00001, 1e+16 as 1e16) still sign."""
    record = {"scores": {"toxic": score}, "ts": T0, "signature": "x"}
    assert canonical_json(record) == slow_canonical(record)
    assert repr(score).encode() in canonical_json(record)


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -float("inf")])
def test_canonical_json_refuses_what_json_refuses(value: float) -> None:
    with pytest.raises(ValueError):
        canonical_json({"scores": {"toxic": value}})


def test_canonical_json_refuses_values_of_no_json_type() -> None:
    """msgspec would write a datetime or bytes; json.dumps refuses them, so canonical_json does."""
    import datetime

    for value in (datetime.datetime(2026, 1, 1), b"raw", {1, 2}):
        with pytest.raises(TypeError):
            canonical_json({"at": value})


@given(key=st.binary(max_size=200), message=st.binary(max_size=600))
def test_hmac_from_kept_pads_is_the_standard_hmac(key: bytes, message: bytes) -> None:
    """The padded key's hashes are kept per key (`_PADS`); a key longer than SHA-256's block
    (64 bytes) is hashed first, as RFC 2104 says: every length gives hmac's own answer, the
    first time and from the kept pads."""
    expected = hmac.digest(key, message, "sha256").hex()
    assert hmac_sha256_hex(key, message) == expected
    assert hmac_sha256_hex(key, message) == expected  # the second time from the kept pads
    assert key in signing._PADS


def test_ids_hash_as_hashlib_does() -> None:
    """`modstream.core.ids.SHA256` (CPython's own SHA-256 where present) digests as hashlib's."""
    for data in (b"", b"decision|c-1|2|3", "é".encode() * 100):
        assert SHA256(data).hexdigest() == hashlib.sha256(data).hexdigest()
    assert sha256_hex("decision", "c-1", 2, 3) == hashlib.sha256(b"decision|c-1|2|3").hexdigest()


# A record checked over the bytes it was sent as (`wire_json`, `verify`'s `raw`).


@pytest.mark.parametrize("topic", sorted(AUTHORITY_TOPICS))
def test_a_record_sent_as_wire_json_verifies_over_the_bytes_sent(topic: str) -> None:
    record = signed(topic, RECORDS[topic](), REQUIRED)
    raw = signing.wire_json(record)
    assert json.loads(raw) == record
    assert raw.endswith(f',"signature":"{record["signature"]}"}}')
    assert raw[: raw.rindex(',"signature"')] + "}" == canonical_json(record).decode()
    assert signing._sent_body(raw, record["signature"]) == canonical_json(record)
    assert signing._sent_body(raw.encode(), record["signature"]) == canonical_json(record)
    for sent in (raw, raw.encode()):
        assert check(topic, json.loads(sent), REQUIRED, sent) is None


@pytest.mark.parametrize("topic", sorted(AUTHORITY_TOPICS))
def test_the_bytes_sent_never_pass_what_the_record_would_not(topic: str) -> None:
    """A forged field, another key, or a signature from another record: refused with the same
    message whether checked over the bytes sent or over the record written again."""
    record = signed(topic, RECORDS[topic](), REQUIRED)
    forged = {**record, **FORGERIES[topic]}
    other_key = {**RECORDS[topic](), "signature": sign(RECORDS[topic](), b"not-the-key")}
    moved = {**forged, "signature": record["signature"]}  # a genuine signature on other fields
    for bad in (forged, other_key, moved):
        raw = signing.wire_json(bad)
        expected = check(topic, bad, REQUIRED)
        assert expected is not None and "does not verify" in expected
        assert check(topic, json.loads(raw), REQUIRED, raw) == expected
    # The genuine bytes with a forged field spliced in after them still end in the signature.
    genuine = signing.wire_json(record)
    spliced = genuine[:1] + '"zz":1,' + genuine[1:]
    assert check(topic, json.loads(spliced), REQUIRED, spliced) is not None


@given(
    topic=st.sampled_from(sorted(AUTHORITY_TOPICS)),
    extra=st.dictionaries(st.text(max_size=6), JSON_VALUES, max_size=4),
    form=st.sampled_from(["wire", "json", "spaced", "signature-first"]),
)
def test_checking_the_bytes_sent_answers_as_checking_the_record(
    topic: str, extra: dict[str, Any], form: str
) -> None:
    """However a signed record is written, `check` with its text gives the answer `check`
    gives on the record alone: the bytes sent are only a shorter way to the same answer."""
    base = RECORDS[topic]()
    body = {**base, **{k: v for k, v in extra.items() if k not in base and k != "signature"}}
    try:
        record = signed(topic, body, REQUIRED)
    except ValueError:  # NaN, infinity, a surrogate: no record to sign
        return
    writers = {
        "wire": signing.wire_json,
        "json": lambda r: json.dumps(r, separators=(",", ":")),
        "spaced": json.dumps,
        "signature-first": lambda r: json.dumps({"signature": r["signature"], **r}),
    }
    try:
        raw = writers[form](record)
    except ValueError:
        return
    parsed = json.loads(raw)
    assert check(topic, parsed, REQUIRED, raw) == check(topic, parsed, REQUIRED)
    assert check(topic, parsed, REQUIRED, raw) is None


@given(st.dictionaries(st.text(), JSON_VALUES, max_size=6), st.none() | st.text(max_size=80))
def test_wire_json_is_the_record_with_its_signature_last(
    record: dict[str, Any], signature: str | None
) -> None:
    """`wire_json` reads back as the record, every field kept (a signature of any value, an
    empty record); the fields but `signature` are the canonical JSON, `signature` last."""
    if signature is not None:
        record = {**record, "signature": signature}
    try:
        canonical = canonical_json(record).decode()
    except ValueError:  # NaN, infinity, a surrogate: json refuses it too
        with pytest.raises(ValueError):
            signing.wire_json(record)
        return
    written = signing.wire_json(record)
    assert json.loads(written) == record
    if "signature" not in record:
        assert written == canonical
    else:
        assert written.startswith(canonical[:-1])
        assert list(json.loads(written))[-1] == "signature"


def test_bytes_a_key_holder_signed_otherwise_pass_only_as_sent() -> None:
    """The leniency of checking over the bytes sent (docs/RELIABILITY.md): a key holder that
    signed its record's fields written otherwise than canonically (another key order, `1e-7`
    for `1e-07`) and sent the signature last passes admission and `modstream dlq`'s recheck
    alike, as it was sent; moved to the front, the same signature is refused by both, and
    so is the record alone, which is checked over its canonical JSON."""
    from modstream.bench.fire import bench_config
    from modstream.jobs.moderation.decode import admit
    from modstream.moderation.admission import Admitted, Refused
    from modstream.ops.dlq import recheck

    config = bench_config(now_ms=T0 + 60_000)
    record = {**evidence(), "scores": {"offensive": 1e-7}}
    key = config.keyring.key_for(record["detector"], "detector")
    assert key is not None
    body = json.dumps(dict(reversed(record.items())), separators=(",", ":"))  # not canonical
    assert body.encode() != canonical_json(record)
    claimed = "hmac-sha256:" + hmac_sha256_hex(key, body.encode())
    last = body[:-1] + f',"signature":"{claimed}"}}'
    first = '{"signature":"' + claimed + '",' + body[1:]
    assert json.loads(last) == json.loads(first) == {**record, "signature": claimed}

    def dlq(raw: str) -> str:
        letter = {"source_topic": "detector.results", "raw": raw, "error_class": "signature"}
        return recheck(letter, lambda cid: {"version": "1"}, "", config.keyring).reason

    assert isinstance(admit(config, "detector.results", last, T0, None), Admitted)
    assert dlq(last) != "bad_signature"
    refused = admit(config, "detector.results", first, T0, None)
    assert isinstance(refused, Refused) and refused.error_class == "signature"
    assert dlq(first) == "bad_signature"
    assert check("detector.results", json.loads(last), config.keyring) is not None
