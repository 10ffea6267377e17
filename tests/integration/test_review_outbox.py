"""`modstream review decide` with the broker stopped between claim and decide (issue 27, point
6): the decision is not lost, the task stays claimed and decidable, and once the broker is back
the decision reaches review.decisions exactly once. The broker is a real one of this test's own
(free ports, its own run directory), so stopping it touches no other test."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from modstream.cli.main import main
from modstream.core.config import Settings
from modstream.review.queue import GROUP, OUTBOX, ReviewQueue, Roles
from modstream.stack import local as local_stack
from modstream.testing.records import T0
from modstream.testing.stack import Kafka, free_ports
from modstream.trust.signing import Keyring, derive_key

pytestmark = pytest.mark.integration


@pytest.fixture
def own_broker(tmp_path: Path) -> Iterator[local_stack.Kafka]:
    """A Kafka broker of this test only, stopped at the end whatever happened."""
    kafka_port, controller_port, redis_port = free_ports(3)
    settings = Settings.from_env(
        {
            "MODSTREAM_CONFIG": "none",
            "MODSTREAM_RUN_DIR": str(tmp_path / "run"),
            "MODSTREAM_KAFKA_PORT": str(kafka_port),
            "MODSTREAM_KAFKA_CONTROLLER_PORT": str(controller_port),
            "MODSTREAM_REDIS_PORT": str(redis_port),
        }
    )
    broker = local_stack.Kafka(settings)
    broker.start(say=lambda _: None)
    try:
        yield broker
    finally:
        broker.stop(say=lambda _: None)


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


def _decide(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    code = main(["review", "decide", *args])
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def test_a_decision_refused_by_a_stopped_broker_is_sent_once_when_it_is_back(
    own_broker: local_stack.Kafka,
    stack: Settings,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    kafka = Kafka(own_broker.settings.bootstrap_servers)
    prefix = f"it-{uuid.uuid4().hex[:10]}"
    decisions = f"{prefix}.review.decisions"
    kafka.create_topics([decisions], partitions=1)
    queue_name, task_id = f"q_{uuid.uuid4().hex[:8]}", f"t-{uuid.uuid4().hex[:8]}"
    roles = tmp_path / "roles.yaml"
    roles.write_text(json.dumps({"reviewers": {"alice": {"queues": [queue_name]}}}))
    monkeypatch.setenv("MODSTREAM_REVIEW_ROLES", str(roles))
    secret = Keyring.from_env().dev_secret
    assert secret is not None, "the test stack derives keys from MODSTREAM_SIGNING_DEV_SECRET"
    keys = tmp_path / "alice.json"
    keys.write_text(json.dumps({"alice": derive_key(secret, "alice", "reviewer").decode()}))
    monkeypatch.setenv("MODSTREAM_KEYS_FILE", str(keys))
    client = redis.Redis.from_url(stack.redis_url)
    queue = ReviewQueue(client, Roles.load(roles))
    assert queue.feed(_task(task_id, queue_name))
    claimed = queue.claim(queue_name, "alice")
    assert claimed is not None and claimed["task_id"] == task_id
    args = [task_id, "--outcome", "BLOCK", "--reason", "spam 2.1", "--prefix", prefix]
    args += ["--bootstrap-servers", own_broker.settings.bootstrap_servers]

    own_broker.stop(say=lambda _: None)  # between claim and decide
    code, out = _decide(capsys, *args)
    assert code == 1 and "not sent to review.decisions" in out, out
    assert "stays claimed by 'alice'" in out
    lease = client.hgetall(f"review:lease:{task_id}")
    assert lease[b"reviewer"] == b"alice"  # still hers, and claimable again after the lease
    assert client.xpending(lease[b"stream"].decode(), GROUP)["pending"] == 1
    assert not client.exists(f"review:decided:{task_id}")
    kept = json.loads(client.get(f"{OUTBOX}{task_id}"))
    code, out = _decide(capsys, task_id, "--outcome", "ALLOW", *args[3:])
    assert code == 1 and "same outcome and reason" in out, out  # the kept one may be out there

    own_broker.start(say=lambda _: None)
    code, out = _decide(capsys, *args)
    assert code == 0, out
    [record] = kafka.values(decisions)  # exactly once
    assert record == kept and record["outcome"] == "BLOCK" and record["reviewer_id"] == "alice"
    assert client.hget(f"review:decided:{task_id}", "outcome") == b"BLOCK"
    assert not client.exists(f"review:lease:{task_id}", f"{OUTBOX}{task_id}")
    assert client.xpending(lease[b"stream"].decode(), GROUP)["pending"] == 0
    code, out = _decide(capsys, *args)  # decided: nothing more is sent
    assert code == 1 and "not claimed" in out
    assert len(kafka.values(decisions)) == 1
