"""`modstream topics create` on the real broker: every contract topic, idempotently."""

from __future__ import annotations

import time

import pytest
from kafka import KafkaAdminClient

from modstream.core.config import Settings
from modstream.core.topics import TOPICS, create_topics

pytestmark = pytest.mark.integration


def test_topics_create_is_idempotent_and_matches_the_spec(stack: Settings) -> None:
    said: list[str] = []
    create_topics(stack.bootstrap_servers, say=said.append)
    again: list[str] = []
    assert create_topics(stack.bootstrap_servers, say=again.append) == []
    assert len(again) == len(TOPICS)
    assert all(line.startswith("exists") and "spec says" not in line for line in again), again

    admin = KafkaAdminClient(bootstrap_servers=stack.bootstrap_servers, request_timeout_ms=15_000)
    try:
        # A topic created a moment ago may be described before its partitions' metadata
        # reached the broker answering (0 partitions): asked again, within a bound.
        deadline = time.monotonic() + 30
        while True:
            described = {
                entry["name"]: entry
                for entry in admin.describe_topics([spec.name for spec in TOPICS])
            }
            if all(described[s.name]["partitions"] for s in TOPICS) or time.monotonic() > deadline:
                break
            time.sleep(0.5)
    finally:
        admin.close()
    for spec in TOPICS:
        assert len(described[spec.name]["partitions"]) == spec.partitions, spec.name
