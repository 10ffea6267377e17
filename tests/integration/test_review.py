"""The review queue on real Redis Streams: grants, priority, leases, decisions, backlog."""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest
import redis

from modstream.config import Settings
from modstream.review import ACCESS_LOG, ReviewError, ReviewQueue, Roles
from tests.conftest import T0

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


def test_claims_follow_grants_priority_and_leases(stack: Settings) -> None:
    client = redis.Redis.from_url(stack.redis_url)
    queue = f"child_safety_{uuid.uuid4().hex[:6]}"
    roles = Roles({"alice": [queue], "bob": [queue], "mallory": ["general"]})
    review = ReviewQueue(client, roles, lease_ms=300)
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
        review.decide(urgent, "alice", "BLOCK", "late", T0)  # no longer hers
    decision = review.decide(urgent, "bob", "BLOCK", "csam policy 4.2", T0 + 5)
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
