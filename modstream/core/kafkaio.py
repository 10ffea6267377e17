"""Bounded Kafka helpers for the CLI, the demo and the tests: produce, read to the end.

Every call has a timeout; none of them can hang on a broker that went away. Commands decode
what they read with `decode_values` / `read_values`: a record that is not valid (not JSON, too
deep, too large, not its topic's schema) is skipped and counted, never a crash: any topic can
hold a record written by someone else.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.consumer.fetcher import ConsumerRecord

from modstream.contract.signals import hash_bank_key
from modstream.core.config import kafka_options
from modstream.stack.local import BROKER_MESSAGE_MAX_BYTES


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


def schema_topic(physical: str) -> str | None:
    """The contract (or modstream) topic whose schema validates `physical`: its own name, or a
    name it ends with after a prefix (`<prefix>.moderation.decisions`)."""
    from modstream.contract.registry import TOPIC_MODELS

    matches = [t for t in TOPIC_MODELS if physical == t or physical.endswith("." + t)]
    return max(matches, key=len) if matches else None


def decode_values(
    records: Iterable[ConsumerRecord], schema: str | None
) -> tuple[list[dict[str, Any]], int]:
    """The JSON objects among `records` that are valid (strict JSON: size, depth, duplicated
    names, NaN, 64-bit integers; and `schema`'s model when it names a topic), and how many
    were skipped. A record without a value (a compaction tombstone) is neither."""
    from modstream.contract.registry import SchemaError, load_json, validate

    values: list[dict[str, Any]] = []
    skipped = 0
    for record in records:
        if record.value is None:
            continue
        try:
            value = load_json(schema or "record", record.value)
            if not isinstance(value, dict):
                raise SchemaError(schema or "record", "<record>: not a JSON object")
            if schema is not None:
                validate(schema, value)
        except Exception:  # SchemaError, or anything a hostile record makes a parser raise
            skipped += 1
            continue
        values.append(value)
    return values, skipped


def _warn(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def read_values(
    bootstrap_servers: str,
    topic: str,
    *,
    schema: str | None = None,
    committed: bool = True,
    timeout_s: float = 30.0,
    warn: Callable[[str], None] = _warn,
) -> list[dict[str, Any]]:
    """The valid records of `topic` (see `decode_values`; `schema` defaults to the topic's own
    schema), from the beginning to its end; a warning counts what was skipped."""
    records = read_to_end(bootstrap_servers, topic, committed=committed, timeout_s=timeout_s)
    values, skipped = decode_values(records, schema or schema_topic(topic))
    if skipped:
        warn(f"{topic}: skipped {skipped} malformed record(s) of {len(records)}")
    return values


def contract_key(topic: str, value: object) -> str | None:
    """The Kafka key the contract gives a record: policy_id on policy.rules,
    `<bank>:<hash_type>:<hash>` on hash.bank, reviewer_id on review.grants (all compacted, so a
    key is required), content_id everywhere else."""
    if not isinstance(value, dict):
        return None
    if topic == "hash.bank":
        parts = [value.get(name) for name in ("bank", "hash_type", "hash")]
        if all(isinstance(part, str) for part in parts):
            return hash_bank_key(*parts)  # type: ignore[arg-type]
        return None
    field = {"policy.rules": "policy_id", "review.grants": "reviewer_id"}.get(topic, "content_id")
    key = value.get(field)
    return key if isinstance(key, str) else None


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
