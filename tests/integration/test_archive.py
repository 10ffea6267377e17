"""`modstream archive` on the real broker: committed records only (an aborted transaction's
never reach the archive), malformed ones counted and skipped, to the end then exit, and
`follow` picking up what arrives later, each record exactly once."""

from __future__ import annotations

import dataclasses
import json
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaProducer

from modstream.analytics import archive
from modstream.analytics import streams as analytics
from modstream.core.config import Settings
from modstream.stack import deployments
from modstream.testing import archive as archive_data
from modstream.testing.stack import Kafka

pytestmark = pytest.mark.integration


def _encoded(values: list[dict[str, Any]]) -> list[tuple[str | None, bytes | None]]:
    return [(str(value["content_id"]), json.dumps(value).encode()) for value in values]


def _transaction(
    settings: Settings, topic: str, values: list[dict[str, Any]], *, commit: bool
) -> None:
    producer = KafkaProducer(
        bootstrap_servers=settings.bootstrap_servers,
        transactional_id=f"it-archive-{uuid.uuid4().hex[:8]}",
        **settings.kafka.python_options(),
    )
    try:
        producer.init_transactions()
        producer.begin_transaction()
        for key, value in _encoded(values):
            producer.send(topic, key=key.encode() if key else None, value=value)
        producer.flush()
        if commit:
            producer.commit_transaction()
        else:
            producer.abort_transaction()
    finally:
        producer.close(timeout=10)


def _archived(settings: Settings, prefix: str) -> list[tuple[int, int]]:
    table = analytics.read_decisions(settings=settings, prefix=prefix)
    return sorted(zip(table["_partition"].to_pylist(), table["_offset"].to_pylist(), strict=True))


def test_archive_to_the_end_then_follow(stack: Settings, kafka: Kafka, tmp_path: Path) -> None:
    settings = dataclasses.replace(stack, run_dir=tmp_path)
    prefix = f"it-{uuid.uuid4().hex[:10]}"
    topic = deployments.topic_names(prefix)["moderation.decisions"]
    kafka.create_topics([topic], partitions=2)
    decisions = archive_data.records()["moderation.decisions"][:40]
    kafka.produce(topic, [*_encoded(decisions[:20]), ("c7-x", b"{not json")])
    _transaction(settings, topic, decisions[20:25], commit=False)
    _transaction(settings, topic, decisions[25:30], commit=True)

    said: list[str] = []
    rows = archive.run(settings, prefix, say=said.append)
    assert rows["decisions"] == 25  # 20 plain, 5 committed; the aborted 5 never
    assert any("decisions" in line and "1 skipped" in line for line in said), said
    ids = set(analytics.read_decisions(settings=settings, prefix=prefix)["decision_id"].to_pylist())
    assert ids == {d["decision_id"] for d in decisions[:20] + decisions[25:30]}

    stop = threading.Event()
    summaries: list[archive.Summary] = []
    follower = threading.Thread(
        target=lambda: summaries.append(
            archive.archive(settings, prefix, follow=True, stop=stop, say=said.append)
        )
    )
    follower.start()
    try:
        kafka.produce(topic, _encoded(decisions[30:40]))
        deadline = time.monotonic() + 60
        while len(_archived(settings, prefix)) < 35 and time.monotonic() < deadline:
            time.sleep(0.5)
    finally:
        stop.set()
        follower.join(timeout=60)
    assert not follower.is_alive()
    assert summaries[0].rows["decisions"] == 10
    archived = _archived(settings, prefix)
    assert len(archived) == len(set(archived)) == 35
    assert archive.run(settings, prefix, say=said.append)["decisions"] == 0
