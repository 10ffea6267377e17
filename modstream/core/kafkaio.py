"""Bounded Kafka helpers for the CLI, the demo and the tests: produce, read to the end.

Every call has a timeout; none of them can hang on a broker that went away. Bytes only: what a
record means (its schema, its key) is the contract's, and commands decode what they read with
modstream/contract/records.py (`decode_values`, `read_values`).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator

from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.consumer.fetcher import ConsumerRecord

from modstream.core.config import kafka_options
from modstream.core.limits import BROKER_MESSAGE_MAX_BYTES


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
        **kafka_options(),
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


def read_to_end(
    bootstrap_servers: str, topic: str, *, committed: bool = True, timeout_s: float = 30.0
) -> list[ConsumerRecord]:
    """Every record of `topic` from the beginning up to its end when called.

    With `committed`, the end is the last stable offset: what a read_committed consumer of an
    exactly-once producer may see.
    """
    return list(iter_to_end(bootstrap_servers, topic, committed=committed, timeout_s=timeout_s))


def iter_to_end(
    bootstrap_servers: str, topic: str, *, committed: bool = True, timeout_s: float = 30.0
) -> Iterator[ConsumerRecord]:
    """`read_to_end` one fetched batch at a time, so a reader of a large topic (the compacted
    `moderation.index`, modstream/ops/reevaluate.py) holds one batch, never the topic."""
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap_servers,
        enable_auto_commit=False,
        isolation_level="read_committed" if committed else "read_uncommitted",
        request_timeout_ms=15_000,
        max_partition_fetch_bytes=BROKER_MESSAGE_MAX_BYTES,
        **kafka_options(),
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
        deadline = time.monotonic() + timeout_s
        while any(consumer.position(tp) < end[tp] for tp in partitions):
            if time.monotonic() > deadline:
                raise TimeoutError(f"reading {topic} did not reach its end within {timeout_s}s")
            for batch in consumer.poll(timeout_ms=500).values():
                yield from batch
    finally:
        consumer.close()
