"""The review queue on real Redis Streams: grants, priority, leases, decisions, backlog."""

from __future__ import annotations

import contextlib
import time
import uuid
from typing import Any

import pytest
import redis

from modstream.core.config import Settings
from modstream.review.queue import ACCESS_LOG, ReviewError, ReviewQueue, Roles
from modstream.testing.records import T0

pytestmark = pytest.mark.integration


def task(task_id: str, queue: str, priority: int) -> dict[str, Any]:
    return {
        "task_id": task_id,
        "kind": "review",
        "content_id": f"c-{task_id}",
        "content_version": 1,
        "decision_revision": 2,
        "policy_version": 1,
        "queue": queue,
        "priority": priority,
        "reasons": ["sexual_content"],
        "evidence": ["s3://evidence/1"],
        "ts": T0,
    }


class DiesAt:
    """A Redis client whose process dies at its n-th command (the command is never sent): a
    review feeder killed half-way through feeding a task."""

    def __init__(self, client: redis.Redis, n: int) -> None:
        self.client, self.n, self.calls = client, n, 0

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self.client, name)
        if not callable(attribute):
            return attribute

        def call(*args: Any, **kwargs: Any) -> Any:
            self.calls += 1
            if self.calls == self.n:
                raise redis.ConnectionError("the feeder died here")
            return attribute(*args, **kwargs)

        return call


def test_a_feeder_killed_at_any_point_loses_no_task(stack: Settings) -> None:
    """Issue 13: the feed recorded a task as fed before putting it on its stream, so a feeder
    that died in between lost it (its retry saw it as fed). Whatever command it dies at, the
    task is fed by the retry and claimed once."""
    client = redis.Redis.from_url(stack.redis_url)
    queue = f"feedcrash_{uuid.uuid4().hex[:6]}"
    healthy = ReviewQueue(client, Roles({"alice": [queue]}))
    for n in range(1, 6):
        task_id = f"t-{uuid.uuid4().hex[:8]}"
        dying = ReviewQueue(DiesAt(client, n), Roles({}))
        with contextlib.suppress(redis.ConnectionError):
            dying.feed(task(task_id, queue, 2))
        healthy.feed(task(task_id, queue, 2))  # the feeder's retry after its restart
        claimed = healthy.claim(queue, "alice")
        assert claimed is not None and claimed["task_id"] == task_id, n
        assert healthy.claim(queue, "alice") is None, n  # and only once


def test_claims_follow_grants_priority_and_leases(stack: Settings) -> None:
    client = redis.Redis.from_url(stack.redis_url)
    queue = f"child_safety_{uuid.uuid4().hex[:6]}"
    roles = Roles({"alice": [queue], "bob": [queue], "mallory": ["general"]})
    review = ReviewQueue(client, roles, lease_ms=300)
    sent: list[dict[str, Any]] = []
    low, urgent = f"t-{uuid.uuid4().hex[:6]}", f"t-{uuid.uuid4().hex[:6]}"
    assert review.feed(task(low, queue, 3)) and review.feed(task(urgent, queue, 0))
    assert not review.feed(task(low, queue, 3))  # the same task id is queued once
    with pytest.raises(ReviewError):
        review.claim(queue, "mallory")  # not granted this queue
    claimed = review.claim(queue, "alice")
    assert claimed is not None and claimed["task_id"] == urgent  # most urgent first
    shown = review.show(urgent, "alice")
    assert set(shown) >= {"evidence", "reasons", "policy_version"} and "author_id" not in shown
    time.sleep(0.5)  # alice's lease expires
    assert review.claim(queue, "bob")["task_id"] == urgent  # type: ignore[index]
    with pytest.raises(ReviewError):
        review.decide(urgent, "alice", "BLOCK", "late", T0, sent.append)  # no longer hers
    decision = review.decide(urgent, "bob", "BLOCK", "csam policy 4.2", T0 + 5, sent.append)
    assert sent == [decision]
    assert (decision["reviewer_id"], decision["outcome"], decision["task_id"]) == (
        "bob",
        "BLOCK",
        urgent,
    )
    assert client.hget(f"review:decided:{urgent}", "reason") == b"csam policy 4.2"
    backlog = review.backlog(int(time.time() * 1000))[queue]
    assert backlog["depth"] == 1 and backlog["oldest_age_ms"] >= 0
    log = [
        {k.decode(): v.decode() for k, v in fields.items()}
        for _, fields in client.xrange(ACCESS_LOG)
    ]
    ours = [(e["reviewer"], e["action"]) for e in log if e["task_id"] in (urgent, "")]
    assert ("mallory", f"denied:{queue}") in ours and ("bob", "decide") in ours
