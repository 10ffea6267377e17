"""An open transaction on an input partition, on the real broker: the moderation job's
Prometheus endpoint shows, for that partition, the offsets waiting behind it and how long the
last stable offset has not moved, growing while it hangs and back to 0 once it is aborted
(EndOffsets.Broker and StableEnd in deploy/flink-ext; docs/OPERATIONS.md, "Open transaction")."""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import Producer

from modstream.core import endpoints
from modstream.core.config import Settings
from modstream.jobs.metrics import LSO_STALLED_MS, UNSTABLE_RECORDS
from modstream.testing.stack import JobProcess, ModerationDeployment, free_ports

pytestmark = pytest.mark.integration

TRANSACTION_TIMEOUT_MS = 60_000  # the broker aborts it by then if the test dies holding it


def partition_gauges(port: int, topic: str, partition: int) -> dict[str, float]:
    """The two gauges the job serves for `topic#partition` now (absent when not served yet)."""
    # Flink's reporter writes a label value with every character but [A-Za-z0-9_] as "_".
    wanted = {"topic": re.sub(r"[^A-Za-z0-9_]", "_", topic), "partition": str(partition)}
    return {
        name: value
        for name, labels, value in endpoints.samples(endpoints.scrape(port, 5) or "")
        if name in (UNSTABLE_RECORDS, LSO_STALLED_MS) and wanted.items() <= labels.items()
    }


def wait_for_gauges(
    port: int, topic: str, condition: Callable[[dict[str, float]], bool], timeout_s: float = 60
) -> dict[str, float]:
    deadline = time.monotonic() + timeout_s
    seen = partition_gauges(port, topic, 0)
    while not (len(seen) == 2 and condition(seen)):
        if time.monotonic() > deadline:
            raise AssertionError(f"{topic}#0: gauges {seen} after {timeout_s}s")
        time.sleep(0.5)
        seen = partition_gauges(port, topic, 0)
    return seen


def test_a_hanging_transaction_shows_per_partition_until_it_is_aborted(
    stack: Settings, start_job: Any, moderation_deployment: ModerationDeployment
) -> None:
    (port,) = free_ports(1)
    job: JobProcess = start_job(
        "moderation", *moderation_deployment.args, "--metrics-port", str(port)
    )
    job.wait_running()
    uploads = moderation_deployment.topics["content.versions"]
    settled = wait_for_gauges(port, uploads, lambda gauges: True)
    assert settled == {UNSTABLE_RECORDS: 0, LSO_STALLED_MS: 0}, settled

    producer = Producer(
        {
            "bootstrap.servers": stack.bootstrap_servers,
            "transactional.id": f"hanging-{uuid.uuid4().hex[:8]}",
            "transaction.timeout.ms": TRANSACTION_TIMEOUT_MS,
        }
    )
    producer.init_transactions(30)
    producer.begin_transaction()
    for index in range(3):
        producer.produce(uploads, key=f"c-hanging-{index}", value=b"{}", partition=0)
    producer.flush(30)  # written, not committed: the LSO stays where the transaction began

    # A scrape reads the two gauges one after the other: a poll between the reads can show the
    # stall before the records behind it (CI, stop 40: {unstable 0, stalled > 0}). Wait for both.
    hanging = wait_for_gauges(
        port, uploads, lambda gauges: gauges[LSO_STALLED_MS] > 0 and gauges[UNSTABLE_RECORDS] > 0
    )
    assert hanging[UNSTABLE_RECORDS] == 3
    later = wait_for_gauges(
        port, uploads, lambda gauges: gauges[LSO_STALLED_MS] >= hanging[LSO_STALLED_MS] + 2_000
    )
    assert later[UNSTABLE_RECORDS] == 3  # nothing moved: the stall grows with the clock
    other = partition_gauges(port, uploads, 1)
    assert other == {UNSTABLE_RECORDS: 0, LSO_STALLED_MS: 0}  # only the partition it holds

    producer.abort_transaction(30)
    released = wait_for_gauges(
        port, uploads, lambda gauges: gauges[LSO_STALLED_MS] == 0 and gauges[UNSTABLE_RECORDS] == 0
    )  # within 60 s, or it fails with the gauges it last saw
    assert released == {UNSTABLE_RECORDS: 0, LSO_STALLED_MS: 0}
    assert job.alive()
