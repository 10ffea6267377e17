"""Signed authority inputs on the real broker and Redis: `modstream review decide` signs as the
reviewer its key says, and `modstream dlq replay` writes only to the contract's input topics.
(The moderation job's refusal of forged records is tested with the job in the lead's tests.)"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest
import redis

from modstream.cli.main import main
from modstream.contract import dead_letter
from modstream.core.config import Settings
from modstream.review.queue import LEASE_MS
from modstream.testing.records import T0, TEST_KEYRING, evidence
from modstream.testing.stack import Kafka
from modstream.trust.signing import Keyring, check, derive_key, signed

pytestmark = pytest.mark.integration


def _deployment_secret() -> bytes:
    secret = Keyring.from_env().dev_secret
    assert secret is not None, "the test stack derives keys from MODSTREAM_SIGNING_DEV_SECRET"
    return secret


def _task(task_id: str, queue: str) -> dict[str, Any]:
    return {
        "task_id": task_id,
        "kind": "review",
        "content_id": f"c-{task_id}",
        "content_version": 1,
        "decision_revision": 1,
        "policy_version": 1,
        "queue": queue,
        "priority": 0,
        "reasons": ["spam"],
        "evidence": [],
        "ts": T0,
    }


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    code = main(list(args))
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def test_review_decide_signs_as_the_reviewer_its_key_names(
    kafka: Kafka,
    stack: Settings,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    prefix = f"it-{uuid.uuid4().hex[:10]}"
    tasks, decisions = f"{prefix}.review.tasks", f"{prefix}.review.decisions"
    leases = f"{prefix}.review.leases"
    kafka.create_topics([tasks, decisions, leases], partitions=1)  # the feed keeps the order
    queue = f"q_{uuid.uuid4().hex[:8]}"
    roles = tmp_path / "roles.yaml"
    grants = {name: {"queues": [queue]} for name in ("alice", "bob")}
    roles.write_text(json.dumps({"reviewers": grants}))
    monkeypatch.setenv("MODSTREAM_REVIEW_ROLES", str(roles))
    mine, theirs = f"t-{uuid.uuid4().hex[:8]}", f"t-{uuid.uuid4().hex[:8]}"
    kafka.produce(tasks, [(None, json.dumps(_task(t, queue)).encode()) for t in (mine, theirs)])
    secret = _deployment_secret()
    alice_key = derive_key(secret, "alice", "reviewer").decode()
    keys = tmp_path / "alice.json"
    keys.write_text(json.dumps({"alice": alice_key}))
    monkeypatch.setenv("MODSTREAM_KEYS_FILE", str(keys))
    broker = ["--prefix", prefix, "--bootstrap-servers", stack.bootstrap_servers]

    assert _run(capsys, "review", "feed", *broker)[0] == 0
    code, out = _run(capsys, "review", "claim", "--queue", queue, *broker)
    assert code == 0 and json.loads(out)["task_id"] == mine
    # The claim's lease, signed by alice, for the job to check her decision against.
    [lease] = kafka.values(leases)
    assert (lease["task_id"], lease["queue"], lease["reviewer_id"]) == (mine, queue, "alice")
    assert lease["expires_ts"] - lease["ts"] == LEASE_MS
    assert check("review.leases", lease, Keyring.from_env()) is None
    code, out = _run(capsys, "review", "decide", mine, "--outcome", "BLOCK", *broker)
    assert code == 0, out
    [record] = kafka.values(decisions)
    assert record["reviewer_id"] == "alice" and record["task_id"] == mine
    deployment = Keyring.from_env()
    assert deployment.requires("review.decisions")
    assert check("review.decisions", record, deployment) is None
    assert redis.Redis.from_url(stack.redis_url).hget(f"review:decided:{mine}", "reviewer") == (
        b"alice"
    )

    # Holding alice's key but calling oneself bob: the queue lets "bob" claim and decide, and
    # the decision names bob, but it is signed with alice's key, so the job refuses it.
    keys.write_text(json.dumps({"bob": alice_key}))
    assert _run(capsys, "review", "claim", "--queue", queue, *broker)[0] == 0
    code, out = _run(capsys, "review", "decide", theirs, "--outcome", "ALLOW", *broker)
    assert code == 0, out
    forged = [r for r in kafka.values(decisions) if r["task_id"] == theirs]
    assert [r["reviewer_id"] for r in forged] == ["bob"]
    message = check("review.decisions", forged[0], deployment)
    assert message is not None and "does not verify" in message

    # A keys file with more than one person says nothing about who decides: refused.
    keys.write_text(json.dumps({"alice": alice_key, "bob": "b"}))
    code, out = _run(capsys, "review", "decide", mine, "--outcome", "ALLOW", *broker)
    assert code == 1 and "holds exactly one" in out


def test_review_grant_sends_grants_signed_by_the_lead_its_key_names(
    kafka: Kafka,
    stack: Settings,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    prefix = f"it-{uuid.uuid4().hex[:10]}"
    grants = f"{prefix}.review.grants"
    kafka.create_topics([grants], partitions=1)
    roles = tmp_path / "roles.yaml"
    roles.write_text(json.dumps({"reviewers": {"alice": {"queues": ["appeals", "general"]}}}))
    monkeypatch.setenv("MODSTREAM_REVIEW_ROLES", str(roles))
    lead_key = derive_key(_deployment_secret(), "lead-1", "lead").decode()
    keys = tmp_path / "lead.json"
    keys.write_text(json.dumps({"lead-1": lead_key}))
    monkeypatch.setenv("MODSTREAM_KEYS_FILE", str(keys))
    broker = ["--prefix", prefix, "--bootstrap-servers", stack.bootstrap_servers]

    assert _run(capsys, "review", "grant", "--from-roles", *broker)[0] == 0
    code, out = _run(capsys, "review", "grant", "bob", "--queues", "", *broker)  # revoked
    assert code == 0, out
    code, out = _run(capsys, "review", "grant", "carol", *broker)
    assert code == 1 and "--queues" in out
    sent = kafka.values(grants)
    assert [(g["reviewer_id"], g["queues"], g["granted_by"]) for g in sent] == [
        ("alice", ["appeals", "general"], "lead-1"),
        ("bob", [], "lead-1"),
    ]
    deployment = Keyring.from_env()
    assert all(check("review.grants", grant, deployment) is None for grant in sent)
    # A reviewer's key (another role) signing a grant is refused by the job's check.
    keys.write_text(
        json.dumps({"lead-1": derive_key(_deployment_secret(), "lead-1", "reviewer").decode()})
    )
    assert _run(capsys, "review", "grant", "mallory", "--queues", "*", *broker)[0] == 0
    [forged] = [g for g in kafka.values(grants) if g["reviewer_id"] == "mallory"]
    message = check("review.grants", forged, deployment)
    assert message is not None and "does not verify" in message


def test_dlq_replay_writes_only_to_input_topics(
    kafka: Kafka,
    stack: Settings,
    capsys: pytest.CaptureFixture[str],
) -> None:
    prefix = f"it-{uuid.uuid4().hex[:10]}"
    names = ("moderation.dlq", "moderation.actions", "detector.results")
    topics = {name: f"{prefix}.{name}" for name in names}
    kafka.create_topics(list(topics.values()))
    action = {
        "action_id": "a-1",
        "content_id": "c-1",
        "content_version": 1,
        "decision_revision": 1,
        "visibility": "public",
        "ts": T0,
    }
    content_id = f"c-{uuid.uuid4().hex[:8]}"
    result = signed("detector.results", evidence(content_id), TEST_KEYRING)
    unsigned = evidence(content_id, event_id="unsigned")
    letters = [
        dead_letter(topics["moderation.actions"], "c-1", json.dumps(action), "x", ts=T0),
        dead_letter(topics["detector.results"], content_id, json.dumps(result), "x", ts=T0),
        dead_letter(topics["detector.results"], content_id, json.dumps(unsigned), "x", ts=T0),
    ]
    kafka.produce(
        topics["moderation.dlq"],
        [(letter.key, letter.model_dump_json().encode()) for letter in letters],
    )
    code, out = _run(
        capsys,
        "dlq",
        "replay",
        "--prefix",
        prefix,
        "--bootstrap-servers",
        stack.bootstrap_servers,
    )
    assert code == 0, out
    assert f"refused a record from '{topics['moderation.actions']}'" in out
    assert "replay writes only to the contract's input topics" in out
    assert "bad_signature 1" in out and "not_an_input_topic 1" in out
    assert kafka.read(topics["moderation.actions"]) == []  # nothing written to an output
    replayed = kafka.values(topics["detector.results"])
    assert [r["event_id"] for r in replayed] == [result["event_id"]]
    assert check("detector.results", replayed[0], TEST_KEYRING) is None
