"""The DLQ replay's re-check of current state (no broker)."""

from __future__ import annotations

import json

import pytest

from modstream.contract.dlq import DlqRecord
from modstream.ops.dlq import recheck
from modstream.testing.records import evidence, upload


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
    from modstream.ops.dlq import input_topic

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
    from modstream.trust.signing import Keyring, signed

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
    from modstream.contract import dead_letter

    made = dead_letter("content.versions", "c-1", json.dumps(upload()), "late", ts=1)
    redacted = json.loads(made.model_dump_json())
    assert recheck(redacted, lambda cid: {}).reason == "redacted"  # its text is a digest now
    digest_only = dead_letter("content.versions", "c-1", "{not json", "bad", ts=1)
    assert recheck(json.loads(digest_only.model_dump_json()), lambda cid: {}).reason == "redacted"


class Topics:
    """Kafka as topic -> values, for `replay`'s reads and writes (no broker here)."""

    def __init__(self) -> None:
        self.values: dict[str, list[dict[str, object]]] = {}

    def read_values(self, _servers: str, topic: str, **_options: object) -> list[object]:
        return list(self.values.get(topic, []))

    def produce(self, _servers: str, topic: str, records: list[tuple[object, bytes]]) -> int:
        self.values.setdefault(topic, []).extend(json.loads(value) for _, value in records)
        return len(records)


class Store:
    """The few Redis calls `replay` makes (sets and hashes), in memory."""

    def __init__(self, content: dict[str, dict[bytes, bytes]]) -> None:
        self.sets: dict[str, set[str]] = {}
        self.hashes: dict[str, dict[str, object]] = dict(content)  # type: ignore[arg-type]

    def sismember(self, key: str, member: str) -> bool:
        return member in self.sets.get(key, set())

    def sadd(self, key: str, member: str) -> None:
        self.sets.setdefault(key, set()).add(member)

    def hget(self, key: str, field: str) -> object:
        return self.hashes.get(key, {}).get(field)

    def hset(self, key: str, field: str, value: str) -> None:
        self.hashes.setdefault(key, {})[field] = value

    def hgetall(self, key: str) -> object:
        return self.hashes.get(key, {})


def test_a_replayed_input_that_fails_again_carries_its_attempt_history(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from modstream.contract import dead_letter
    from modstream.contract import records as contract_records
    from modstream.core import kafkaio
    from modstream.ops import dlq
    from modstream.trust.signing import Keyring

    topics = Topics()
    monkeypatch.setattr(contract_records, "read_values", topics.read_values)
    monkeypatch.setattr(kafkaio, "produce", topics.produce)
    store = Store({"content:c-1": {b"version": b"1", b"visibility": b"pending"}})
    result = json.dumps(evidence())  # a result the job refused, then replayed
    first = dead_letter("detector.results", "c-1", result, "evidence conflicts", ts=5,
                        error_class="conflict", operator="moderation")  # fmt: skip
    topics.values["moderation.dlq"] = [json.loads(first.model_dump_json())]
    keyring = Keyring(dev_secret=b"dlq-secret", required=frozenset())
    counts = dlq.replay("kafka", "moderation.dlq", store, keyring=keyring)
    assert counts == {"current": 1} and len(topics.values["detector.results"]) == 1

    # The moderation job refuses it again: a new record for the same input, knowing nothing.
    again = dead_letter("detector.results", "c-1", result, "evidence conflicts", ts=5,
                        error_class="permanent", operator="moderation")  # fmt: skip
    topics.values["moderation.dlq"].append(json.loads(again.model_dump_json()))
    listed = dlq.list_letters("kafka", "moderation.dlq", client=store)
    assert [letter["attempts"] for letter in listed] == [1, 2]
    assert listed[0]["history"] == []  # the first is not its own earlier attempt
    assert listed[1]["history"] == [first.attempt().model_dump()]
    assert dlq.list_letters("kafka", "moderation.dlq")[1]["history"] == []  # without Redis

    # Meanwhile the content moved on: the second is not replayed, and its note says all.
    store.hashes["content:c-1"] = {b"version": b"2"}
    assert dlq.replay("kafka", "moderation.dlq", store, keyring=keyring) == {
        "already_replayed": 1,
        "superseded_version": 1,
    }
    note = DlqRecord.model_validate(topics.values["moderation.dlq"][-1])
    assert (note.error_class, note.attempts, note.owner, note.job) == (
        "stale", 3, "moderation", "dlq-replay",
    )  # fmt: skip
    assert note.history == [first.attempt(), again.attempt()]
    assert dlq.by_owner(dlq.list_letters("kafka", "moderation.dlq", client=store)) == {
        "moderation": {"conflict": 1, "permanent": 1, "stale": 1}
    }


def test_listing_groups_records_by_owner_and_class() -> None:
    from modstream.contract import dead_letter
    from modstream.ops.dlq import by_owner

    letters = [
        json.loads(
            dead_letter(
                topic, "c-1", "{}", "bad", ts=1, error_class=error_class, operator=job
            ).model_dump_json()
        )
        for topic, error_class, job in [
            ("p.detector.results", "signature", "moderation"),
            ("p.scan.requests.image", "permanent", "scan"),
            ("p.detector.results", "schema", "moderation"),
            ("p.detector.results", "schema", "moderation"),
        ]
    ]
    old = {k: v for k, v in letters[1].items() if k not in ("owner", "job", "history")}
    assert by_owner([*letters, old]) == {
        "detection": {"permanent": 1},
        "moderation": {"schema": 2},
        "platform": {"permanent": 1},  # written before owners, its job unknown
        "security": {"signature": 1},
    }
