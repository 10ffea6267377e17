"""EndOffsets.Broker (deploy/flink-ext) on the real broker: the end a read_committed consumer
can reach and the consumer group's committed position, per lane, as ValidatedTime reads them."""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest
from kafka import KafkaConsumer, TopicPartition
from kafka.structs import OffsetAndMetadata

from modstream.core.config import Settings
from modstream.jobs import runtime
from modstream.testing.stack import Kafka

pytestmark = pytest.mark.integration


def wait_until(probe: Any, expected: int, timeout_s: float = 20.0) -> int:
    deadline = time.monotonic() + timeout_s
    seen = int(probe())
    while seen != expected and time.monotonic() < deadline:
        time.sleep(0.2)
        seen = int(probe())
    return seen


def test_the_broker_poller_sees_each_lanes_end_and_committed_position(
    kafka: Kafka, stack: Settings, tmp_path: Any
) -> None:
    from pyflink.java_gateway import get_gateway

    runtime.create_env(
        runtime.JobConfig(
            name="end-offsets-test",
            bootstrap_servers=stack.bootstrap_servers,
            checkpoint_dir=tmp_path / "checkpoints",
            transactional_id_prefix="t",
            group_id="t",
        ),
        stack,
    )
    jvm = get_gateway().jvm
    topic = f"end-offsets-{uuid.uuid4().hex[:8]}"
    group = f"end-offsets-{uuid.uuid4().hex[:8]}"
    kafka.create_topics([topic], partitions=2)
    kafka.produce(topic, [(None, b"{}")] * 3)
    lane = f"{topic}#0"
    lanes = get_gateway().new_array(jvm.String, 1)
    lanes[0] = lane
    ends = jvm.io.modstream.flink.EndOffsets.Broker.of(stack.bootstrap_servers, group, lanes)
    total = wait_until(lambda: max(ends.end(lane), 0) + max(ends.end(f"{topic}#1"), 0), expected=3)
    assert total == 3  # both partitions polled once asked for
    assert ends.committed(lane) == -1  # the group never committed

    consumer = KafkaConsumer(bootstrap_servers=stack.bootstrap_servers, group_id=group)
    try:
        consumer.commit({TopicPartition(topic, 0): OffsetAndMetadata(ends.end(lane), "", -1)})
    finally:
        consumer.close()
    assert wait_until(lambda: ends.committed(lane), expected=ends.end(lane)) == ends.end(lane)
