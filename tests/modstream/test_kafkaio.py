"""Decoding what commands read from topics: a malformed record is skipped and counted."""

from __future__ import annotations

import json
from typing import Any

import pytest
from kafka.consumer.fetcher import ConsumerRecord

from modstream.contract import records as contract_records
from modstream.contract.records import decode_values, schema_topic
from modstream.core import kafkaio
from modstream.testing.records import T0, evidence, upload


def consumer_record(value: bytes | None, offset: int = 0) -> ConsumerRecord:
    return ConsumerRecord(
        topic="t",
        partition=0,
        leader_epoch=0,
        offset=offset,
        timestamp=T0,
        timestamp_type=0,
        key=None,
        value=value,
        headers=[],
        checksum=None,
        serialized_key_size=-1,
        serialized_value_size=-1 if value is None else len(value),
        serialized_header_size=-1,
    )


HOSTILE: list[bytes] = [
    b"{not json",
    b"[" * 50_000 + b"]" * 50_000,
    b'{"a":' * 100_000 + b"1" + b"}" * 100_000,
    b"\xff\xfe\x00",
    b'{"content_id": "c-1", "content_id": "c-2"}',
    b'{"n": ' + b"9" * 5_000 + b"}",
    b'{"x": NaN}',
    b"[1, 2]",
    b'"just a string"',
    b"x" * 2_000_000,
]


def test_hostile_records_are_skipped_and_counted_and_valid_ones_kept() -> None:
    valid = [json.dumps(evidence(at=T0 + i)).encode() for i in range(3)]
    records = [consumer_record(v) for v in [valid[0], *HOSTILE, valid[1], None, valid[2]]]
    values, skipped = decode_values(records, "detector.results")
    assert [v["ts"] for v in values] == [T0, T0 + 1, T0 + 2]
    assert skipped == len(HOSTILE)


def test_a_record_that_breaks_its_topics_schema_is_skipped() -> None:
    records = [
        consumer_record(json.dumps(upload()).encode()),
        consumer_record(json.dumps(upload(content_version=True)).encode()),  # bool for int
        consumer_record(json.dumps(upload(modality="smell")).encode()),
    ]
    values, skipped = decode_values(records, "content.versions")
    assert len(values) == 1 and skipped == 2
    loose, none_skipped = decode_values(records, None)  # JSON objects only
    assert len(loose) == 3 and none_skipped == 0


@pytest.mark.parametrize(
    ("physical", "schema"),
    [
        ("moderation.decisions", "moderation.decisions"),
        ("run-1.moderation.decisions", "moderation.decisions"),
        ("p.scan.requests.text", "scan.requests.text"),
        ("enforcement.repairs", None),
        ("xmoderation.decisions", None),
    ],
)
def test_the_schema_of_a_physical_topic(physical: str, schema: str | None) -> None:
    assert schema_topic(physical) == schema


def test_read_values_warns_with_the_count(monkeypatch: pytest.MonkeyPatch) -> None:
    records = [consumer_record(b"{bad"), consumer_record(json.dumps(evidence()).encode())]

    def read_to_end(*args: Any, **kwargs: Any) -> list[ConsumerRecord]:
        return records

    monkeypatch.setattr(kafkaio, "read_to_end", read_to_end)
    warnings: list[str] = []
    values = contract_records.read_values("unused:1", "p.detector.results", warn=warnings.append)
    assert len(values) == 1
    assert warnings == ["p.detector.results: skipped 1 malformed record(s) of 2"]


def test_every_compacted_topic_gets_a_key() -> None:
    """A compacted topic refuses a record without a key (the broker's InvalidRecordError): every
    compacted topic a producer writes has a key from its record."""
    from modstream.core.topics import TOPICS
    from modstream.review.queue import grant_record

    records = {
        "policy.rules": {"policy_id": "global"},
        "hash.bank": {"bank": "known_bad", "hash_type": "sha256", "hash": "AB" * 32},
        "review.grants": grant_record("alice", ["appeals"], "lead-1", 1),
        "content.visibility": {"content_id": "c-1"},
        "moderation.index": {"content_id": "c-1"},
    }
    compacted = {spec.name for spec in TOPICS if spec.config["cleanup.policy"] == "compact"}
    assert compacted == set(records)
    keys = {
        topic: contract_records.contract_key(topic, record) for topic, record in records.items()
    }
    assert keys["review.grants"] == "alice"
    assert keys["hash.bank"] == "known_bad:sha256:" + "ab" * 32
    assert all(keys.values()), keys
