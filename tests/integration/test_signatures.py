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

from modstream.cli import main
from modstream.config import Settings
from operators.signing import Keyring, check, derive_key, signed
from schemas import dead_letter
from tests.conftest import T0, TEST_KEYRING, evidence
from tests.integration.conftest import Kafka

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
    kafka.create_topics([tasks, decisions], partitions=1)  # the feed keeps the tasks' order
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
