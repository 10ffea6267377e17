"""`modstream bench`'s output reader (modstream/bench/moderation.py `ActionWatcher`) on the real
broker: committed records only, from every partition's start, each action's first arrival
found by content id, a writer that ended reported at once."""

from __future__ import annotations

import json
import time
import uuid

import pytest
from confluent_kafka import Producer

from modstream.bench.moderation import ActionWatcher
from modstream.core.config import Settings
from modstream.testing.stack import Kafka

pytestmark = pytest.mark.integration


def _transaction(producer: Producer, topic: str, ids: list[str], *, commit: bool) -> None:
    producer.begin_transaction()
    for index, content_id in enumerate(ids):
        value = json.dumps({"content_id": content_id, "n": index}).encode()
        producer.produce(topic, key=content_id.encode(), value=value, partition=index % 2)
    if commit:
        producer.commit_transaction()
    else:
        producer.abort_transaction()


def test_the_watcher_sees_committed_actions_and_finds_each_content_ids_first(
    kafka: Kafka, stack: Settings
) -> None:
    topic = f"bench-watcher-{uuid.uuid4().hex[:8]}"
    kafka.create_topics([topic], partitions=2)
    producer = Producer(
        {"bootstrap.servers": stack.bootstrap_servers, "transactional.id": f"t-{topic}"}
    )
    producer.init_transactions(30)
    before = int(time.time() * 1000)
    _transaction(producer, topic, ["a", "b", "a"], commit=True)  # before the watcher starts
    _transaction(producer, topic, ["aborted"], commit=False)
    watcher = ActionWatcher(stack.bootstrap_servers, topic)
    watcher.start()
    try:
        first_a = watcher.wait_for("a", timeout_s=30)
        with pytest.raises(TimeoutError):
            watcher.wait_for("late", timeout_s=1)
        _transaction(producer, topic, ["late", "c"], commit=True)
        first_late = watcher.wait_for("late", timeout_s=30)
        watcher.wait_for("c", timeout_s=30)
        with pytest.raises(RuntimeError, match="writer ended"):
            watcher.wait_for("never", timeout_s=30, alive=lambda: False)
    finally:
        watcher.stop.set()
        watcher.join(10)
    watcher.check()
    ids = sorted(action["content_id"] for _, action in watcher.seen)
    assert ids == ["a", "a", "b", "c", "late"]  # the aborted transaction is not read
    assert len(watcher.written) == len(watcher.seen)
    assert all(stamp >= before for stamp in watcher.written)  # the records' own timestamps
    assert first_a <= first_late
    assert watcher.first["a"] == min(
        at for at, action in watcher.seen if action["content_id"] == "a"
    )
