"""Keys bound to roles and secure defaults on a live moderation job and the real broker
(issue 27, points 2 and 3): a review signed with a detector's key goes to the DLQ with class
`signature` and changes nothing, and a job started with the environment deploy/k8s gives it
refuses an unsigned review. In each, a genuine review sent afterwards on the same partition is
applied: once it is, the refused ones were processed, and the decisions show they changed
nothing."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from modstream import workload
from operators.signing import Keyring, sign
from tests.conftest import TEST_KEYRING, evidence, review_decision, upload
from tests.deploy.k8s_env import job_environment
from tests.integration.conftest import Kafka, ModerationDeployment

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


def now_ms() -> int:
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
    found = [
        d for d in kafka.values(topics["moderation.decisions"]) if d["content_id"] == content_id
    ]
    return sorted(found, key=lambda d: d["decision_revision"])


def wait_decision(
    kafka: Kafka, topics: dict[str, str], content_id: str, trigger: str, outcome: str
) -> None:
    kafka.wait_for(
        topics["moderation.decisions"],
        lambda values: any(
            d["content_id"] == content_id and d["trigger"] == trigger and d["outcome"] == outcome
            for d in values
        ),
        timeout_s=90,
    )


def refused(kafka: Kafka, topics: dict[str, str], event_id: str) -> dict[str, Any]:
    """The DLQ row of the review with `event_id`, once there."""

    def letters(values: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [
            v
            for v in values
            if v["source_topic"] == topics["review.decisions"] and f'"{event_id}"' in v["raw"]
        ]

    values = kafka.wait_for(topics["moderation.dlq"], lambda vs: bool(letters(vs)), timeout_s=90)
    [letter] = letters(values)
    return letter


def blocked_by_evidence(
    kafka: Kafka, topics: dict[str, str], content_id: str, keyring: Keyring
) -> None:
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
    blocked_by_evidence(kafka, topics, "kr-2", keyring)

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
