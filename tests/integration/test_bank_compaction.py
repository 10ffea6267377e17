"""Hash banks on the real broker's compacted `hash.bank` (issue 27, point 7): a hash in two
banks, an add then a remove in a third, and an unsigned null tombstone keyed by the bare hash;
once the broker has compacted the topic, a moderation job started without a checkpoint still
matches the hash in both banks, and the tombstone is refused to the DLQ with class `schema`.

Keyed by the bare hash (the contract's key), compaction kept one record for the hash,
the tombstone, so the restarted job matched no bank at all."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from kafka import KafkaAdminClient
from kafka.admin import ConfigResource, ConfigResourceType

from modstream.demo import workload
from modstream.testing.records import T0, bank_entry, upload
from modstream.testing.stack import JobProcess, Kafka, ModerationDeployment

pytestmark = pytest.mark.integration
SHA = "5e" * 32
BANK_TS = T0 + 1_000
# Compact at once: roll a segment every 200 ms, clean any dirt, keep tombstones a day.
FAST_COMPACTION = {
    "cleanup.policy": "compact",
    "segment.ms": "200",
    "min.cleanable.dirty.ratio": "0.001",
    "min.compaction.lag.ms": "0",
    "delete.retention.ms": "86400000",
}


def compact_fast(kafka: Kafka, topic: str) -> None:
    admin = KafkaAdminClient(bootstrap_servers=kafka.bootstrap_servers, request_timeout_ms=15_000)
    try:
        admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, topic, FAST_COMPACTION)])
    finally:
        admin.close()


def bank_line(event_id: str, bank: str, at: int, op: str = "add", sha: str = SHA) -> Any:
    record = bank_entry(event_id=event_id, bank=bank, hash=sha, op=op, ts=at)
    return {"topic": "hash.bank", "value": record}


def wait_until_compacted(kafka: Kafka, topics: dict[str, str], timeout_s: float = 90.0) -> None:
    """Until the broker dropped `spam_campaign`'s add (its key's later remove supersedes it).
    The active segment is never cleaned: a filler record each second rolls it."""
    deadline = time.monotonic() + timeout_s
    filler = 0
    while True:
        events = [
            json.loads(r.value)["event_id"] for r in kafka.read(topics["hash.bank"]) if r.value
        ]
        if "add-spam" not in events:
            assert {"add-known", "add-csam", "remove-spam"} <= set(events), events
            return
        assert time.monotonic() < deadline, f"hash.bank not compacted in {timeout_s}s: {events}"
        filler += 1
        line = bank_line(f"filler-{filler}", "filler", BANK_TS, sha=f"{filler:064x}")
        workload.produce(kafka.bootstrap_servers, [line], topics)
        time.sleep(1.0)


def test_a_job_started_without_a_checkpoint_matches_both_banks_after_compaction(
    kafka: Kafka, start_job: Any, moderation_deployment: ModerationDeployment
) -> None:
    topics, args = moderation_deployment.topics, moderation_deployment.args
    compact_fast(kafka, topics["hash.bank"])
    lines = [
        bank_line("add-known", "known_bad", BANK_TS),
        bank_line("add-csam", "known_csam", BANK_TS + 1),
        bank_line("add-spam", "spam_campaign", BANK_TS),
        bank_line("remove-spam", "spam_campaign", BANK_TS + 2, op="remove"),
    ]
    workload.produce(kafka.bootstrap_servers, lines, topics)  # signed, keyed by the contract
    kafka.produce(topics["hash.bank"], [(SHA, None)])  # unsigned tombstone keyed by the hash
    wait_until_compacted(kafka, topics)

    job: JobProcess = start_job("moderation", *args)  # no checkpoint: the topic is the state
    job.wait_running()
    banked = upload("banked", at=BANK_TS + 60_000, sha256=SHA)
    after = workload.marker(BANK_TS + 3_600_000, "after")
    workload.produce(
        kafka.bootstrap_servers, [{"topic": "content.versions", "value": banked}, after], topics
    )
    decisions = kafka.wait_for(
        topics["moderation.decisions"],
        lambda values: any(d["content_id"] == "banked" for d in values),
        timeout_s=120,
    )
    first = next(d for d in decisions if d["content_id"] == "banked")
    assert (first["trigger"], first["outcome"]) == ("fast_gate", "BLOCK")
    assert set(first["matched_rules"]) >= {"hash_bank:known_bad", "hash_bank:known_csam"}
    assert "hash_bank:spam_campaign" not in first["matched_rules"]  # removed before the upload
    letters = kafka.wait_for(
        topics["moderation.dlq"],
        lambda values: any(is_bank_refusal(letter) for letter in values),
        timeout_s=60,
    )
    [tombstone] = [letter for letter in letters if is_bank_refusal(letter)]
    assert (tombstone["key"], tombstone["source_topic"]) == (SHA, topics["hash.bank"])
    assert "tombstone" in tombstone["message"]


def is_bank_refusal(letter: dict[str, Any]) -> bool:
    """A hash.bank record refused for its shape (a tombstone, a key not naming its body)."""
    return bool(letter["error_class"] == "schema" and letter["source_topic"].endswith("hash.bank"))
