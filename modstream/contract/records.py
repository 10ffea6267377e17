"""A topic's records as the contract reads them: which schema validates a (prefixed) topic, its
valid records decoded, and the key the contract gives a record.

A record that is not valid (not JSON, too deep, too large, not its topic's schema) is skipped and
counted, never a crash: any topic can hold a record written by someone else. Reading the bytes is
modstream/core/kafkaio.py's.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable
from typing import Any

from kafka.consumer.fetcher import ConsumerRecord

from modstream.contract.signals import hash_bank_key
from modstream.core import kafkaio


def schema_topic(physical: str) -> str | None:
    """The contract (or modstream) topic whose schema validates `physical`: its own name, or a
    name it ends with after a prefix (`<prefix>.moderation.decisions`)."""
    from modstream.contract.registry import TOPIC_MODELS  # the models load only when decoding

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
    records = kafkaio.read_to_end(
        bootstrap_servers, topic, committed=committed, timeout_s=timeout_s
    )
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
        bank, hash_type, digest = (value.get(name) for name in ("bank", "hash_type", "hash"))
        if isinstance(bank, str) and isinstance(hash_type, str) and isinstance(digest, str):
            return hash_bank_key(bank, hash_type, digest)
        return None
    field = {"policy.rules": "policy_id", "review.grants": "reviewer_id"}.get(topic, "content_id")
    key = value.get(field)
    return key if isinstance(key, str) else None
