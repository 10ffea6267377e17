"""A live moderation job on the real broker survives hostile records in live traffic (issue 11):
after ten quiet seconds, a report stamped ten years ahead, a result of 50,000 nested brackets and
an upload with a hostile media reference change nothing but the DLQ; new uploads still get their
first decision within 5 s, deadlines fire on time (also while nothing arrives), an earlier
version keeps its state, and the job never restarts (it runs with restarts disabled)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest

from modstream.demo import workload
from modstream.testing.live import Watch, comment, now_ms
from modstream.testing.records import TEST_KEYRING, evidence
from modstream.testing.stack import JobProcess, Kafka, ModerationDeployment

pytestmark = pytest.mark.integration

TEXT_DEADLINE_MS = 5_000  # policy_rules/global.yaml: text {deadline_ms: 5000}
TEN_YEARS_MS = 10 * 365 * 86_400_000


@pytest.fixture
def watch(kafka: Kafka, moderation_deployment: ModerationDeployment) -> Iterator[Watch]:
    with Watch(kafka, moderation_deployment.topics["moderation.decisions"]) as watching:
        yield watching


def produce(kafka: Kafka, topics: dict[str, str], topic: str, value: dict[str, Any]) -> None:
    workload.produce(
        kafka.bootstrap_servers, [{"topic": topic, "value": value}], topics, TEST_KEYRING
    )


def test_hostile_records_in_live_traffic_change_nothing_but_the_dlq(
    kafka: Kafka,
    start_job: Any,
    moderation_deployment: ModerationDeployment,
    watch: Watch,
) -> None:
    topics = moderation_deployment.topics
    args = [
        *moderation_deployment.args,
        "--checkpoint-interval-ms",
        "1000",
        "--idleness-ms",
        "1000",
        "--restart-strategy",
        "none",
        "--evidence-grace-ms",
        "2000",
    ]
    job: JobProcess = start_job("moderation", *args)
    job.wait_running()

    # Live traffic: one version decided on its evidence, one that never gets evidence.
    produce(kafka, topics, "content.versions", comment("early", now_ms()))
    produce(kafka, topics, "detector.results", evidence("early", at=now_ms()))
    quiet_upload_ts = now_ms()
    produce(kafka, topics, "content.versions", comment("no-evidence", quiet_upload_ts))
    watch.wait("early", lambda d: d["trigger"] == "evidence", timeout_s=60)

    # Ten seconds without input: the deadline of the version without evidence fires once the
    # detector had its 5 s and the 2 s grace for its answer to arrive, at the deadline's ts.
    time.sleep(10)
    # Up to 30 s more on a loaded machine (checkpoints commit the decision).
    expired = watch.wait("no-evidence", lambda d: d["trigger"] == "deadline", timeout_s=30)
    assert expired["ts"] == quiet_upload_ts + TEXT_DEADLINE_MS
    assert watch.first_seen[("no-evidence", expired["decision_revision"])] >= expired["ts"]

    # Hostile records in the middle of live traffic.
    produce(kafka, topics, "content.versions", comment("mid-1", now_ms()))
    future_report = {
        "event_id": "hostile-future",
        "report_id": "r-1",
        "content_id": "early",
        "content_version": 1,
        "reason": "spam",
        "ts": now_ms() + TEN_YEARS_MS,  # and no reporter_id: invalid
    }
    kafka.produce(topics["moderation.reports"], [("early", json.dumps(future_report).encode())])
    kafka.produce(topics["detector.results"], [("early", b"[" * 50_000 + b"]" * 50_000)])
    hostile_media = comment("hostile-media", now_ms())
    hostile_media["media_ref"] = "file:///media/../../etc/passwd\u0000.png"
    kafka.produce(
        topics["content.versions"], [("hostile-media", json.dumps(hostile_media).encode())]
    )
    produce(kafka, topics, "content.versions", comment("mid-2", now_ms()))

    # New uploads get their first decision within 5 s.
    produced: dict[str, int] = {}
    for index in range(3):
        content_id = f"after-{index}"
        produced[content_id] = now_ms()
        produce(kafka, topics, "content.versions", comment(content_id, produced[content_id]))
        time.sleep(0.5)
    for content_id, at in produced.items():
        first = watch.wait(content_id, lambda d: d["decision_revision"] == 1, timeout_s=30)
        assert first["trigger"] == "fast_gate"
        latency_ms = watch.first_seen[(content_id, 1)] - at
        assert latency_ms <= 5_000, f"{content_id}: first decision after {latency_ms:.0f} ms"

    # The earlier version kept its state: a review decision sent now applies to it.
    review = {
        "event_id": "review-early",
        "task_id": "direct-early",
        "content_id": "early",
        "content_version": 1,
        "reviewer_id": "alice",
        "outcome": "BLOCK",
        "reason": "harassment",
        "ts": now_ms(),
    }
    produce(kafka, topics, "review.decisions", review)
    blocked = watch.wait("early", lambda d: d["trigger"] == "review", timeout_s=30)
    # Revision 1 the fast gate, 2 the evidence, 3 the review: numbering went on where it was.
    assert (blocked["outcome"], blocked["decision_revision"]) == ("BLOCK", 3)
    kafka.wait_for(
        topics["moderation.actions"],
        lambda actions: any(
            a["content_id"] == "early" and a["visibility"] == "hidden" for a in actions
        ),
        timeout_s=30,
    )

    # No deadline fired before its time, on the clock or in event time.
    for (content_id, revision), decision in list(watch.decisions.items()):
        if decision["trigger"] == "deadline":
            first = watch.of(content_id)[0]
            assert decision["ts"] == first["ts"] + TEXT_DEADLINE_MS, decision
            assert watch.first_seen[(content_id, revision)] >= decision["ts"], decision
    assert {d["content_id"] for d in watch.decisions.values()} >= {"mid-1", "mid-2", *produced}
    assert "hostile-media" not in {d["content_id"] for d in watch.decisions.values()}

    # Every hostile record is in the DLQ once; nothing else is; the job never restarted.
    letters = kafka.values(topics["moderation.dlq"])
    assert sorted(
        (letter["source_topic"].split(".", 1)[1], letter["error_class"]) for letter in letters
    ) == [
        ("content.versions", "schema"),
        ("detector.results", "schema"),
        ("moderation.reports", "schema"),
    ], letters
    assert job.alive(), job.output()[-3000:]
    assert "failed" not in job.output().lower()
