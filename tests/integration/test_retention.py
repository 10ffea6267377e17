"""Human decisions at any age, on the real broker (issue 12 item 1; docs/moderation.md,
"Retention"): a version decided, its full state expired (a 10 s TTL here instead of 30 days),
then a reviewer's BLOCK applies to its compact record and the action hides it; once the compact
record's retention ended too, a review goes to the DLQ as `stale`, as does one for a version
never decided. Under the old behaviour the first review was dropped without a trace."""

from __future__ import annotations

import time
from typing import Any

import pytest

from modstream.demo import workload
from modstream.testing.records import blocking_review, evidence, upload
from modstream.testing.stack import JobProcess, Kafka, ModerationDeployment

pytestmark = pytest.mark.integration

STATE_TTL_MS = 10_000
RETENTION_MS = 30_000


def now_ms() -> int:
    return int(time.time() * 1000)


def sleep_until(ts: int) -> None:
    """Wait until the clock reads `ts` (at once when it is past: a slow machine got there)."""
    time.sleep(max(0.0, (ts - now_ms()) / 1000))


def send(kafka: Kafka, deployment: ModerationDeployment, topic: str, value: Any) -> None:
    workload.produce(kafka.bootstrap_servers, [{"topic": topic, "value": value}], deployment.topics)


def test_a_review_after_the_state_expired_still_hides_the_content(
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
    start = now_ms()
    for content_id in ("keep", "gone"):
        send(kafka, deployment, "content.versions", upload(content_id, at=start))
        send(kafka, deployment, "detector.results", evidence(content_id, at=start + 50))
    actions = deployment.topics["moderation.actions"]
    kafka.wait_for(  # visible while scanning, then ALLOW on its evidence (no new action)
        deployment.topics["moderation.decisions"],
        lambda v: {d["content_id"] for d in v if d["outcome"] == "ALLOW"} >= {"keep", "gone"},
    )
    assert {a["visibility"] for a in kafka.values(actions)} == {"public"}

    # Past the full state's TTL (event time follows the clock in a live, quiet job).
    sleep_until(start + 50 + STATE_TTL_MS + 6_000)
    reviewed_at = now_ms()
    # Before the compact record's retention ends (else this review is stale, and this machine
    # too slow for the test's windows, which the message says).
    assert reviewed_at < start + STATE_TTL_MS + RETENTION_MS, f"{reviewed_at - start} ms in"
    send(kafka, deployment, "review.decisions", blocking_review("keep", reviewed_at))
    hidden = kafka.wait_for(
        actions, lambda v: any(a["content_id"] == "keep" and a["visibility"] == "hidden" for a in v)
    )
    [block] = [a for a in hidden if a["content_id"] == "keep" and a["visibility"] == "hidden"]
    decisions = kafka.values(deployment.topics["moderation.decisions"])
    [reviewed] = [d for d in decisions if d["content_id"] == "keep" and d["trigger"] == "review"]
    assert block["decision_revision"] == reviewed["decision_revision"] > 1
    assert reviewed["reasons"] == ["human_review"]  # "spam" is not a rule reason

    # Past the compact record's retention: nothing to apply it to, and the DLQ says so.
    sleep_until(start + 50 + STATE_TTL_MS + RETENTION_MS + 6_000)
    send(kafka, deployment, "review.decisions", blocking_review("gone", now_ms()))
    send(kafka, deployment, "review.decisions", blocking_review("never-uploaded", now_ms()))
    letters = kafka.wait_for(
        deployment.topics["moderation.dlq"],
        lambda v: (
            {d["key"] for d in v if d["error_class"] == "stale"} >= {"gone", "never-uploaded"}
        ),
    )
    assert all(
        "review.decisions" in d["source_topic"] for d in letters if d["error_class"] == "stale"
    )
    assert not any(
        a["content_id"] == "gone" and a["visibility"] == "hidden" for a in kafka.values(actions)
    )
