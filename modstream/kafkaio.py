"""Bounded Kafka helpers for the CLI, the demo and the tests: produce, read to the end.

Every call has a timeout; none of them can hang on a broker that went away.
"""

from __future__ import annotations

import time
from collections.abc import Iterable

from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.consumer.fetcher import ConsumerRecord

from modstream.stack import BROKER_MESSAGE_MAX_BYTES


def produce(
    bootstrap_servers: str, topic: str, records: Iterable[tuple[str | None, bytes | None]]
) -> int:
    """Send (key, value) pairs to `topic` and wait until the broker acknowledged all of them."""
    producer = KafkaProducer(
        bootstrap_servers=bootstrap_servers,
        acks="all",
        linger_ms=5,
        max_request_size=BROKER_MESSAGE_MAX_BYTES - 1024,
        max_block_ms=15_000,
        request_timeout_ms=15_000,
    )
    futures = []
    try:
        for key, value in records:
            futures.append(
                producer.send(topic, key=key.encode() if key is not None else None, value=value)
            )
        producer.flush(timeout=60)
        for future in futures:
            future.get(timeout=30)  # raises what the broker refused (no silent loss)
    finally:
        producer.close(timeout=10)
    return len(futures)


def contract_key(topic: str, value: object) -> str | None:
    """The Kafka key the contract gives a record: policy_id on policy.rules, the hash on
    hash.bank (both compacted, so a key is required), content_id everywhere else."""
    if not isinstance(value, dict):
        return None
    field = {"policy.rules": "policy_id", "hash.bank": "hash"}.get(topic, "content_id")
    key = value.get(field)
    return key if isinstance(key, str) else None


def read_to_end(
    bootstrap_servers: str, topic: str, *, committed: bool = True, timeout_s: float = 30.0
) -> list[ConsumerRecord]:
    """Every record of `topic` from the beginning up to its end when called.

    With `committed`, the end is the last stable offset: what a read_committed consumer of an
    exactly-once producer may see.
    """
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap_servers,
        enable_auto_commit=False,
        isolation_level="read_committed" if committed else "read_uncommitted",
        request_timeout_ms=15_000,
        max_partition_fetch_bytes=BROKER_MESSAGE_MAX_BYTES,
    )
    try:
        partitions = [
            TopicPartition(topic, partition)
            for partition in sorted(consumer.partitions_for_topic(topic) or [])
        ]
        if not partitions:
            raise LookupError(f"topic {topic} does not exist on {bootstrap_servers}")
        consumer.assign(partitions)
        consumer.seek_to_beginning(*partitions)
        end = consumer.end_offsets(partitions)
        records: list[ConsumerRecord] = []
        deadline = time.monotonic() + timeout_s
        while any(consumer.position(tp) < end[tp] for tp in partitions):
            if time.monotonic() > deadline:
                raise TimeoutError(f"reading {topic} did not reach its end within {timeout_s}s")
            for batch in consumer.poll(timeout_ms=500).values():
                records.extend(batch)
        return records
    finally:
        consumer.close()
