"""The DLQ replay's re-check of current state (no broker)."""

from __future__ import annotations

import json

from modstream.dlq import recheck
from tests.conftest import evidence, upload


def letter(topic: str, record: dict[str, object] | str) -> dict[str, object]:
    raw = record if isinstance(record, str) else json.dumps(record)
    return {"source_topic": topic, "key": "c-1", "raw": raw, "error_class": "schema", "ts": 1}


def test_only_current_unblocked_content_is_replayed() -> None:
    fixed = letter("p.detector.results", evidence())
    assert recheck(fixed, lambda cid: {"version": "1", "visibility": "pending"}, "p").replay
    assert recheck(fixed, lambda cid: {}, "p").replay  # the content store has not seen it yet
    newer = recheck(fixed, lambda cid: {"version": "2", "visibility": "public"}, "p")
    assert (newer.replay, newer.reason) == (False, "superseded_version")
    blocked = recheck(fixed, lambda cid: {"version": "1", "visibility": "hidden"}, "p")
    assert (blocked.replay, blocked.reason) == (False, "blocked_or_deleted")
    old_upload = recheck(letter("content.versions", upload()), lambda cid: {"version": "3"})
    assert old_upload.reason == "superseded_version"


def test_a_record_that_is_still_invalid_stays() -> None:
    broken = letter("content.versions", "{not json")
    assert recheck(broken, lambda cid: {}).reason == "still_invalid"


def test_replay_writes_only_to_the_contracts_input_topics() -> None:
    from modstream.dlq import input_topic

    current = {"version": "1", "visibility": "pending"}
    action = {"action_id": "a-1", "content_id": "c-1", "content_version": 1, "ts": 1}
    for source, prefix in [
        ("moderation.actions", ""),
        ("p.moderation.actions", "p"),
        ("p.moderation.dlq", "p"),
        ("p.scan.requests.text", "p"),
        ("detector.results", "p"),  # another deployment's topic
        ("q.detector.results", "p"),
        ("p.detector.results", ""),
    ]:
        verdict = recheck(letter(source, action), lambda cid: current, prefix)
        assert (verdict.replay, verdict.reason) == (False, "not_an_input_topic"), source
    assert input_topic("p.review.decisions", "p") == "review.decisions"
    assert input_topic("policy.rules") == "policy.rules"
    assert input_topic(None) is None


def test_a_record_whose_signature_fails_is_not_replayed() -> None:
    from operators.signing import Keyring, signed

    keyring = Keyring(dev_secret=b"dlq-secret", required=frozenset({"detector.results"}))
    current = {"version": "1", "visibility": "pending"}
    unsigned = letter("detector.results", evidence())
    verdict = recheck(unsigned, lambda cid: current, "", keyring)
    assert (verdict.replay, verdict.reason) == (False, "bad_signature")
    good = letter("detector.results", signed("detector.results", evidence(), keyring))
    assert recheck(good, lambda cid: current, "", keyring).reason == "current"
    forged = json.loads(str(good["raw"]))
    forged["scores"] = {"offensive": 0.0}
    assert recheck(letter("detector.results", forged), lambda c: current, "", keyring).reason == (
        "bad_signature"
    )


def test_a_letter_whose_content_was_kept_only_as_digests_is_not_replayed() -> None:
    from schemas import dead_letter

    made = dead_letter("content.versions", "c-1", json.dumps(upload()), "late", ts=1)
    redacted = json.loads(made.model_dump_json())
    assert recheck(redacted, lambda cid: {}).reason == "redacted"  # its text is a digest now
    digest_only = dead_letter("content.versions", "c-1", "{not json", "bad", ts=1)
    assert recheck(json.loads(digest_only.model_dump_json()), lambda cid: {}).reason == "redacted"
