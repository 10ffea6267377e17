"""Second review on a live moderation job and the real broker (issue 29 item 2, the must-show):
with a policy that requires two reviewers for BLOCK (policy_rules/examples/
global-second-review.yaml), one reviewer's BLOCK does not enforce (no hide action), the first
reviewer cannot be the second (DLQ `conflict`), a second reviewer's BLOCK enforces, and two
reviewers who disagree open an escalation task that changes nothing.

Why the real stack: the rule lives in the job's keyed state across inputs read from three
topics (review.leases, review.decisions, policy) under grants from a broadcast topic, with
signed records, and "does not enforce" is a statement about what the job commits to
moderation.actions; the pure rules are tests/operators/test_second_review.py. One job serves
both versions, so the test costs one job start."""

from __future__ import annotations

from typing import Any

import pytest

from modstream.core.config import PROJECT_ROOT
from modstream.review.queue import LEASE_MS, lease_record
from modstream.testing.live import grant, now_ms, refused, send, wait_decision
from modstream.testing.records import TEST_KEYRING, evidence, review_decision, upload
from modstream.testing.stack import Kafka, ModerationDeployment

pytestmark = pytest.mark.integration

POLICY = PROJECT_ROOT / "policy_rules" / "examples" / "global-second-review.yaml"


def allowed(kafka: Kafka, topics: dict[str, str], content_id: str) -> None:
    """A comment decided ALLOW on its evidence (the first action: public)."""
    at = now_ms()
    send(kafka, topics, "content.versions", upload(content_id, at=at), TEST_KEYRING)
    quiet = evidence(content_id, at=at, scores={"offensive": 0.01})
    send(kafka, topics, "detector.results", quiet, TEST_KEYRING)
    wait_decision(kafka, topics, content_id, "evidence", "ALLOW")


def reviewed(
    kafka: Kafka, topics: dict[str, str], task: dict[str, Any], reviewer: str, outcome: str
) -> str:
    """`reviewer` leases `task` and decides it; the review's event id."""
    at = now_ms()
    lease = lease_record(task, reviewer, at - 1_000, LEASE_MS)
    send(kafka, topics, "review.leases", lease, TEST_KEYRING)
    event_id = f"rv-{task['task_id']}-{reviewer}"
    record = review_decision(
        event_id=event_id,
        task_id=task["task_id"],
        content_id=task["content_id"],
        reviewer_id=reviewer,
        outcome=outcome,
        ts=at,
    )
    send(kafka, topics, "review.decisions", record, TEST_KEYRING)
    return event_id


def first_block(kafka: Kafka, topics: dict[str, str], content_id: str) -> dict[str, Any]:
    """alice's proactive BLOCK; the second-review task it opens."""
    record = review_decision(
        event_id=f"rv-{content_id}-alice",
        task_id=f"t-{content_id}",
        content_id=content_id,
        reviewer_id="alice",
        outcome="BLOCK",
        ts=now_ms(),
    )
    send(kafka, topics, "review.decisions", record, TEST_KEYRING)
    values = kafka.wait_for(
        topics["review.tasks"],
        lambda vs: any(t["content_id"] == content_id and t.get("second_review") for t in vs),
        timeout_s=90,
    )
    [task] = [t for t in values if t["content_id"] == content_id and t.get("second_review")]
    return dict(task)


def of(kafka: Kafka, topic: str, content_id: str) -> list[dict[str, Any]]:
    return [value for value in kafka.values(topic) if value["content_id"] == content_id]


def test_one_block_waits_the_second_enforces_and_a_disagreement_escalates(
    kafka: Kafka, start_job: Any, moderation_deployment: ModerationDeployment
) -> None:
    topics = moderation_deployment.topics
    job = start_job("moderation", *moderation_deployment.args, "--policy", str(POLICY))
    job.wait_running()
    for reviewer in ("bob", "carol"):
        grant(kafka, topics, reviewer, ["second_review"], TEST_KEYRING)

    allowed(kafka, topics, "sr-1")
    task = first_block(kafka, topics, "sr-1")
    assert (task["queue"], task["second_review"]["round"]) == ("second_review", "second")
    assert "BLOCK" not in str(task) and "alice" not in str(task)  # blind
    # The task and any revision of alice's review are committed together: none was made.
    decisions = of(kafka, topics["moderation.decisions"], "sr-1")
    assert [d for d in decisions if d["trigger"] == "review"] == []
    assert {a["visibility"] for a in of(kafka, topics["moderation.actions"], "sr-1")} == {"public"}
    # alice cannot be her own second reviewer: neither her lease nor her review applies.
    letter = refused(kafka, topics, reviewed(kafka, topics, task, "alice", "BLOCK"))
    assert letter["error_class"] == "conflict", letter
    lease_letter = refused(kafka, topics, f"lease-{task['task_id']}-alice", "review.leases")
    assert "two distinct reviewers" in lease_letter["message"], lease_letter
    # bob's BLOCK agrees: the decision and its hide action.
    reviewed(kafka, topics, task, "bob", "BLOCK")
    wait_decision(kafka, topics, "sr-1", "review", "BLOCK")
    actions = of(kafka, topics["moderation.actions"], "sr-1")
    assert actions[-1]["visibility"] == "hidden"
    assert [a["visibility"] for a in actions].count("hidden") == 1

    allowed(kafka, topics, "sr-2")
    task = first_block(kafka, topics, "sr-2")
    reviewed(kafka, topics, task, "carol", "ALLOW")
    values = kafka.wait_for(
        topics["review.tasks"],
        lambda vs: any(t["content_id"] == "sr-2" and t["queue"] == "escalation" for t in vs),
        timeout_s=90,
    )
    [escalation] = [t for t in values if t["content_id"] == "sr-2" and t["queue"] == "escalation"]
    assert escalation["second_review"]["outcomes"] == ["BLOCK", "ALLOW"]
    # Committed with the escalation task: no revision and no hide for either review.
    decisions = of(kafka, topics["moderation.decisions"], "sr-2")
    assert [d for d in decisions if d["trigger"] == "review"] == []
    assert {a["visibility"] for a in of(kafka, topics["moderation.actions"], "sr-2")} == {"public"}
