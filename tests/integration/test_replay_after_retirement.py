"""An old signed review re-sent after retirement changes nothing, on the real broker (issue 27
point 4; docs/moderation.md, "Human input: replays and order"). Measured before: with a 20 s
state TTL, review ALLOW (e1) then BLOCK (e2); e1 re-sent byte for byte 32 s later gave a new
revision ALLOW stamped with e1's old `ts`, over the later BLOCK. Here the version retires (10 s
TTL), e1's bytes are produced again, then a review stamped between e1 and e2: the first is a
duplicate (dropped, as live duplicates are), the second older than the BLOCK in force (`stale`
in the DLQ). Neither makes a revision."""

from __future__ import annotations

import time
from typing import Any

import pytest

from modstream.core import kafkaio
from modstream.demo import workload
from modstream.testing.records import evidence, review_decision, upload
from modstream.testing.stack import JobProcess, Kafka, ModerationDeployment

pytestmark = pytest.mark.integration

STATE_TTL_MS = 10_000
RETENTION_MS = 300_000
CONTENT = "replayed"


def now_ms() -> int:
    return int(time.time() * 1000)


def signed(deployment: ModerationDeployment, topic: str, value: Any) -> list[Any]:
    """The (key, bytes) records as produced: signed once, so a re-send is byte for byte."""
    [records] = workload.for_kafka([{"topic": topic, "value": value}], deployment.topics).values()
    return records


def review(at: int, outcome: str, event_id: str) -> dict[str, Any]:
    return review_decision(
        event_id=event_id, task_id=f"t-{event_id}", content_id=CONTENT, outcome=outcome, ts=at
    )


def test_an_old_signed_review_re_sent_after_retirement_changes_nothing(
    kafka: Kafka,
    start_job: Any,
    monkeypatch: pytest.MonkeyPatch,
    moderation_deployment: ModerationDeployment,
) -> None:
    monkeypatch.setenv("MODSTREAM_POLICY_KEY", "it-policy-key")
    deployment = moderation_deployment
    job: JobProcess = start_job(
        "moderation",
        *deployment.args,
        "--state-ttl-ms",
        str(STATE_TTL_MS),
        "--review-retention-ms",
        str(RETENTION_MS),
    )
    job.wait_running()
    decisions = deployment.topics["moderation.decisions"]
    reviews = deployment.topics["review.decisions"]
    start = now_ms()
    for topic, value in (
        ("content.versions", upload(CONTENT, at=start)),
        ("detector.results", evidence(CONTENT, at=start + 50)),
    ):
        workload.produce(
            kafka.bootstrap_servers, [{"topic": topic, "value": value}], deployment.topics
        )
    kafka.wait_for(decisions, lambda v: any(d["outcome"] == "ALLOW" for d in v))

    e1 = signed(deployment, "review.decisions", review(start + 1_000, "ALLOW", "rv-e1"))
    e2 = signed(deployment, "review.decisions", review(start + 2_000, "BLOCK", "rv-e2"))
    kafkaio.produce(kafka.bootstrap_servers, reviews, e1)
    kafkaio.produce(kafka.bootstrap_servers, reviews, e2)
    blocked = kafka.wait_for(
        decisions, lambda v: any(d["outcome"] == "BLOCK" and d["trigger"] == "review" for d in v)
    )
    in_force = max(d["decision_revision"] for d in blocked)

    # Past the full state's TTL (event time follows the clock in a live, quiet job): retired.
    time.sleep(max(0.0, (start + 2_000 + STATE_TTL_MS + 6_000 - now_ms()) / 1000))
    kafkaio.produce(kafka.bootstrap_servers, reviews, e1)  # the same bytes again
    between = signed(deployment, "review.decisions", review(start + 1_500, "ALLOW", "rv-e0"))
    kafkaio.produce(kafka.bootstrap_servers, reviews, between)
    # The stale row for the review in between comes after e1's re-send was read (one key, one
    # partition, in order).
    letters = kafka.wait_for(
        deployment.topics["moderation.dlq"],
        lambda v: any(d["key"] == CONTENT and d["error_class"] == "stale" for d in v),
    )
    [stale] = [d for d in letters if d["key"] == CONTENT]
    assert "review.decisions.ts" in stale["message"], stale["message"]
    after = kafka.values(decisions)
    assert max(d["decision_revision"] for d in after) == in_force, after[-1]
    assert after[-1]["outcome"] == "BLOCK"
    actions = kafka.values(deployment.topics["moderation.actions"])
    assert actions[-1]["visibility"] == "hidden"
