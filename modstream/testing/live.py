"""Driving a live moderation job in an integration test: records stamped now and signed as their
producers would, review grants, waiting for a decision or a refusal (a DLQ row), watching
decisions as they become visible, live traffic in the background.

Use them with the plugin's fixtures (`kafka`, `moderation_deployment`, `start_job`):

    from modstream.testing.live import now_ms, send, wait_decision
    from modstream.testing.records import TEST_KEYRING, evidence, upload

    topics = moderation_deployment.topics
    send(kafka, topics, "content.versions", upload("c-9", at=now_ms()), TEST_KEYRING)
    send(kafka, topics, "detector.results", evidence("c-9", at=now_ms(),
         scores={"offensive": 0.99}), TEST_KEYRING)
    wait_decision(kafka, topics, "c-9", "evidence", "BLOCK")

Every wait is bounded and fails saying what it saw.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from modstream.demo import workload
from modstream.review.queue import grant_record
from modstream.testing.records import upload
from modstream.testing.stack import Kafka
from modstream.trust.signing import Keyring, sign


def now_ms() -> int:
    """The wall clock in ms: a live job's records are stamped now."""
    return int(time.time() * 1000)


def send(
    kafka: Kafka, topics: dict[str, str], topic: str, value: dict[str, Any], keyring: Keyring
) -> None:
    """Signed with its producer's key in `keyring` unless `value` carries a signature."""
    workload.produce(kafka.bootstrap_servers, [{"topic": topic, "value": value}], topics, keyring)


def signed_with(record: dict[str, Any], key: bytes | None) -> dict[str, Any]:
    assert key is not None
    return {**record, "signature": sign(record, key)}


def decisions_of(kafka: Kafka, topics: dict[str, str], content_id: str) -> list[dict[str, Any]]:
    """`content_id`'s committed decisions so far, by revision."""
    found = [
        d for d in kafka.values(topics["moderation.decisions"]) if d["content_id"] == content_id
    ]
    return sorted(found, key=lambda d: d["decision_revision"])


def wait_decision(
    kafka: Kafka, topics: dict[str, str], content_id: str, trigger: str, outcome: str
) -> None:
    """Wait (90 s at most) for a decision of `content_id` by `trigger` with `outcome`."""
    kafka.wait_for(
        topics["moderation.decisions"],
        lambda values: any(
            d["content_id"] == content_id and d["trigger"] == trigger and d["outcome"] == outcome
            for d in values
        ),
        timeout_s=90,
    )


def refused(
    kafka: Kafka, topics: dict[str, str], event_id: str, topic: str = "review.decisions"
) -> dict[str, Any]:
    """The DLQ row of the review (or lease) whose event id is or starts with `event_id`."""

    def letters(values: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [
            v for v in values if v["source_topic"] == topics[topic] and f'"{event_id}' in v["raw"]
        ]

    values = kafka.wait_for(topics["moderation.dlq"], lambda vs: bool(letters(vs)), timeout_s=90)
    [letter] = letters(values)
    return letter


def grant(
    kafka: Kafka,
    topics: dict[str, str],
    reviewer_id: str,
    queues: list[str],
    keyring: Keyring,
    lead: str = "lead-1",
) -> None:
    """`lead` grants `reviewer_id` the queues from a minute ago (before any review here)."""
    record = grant_record(reviewer_id, queues, lead, now_ms() - 60_000)
    send(kafka, topics, "review.grants", record, keyring)


def comment(content_id: str, at: int) -> dict[str, Any]:
    """A text upload on a comment stamped `at`, event id `ev-<content_id>`."""
    return upload(content_id, at=at, surface="comment", event_id=f"ev-{content_id}")


class Watch:
    """Reads committed decisions in the background and remembers when each revision was first
    seen (wall clock), so the test can tell when a decision became visible."""

    def __init__(self, kafka: Kafka, topic: str) -> None:
        self.kafka, self.topic = kafka, topic
        self.first_seen: dict[tuple[str, int], float] = {}
        self.decisions: dict[tuple[str, int], dict[str, Any]] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            seen_at = time.time() * 1000
            for decision in self.kafka.values(self.topic):
                key = (decision["content_id"], decision["decision_revision"])
                if key not in self.first_seen:
                    self.first_seen[key] = seen_at
                    self.decisions[key] = decision
            self._stop.wait(0.25)

    def of(self, content_id: str) -> list[dict[str, Any]]:
        found = [d for (cid, _), d in list(self.decisions.items()) if cid == content_id]
        return sorted(found, key=lambda d: d["decision_revision"])

    def wait(self, content_id: str, predicate: Any, timeout_s: float) -> dict[str, Any]:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            for decision in self.of(content_id):
                if predicate(decision):
                    return decision
            time.sleep(0.1)
        raise AssertionError(
            f"{content_id}: no such decision in {timeout_s}s: {self.of(content_id)}"
        )

    def __enter__(self) -> Watch:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)


class LiveTraffic:
    """A text upload stamped now every second, in the background, until stopped: the live
    traffic a real system has, also while a job is down."""

    def __init__(self, kafka: Kafka, topics: dict[str, str]) -> None:
        self.kafka, self.topics = kafka, topics
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        index = 0
        while not self._stop.is_set():
            live = upload(f"live-{index}", at=now_ms(), surface="dm")
            line: workload.Line = {"topic": "content.versions", "value": live}
            workload.produce(self.kafka.bootstrap_servers, [line], self.topics)
            index += 1
            self._stop.wait(1.0)

    def __enter__(self) -> LiveTraffic:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(timeout=30)
