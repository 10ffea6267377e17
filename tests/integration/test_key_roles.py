"""Keys bound to roles, review grants and leases, and secure defaults on a live moderation job
and the real broker (issue 27, points 2 and 3): a review signed with a detector's key goes to
the DLQ with class `signature` and changes nothing; a review for a task the reviewer holds no
grant (or no lease) for goes to the DLQ and changes nothing; a job started with the environment
deploy/k8s gives it refuses an unsigned review. In each, a genuine review sent afterwards on the
same partition is applied: once it is, the refused ones were processed, and the decisions show
they changed nothing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from modstream.review.queue import LEASE_MS, lease_record
from modstream.testing.k8s import job_environment
from modstream.testing.live import (
    decisions_of,
    grant,
    now_ms,
    refused,
    send,
    signed_with,
    wait_decision,
)
from modstream.testing.records import TEST_KEYRING, evidence, review_decision, upload
from modstream.testing.stack import Kafka, ModerationDeployment
from modstream.trust.signing import Keyring

pytestmark = pytest.mark.integration

# What the test suite's environment sets that deploy/k8s does not: cleared for the k8s job.
SUITE_ONLY = (
    "MODSTREAM_SIGNING_DEV_SECRET",
    "MODSTREAM_SIGNATURES_REQUIRED",
    "MODSTREAM_INSECURE_UNSIGNED_TOPICS",
    "MODSTREAM_INSECURE_NO_APPROVAL",
    "MODSTREAM_REQUIRE_APPROVAL",
    "MODSTREAM_SIGNING_KEYS_FILE",
)


def leased(kafka: Kafka, topics: dict[str, str], task: dict[str, Any], reviewer_id: str) -> None:
    """`reviewer_id` leases `task` from a second ago (before the review sent next)."""
    lease = lease_record(task, reviewer_id, now_ms() - 1_000, LEASE_MS)
    send(kafka, topics, "review.leases", lease, TEST_KEYRING)


def blocked_by_evidence(
    kafka: Kafka, topics: dict[str, str], content_id: str, keyring: Keyring, lead: str = "lead-1"
) -> None:
    # alice's proactive reviews (a task the job did not issue) need a grant of queue external.
    grant(kafka, topics, "alice", ["external"], keyring, lead)
    at = now_ms()
    send(kafka, topics, "content.versions", upload(content_id, at=at), keyring)
    offensive = evidence(content_id, at=at, scores={"offensive": 0.99})
    send(kafka, topics, "detector.results", offensive, keyring)
    wait_decision(kafka, topics, content_id, "evidence", "BLOCK")


def review(content_id: str, event_id: str, reviewer_id: str, outcome: str) -> dict[str, Any]:
    return review_decision(
        event_id=event_id,
        task_id=f"t-{content_id}",
        content_id=content_id,
        reviewer_id=reviewer_id,
        outcome=outcome,
        ts=now_ms(),
    )


def assert_only_the_genuine_review_applied(
    kafka: Kafka, topics: dict[str, str], content_id: str, keyring: Keyring
) -> None:
    """After the refused reviews, alice's ALLOW: the only revision a review made."""
    genuine = review(content_id, "rv-alice", "alice", "ALLOW")
    send(kafka, topics, "review.decisions", genuine, keyring)
    wait_decision(kafka, topics, content_id, "review", "ALLOW")
    decisions = decisions_of(kafka, topics, content_id)
    by_review = [d for d in decisions if d["trigger"] == "review"]
    assert len(by_review) == 1, decisions
    assert [d["outcome"] for d in decisions if d["trigger"] == "evidence"][-1:] == ["BLOCK"]


def test_a_review_signed_with_a_detectors_key_goes_to_the_dlq_and_changes_nothing(
    kafka: Kafka, start_job: Any, moderation_deployment: ModerationDeployment
) -> None:
    topics = moderation_deployment.topics
    job = start_job("moderation", *moderation_deployment.args)
    job.wait_running()
    blocked_by_evidence(kafka, topics, "kr-1", TEST_KEYRING)

    # The scan job's key for detector offensive_text (derived for role detector) signs an ALLOW
    # naming offensive_text as the reviewer; `appeals`'s key one naming `appeals`.
    detector_key = TEST_KEYRING.key_for("offensive_text", "detector")
    as_detector = signed_with(
        review("kr-1", "rv-detector", "offensive_text", "ALLOW"), detector_key
    )
    send(kafka, topics, "review.decisions", as_detector, TEST_KEYRING)
    appeals_key = TEST_KEYRING.key_for("appeals", "appeals")
    as_appeals = signed_with(review("kr-1", "rv-appeals", "appeals", "ALLOW"), appeals_key)
    send(kafka, topics, "review.decisions", as_appeals, TEST_KEYRING)
    for event_id in ("rv-detector", "rv-appeals"):
        letter = refused(kafka, topics, event_id)
        assert letter["error_class"] == "signature"
        assert "field 'reviewer_id'" in letter["message"]
    assert_only_the_genuine_review_applied(kafka, topics, "kr-1", TEST_KEYRING)


def test_a_job_with_the_k8s_environment_refuses_an_unsigned_review(
    kafka: Kafka,
    start_job: Any,
    moderation_deployment: ModerationDeployment,
    tmp_path: Path,
) -> None:
    env = {name: "" for name in SUITE_ONLY}
    env.update(job_environment("moderation", tmp_path))  # its keys file from the example Secret
    keyring = Keyring.from_env(env)  # the producers' keys: the same file
    topics = moderation_deployment.topics
    job = start_job("moderation", *moderation_deployment.args, env=env)
    job.wait_running()
    blocked_by_evidence(kafka, topics, "kr-2", keyring, lead="erin")  # the example's lead

    unsigned = review("kr-2", "rv-unsigned", "mallory", "ALLOW")
    send(kafka, topics, "review.decisions", unsigned, Keyring(required=frozenset()))
    letter = refused(kafka, topics, "rv-unsigned")
    assert letter["error_class"] == "signature"
    assert "unsigned; this deployment requires signatures" in letter["message"]
    # The detector's key from the deployment's keys file, on a review naming the detector.
    detector_key = keyring.key_for("offensive_text", "detector")
    as_detector = signed_with(
        review("kr-2", "rv-detector", "offensive_text", "ALLOW"), detector_key
    )
    send(kafka, topics, "review.decisions", as_detector, keyring)
    letter = refused(kafka, topics, "rv-detector")
    assert letter["error_class"] == "signature"
    assert "holds a key of role detector, which may not sign review.decisions" in letter["message"]
    assert_only_the_genuine_review_applied(kafka, topics, "kr-2", keyring)


def test_a_review_for_a_task_without_a_grant_or_lease_goes_to_the_dlq_and_changes_nothing(
    kafka: Kafka, start_job: Any, moderation_deployment: ModerationDeployment
) -> None:
    topics = moderation_deployment.topics
    job = start_job("moderation", *moderation_deployment.args)
    job.wait_running()
    # mallory holds a valid reviewer key but no grant of queue appeals; bob and carol do.
    grant(kafka, topics, "mallory", ["general"], TEST_KEYRING)
    grant(kafka, topics, "bob", ["appeals"], TEST_KEYRING)
    grant(kafka, topics, "carol", ["appeals"], TEST_KEYRING)
    blocked_by_evidence(kafka, topics, "kr-3", TEST_KEYRING)
    # The author appeals: the job issues task appeal-a-kr3 in queue appeals.
    appeal = {
        "event_id": "ap-kr3",
        "appeal_id": "a-kr3",
        "content_id": "kr-3",
        "content_version": 1,
        "decision_revision": 1,
        "user_id": "author-1",
        "ts": now_ms(),
    }
    send(kafka, topics, "moderation.appeals", appeal, TEST_KEYRING)
    kafka.wait_for(
        topics["review.tasks"],
        lambda values: any(t["task_id"] == "appeal-a-kr3" for t in values),
        timeout_s=90,
    )
    task = {"task_id": "appeal-a-kr3", "queue": "appeals", "content_id": "kr-3"}
    task["content_version"] = 1

    # mallory's lease and ALLOW, both signed with her own reviewer key, are refused.
    leased(kafka, topics, task, "mallory")
    ungranted = {**review("kr-3", "rv-mallory", "mallory", "ALLOW"), "task_id": "appeal-a-kr3"}
    send(kafka, topics, "review.decisions", ungranted, TEST_KEYRING)
    letter = refused(kafka, topics, "rv-mallory")
    assert letter["error_class"] == "signature", letter
    assert "holds no grant of the task's queue" in letter["message"]
    lease_letter = refused(kafka, topics, "lease-appeal-a-kr3-mallory", "review.leases")
    assert "holds no grant of queue 'appeals'" in lease_letter["message"], lease_letter
    # bob is granted appeals but never leased the task: refused as a conflict.
    unleased = {**review("kr-3", "rv-bob", "bob", "ALLOW"), "task_id": "appeal-a-kr3"}
    send(kafka, topics, "review.decisions", unleased, TEST_KEYRING)
    assert refused(kafka, topics, "rv-bob")["error_class"] == "conflict"
    # carol, granted and holding the lease, decides: the only review that applies.
    leased(kafka, topics, task, "carol")
    genuine = {**review("kr-3", "rv-carol", "carol", "ALLOW"), "task_id": "appeal-a-kr3"}
    send(kafka, topics, "review.decisions", genuine, TEST_KEYRING)
    wait_decision(kafka, topics, "kr-3", "appeal", "ALLOW")
    decisions = decisions_of(kafka, topics, "kr-3")
    assert [d["trigger"] for d in decisions if d["trigger"] in ("review", "appeal")] == ["appeal"]
    assert [d["outcome"] for d in decisions if d["trigger"] == "evidence"][-1:] == ["BLOCK"]
