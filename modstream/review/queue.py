"""The human review queue on Redis Streams.

`review.tasks` records feed one stream per queue and priority (`review:q:<queue>:<priority>`,
consumer group `reviewers`); `claim` takes the most urgent task of a queue under a lease (an
entry pending longer than the lease is reclaimed with XAUTOCLAIM by the next claimant);
`show` gives what a reviewer needs (evidence references, policy version, reasons; nothing else
about users); `decide` produces a `review.decisions` record signed with the reviewer's own key
and, only once the broker acknowledged it, acknowledges the entry and records who decided and
why (an outbox order: a refused produce leaves the task claimed and loses nothing). Reviewers
claim only queues the roles file grants them, and every access is appended to the
`review:access` stream with who, what and when.

Who the reviewer is comes from their key, never from a flag or $USER: `Reviewer.from_env` reads
the person's keys file (MODSTREAM_KEYS_FILE, default ~/.config/modstream/keys.json), which must
hold exactly one entry, `{"<reviewer id>": "<key>"}`. The moderation job verifies a decision's
signature with the key of its `reviewer_id`, so nobody decides as a reviewer whose key they do
not hold (modstream/trust/signing.py).
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from kafka.errors import KafkaError

from modstream.contract.common import MAX_ID_CHARS
from modstream.trust.signing import PERSON_KEYS_VARIABLE, person_keys_path, read_person_keys, sign

GROUP = "reviewers"
ACCESS_LOG = "review:access"
# review:outbox:<task id>: a decision kept until the broker acknowledged it.
OUTBOX = "review:outbox:"
LEASE_MS = 15 * 60_000
PRIORITIES = range(0, 10)


class ReviewError(Exception):
    """A refused review command (no grant, unknown task); the message says why."""


@dataclass(frozen=True)
class Roles:
    """reviewer -> the queues they may claim (`*` for all); from a YAML file."""

    grants: dict[str, list[str]]

    @classmethod
    def load(cls, path: Path) -> Roles:
        raw = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        reviewers = raw.get("reviewers", {})
        return cls({name: list(entry.get("queues", [])) for name, entry in reviewers.items()})

    def may(self, reviewer: str, queue: str) -> bool:
        queues = self.grants.get(reviewer, [])
        return queue in queues or "*" in queues


@dataclass(frozen=True)
class Reviewer:
    """A reviewer as their key says: the id their decisions carry and the key that signs them."""

    reviewer_id: str
    key: bytes

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Reviewer:
        env = os.environ if env is None else env
        path = person_keys_path(env)
        if not path.exists():
            raise ReviewError(
                f"no reviewer key: {path} does not exist ({PERSON_KEYS_VARIABLE} names your "
                f'keys file, {{"<your reviewer id>": "<your key>"}})'
            )
        try:
            keys = read_person_keys(path)
        except ValueError as error:
            raise ReviewError(str(error)) from None
        if len(keys) != 1:
            raise ReviewError(
                f"{path} holds {len(keys)} keys; a reviewer's keys file holds exactly one, "
                f"their own (it says who decides)"
            )
        ((reviewer_id, key),) = keys.items()
        return cls(reviewer_id, key)

    def sign(self, record: Mapping[str, Any]) -> dict[str, Any]:
        """`record` signed with this reviewer's key. The job verifies a decision with the key
        of its `reviewer_id`, so only one naming this reviewer passes."""
        body = {key: value for key, value in record.items() if key != "signature"}
        return {**body, "signature": sign(body, self.key)}


def event_id(kind: str, *parts: object) -> str:
    """`kind-part-...`, the event id of a record a person makes here; past the longest id a
    record may carry (modstream/contract/common.py `MAX_ID_CHARS`), `kind-` and the sha256 of that:
    a reviewer or task id of any allowed length still makes a valid record (the fuzz suite's
    256-character reviewer id made a grant the job refused as `schema`)."""
    joined = "-".join([kind, *(str(part) for part in parts)])
    if len(joined) <= MAX_ID_CHARS:
        return joined
    return f"{kind}-{hashlib.sha256(joined.encode('utf-8')).hexdigest()}"


def grant_record(reviewer_id: str, queues: list[str], granted_by: str, ts: int) -> dict[str, Any]:
    """A review.grants record (unsigned: the lead `granted_by` signs it): `reviewer_id` may
    claim and decide `queues` from `ts` on (`*`: every queue; none: revoked). The moderation
    job applies a review only under such a grant (modstream/review/access.py)."""
    return {
        "event_id": event_id("grant", reviewer_id, ts),
        "reviewer_id": reviewer_id,
        "queues": sorted(queues),
        "granted_by": granted_by,
        "ts": ts,
    }


def lease_record(
    task: Mapping[str, Any], reviewer_id: str, ts: int, lease_ms: int
) -> dict[str, Any]:
    """A review.leases record (unsigned: the reviewer signs it): `reviewer_id` holds the task
    from `ts` for `lease_ms`; the job applies only the lease holder's decision."""
    return {
        "event_id": event_id("lease", task["task_id"], reviewer_id, ts),
        "task_id": task["task_id"],
        "queue": task["queue"],
        "content_id": task["content_id"],
        "content_version": task["content_version"],
        "reviewer_id": reviewer_id,
        "ts": ts,
        "expires_ts": ts + lease_ms,
    }


def decision_record(
    task: Mapping[str, Any], reviewer_id: str, outcome: str, reason: str, ts: int
) -> dict[str, Any]:
    """The review.decisions record of `reviewer_id`'s decision on `task` (unsigned)."""
    return {
        "event_id": event_id("review", task["task_id"], reviewer_id, ts),
        "task_id": task["task_id"],
        "content_id": task["content_id"],
        "content_version": task["content_version"],
        "reviewer_id": reviewer_id,
        "outcome": outcome,
        "reason": reason,
        "ts": ts,
    }


# KEYS: the task's record, its stream; ARGV: the task JSON, its queue, the consumer group, its id.
FEED_SCRIPT = """
if not redis.call('SET', KEYS[1], ARGV[1], 'NX') then
  return 0
end
pcall(redis.call, 'XGROUP', 'CREATE', KEYS[2], ARGV[3], '0', 'MKSTREAM')  -- BUSYGROUP: made
redis.call('SADD', 'review:queues', ARGV[2])
redis.call('XADD', KEYS[2], '*', 'task_id', ARGV[4])
return 1
"""


def _stream(queue: str, priority: int) -> str:
    return f"review:q:{queue}:{priority}"


def _text(value: Any) -> str:
    return value.decode("utf-8") if isinstance(value, bytes) else str(value)


class ReviewQueue:
    def __init__(self, client: Any, roles: Roles, *, lease_ms: int = LEASE_MS) -> None:
        self.redis = client
        self.roles = roles
        self.lease_ms = lease_ms

    def _log(
        self, reviewer: str, action: str, task_id: str = "", now_ms: int | None = None
    ) -> None:
        when = now_ms if now_ms is not None else int(time.time() * 1000)
        self.redis.xadd(
            ACCESS_LOG, {"reviewer": reviewer, "action": action, "task_id": task_id, "ts": when}
        )

    def feed(self, task: dict[str, Any]) -> bool:
        """Queue one review.tasks record; a task id seen before is not queued again. One Lua
        script (atomic in Redis): the task is recorded and put on its stream together, so a
        feeder that dies half-way leaves nothing behind and the task is fed again on retry
        (recording it first, as before, lost it: the retry saw it as already fed)."""
        priority = min(max(int(task["priority"]), PRIORITIES.start), PRIORITIES.stop - 1)
        stream = _stream(task["queue"], priority)
        fed = self.redis.eval(
            FEED_SCRIPT,
            2,
            f"review:task:{task['task_id']}",
            stream,
            json.dumps(task),
            task["queue"],
            GROUP,
            task["task_id"],
        )
        return bool(fed)

    def claim(
        self,
        queue: str,
        reviewer: str | Reviewer,
        now_ms: int | None = None,
        send_lease: Callable[[dict[str, Any]], None] | None = None,
    ) -> dict[str, Any] | None:
        """The most urgent task of `queue` for `reviewer`: an expired lease first, else new.
        With `send_lease` (what the command passes) the lease also goes to `review.leases`,
        signed with the reviewer's key, before the task is shown: the moderation job applies
        only the lease holder's decision (modstream/review/access.py). A refused send leaves
        the task claimed here; it is offered again once the lease ran out."""
        signer = reviewer if isinstance(reviewer, Reviewer) else None
        reviewer = reviewer.reviewer_id if isinstance(reviewer, Reviewer) else reviewer
        now_ms = int(time.time() * 1000) if now_ms is None else now_ms
        if not self.roles.may(reviewer, queue):
            self._log(reviewer, f"denied:{queue}")
            raise ReviewError(f"reviewer {reviewer!r} is not granted queue {queue!r}")
        for priority in PRIORITIES:
            stream = _stream(queue, priority)
            if not self.redis.exists(stream):
                continue
            reclaimed = self.redis.xautoclaim(
                stream, GROUP, reviewer, min_idle_time=self.lease_ms, start_id="0-0", count=1
            )
            entries = reclaimed[1] if reclaimed else []
            if not entries:
                fresh = self.redis.xreadgroup(GROUP, reviewer, {stream: ">"}, count=1)
                entries = fresh[0][1] if fresh else []
            if entries:
                entry_id, fields = entries[0]
                task_id = _text(fields[b"task_id"] if b"task_id" in fields else fields["task_id"])
                self.redis.hset(
                    f"review:lease:{task_id}",
                    mapping={
                        "reviewer": reviewer,
                        "stream": stream,
                        "entry": _text(entry_id),
                        "expires": now_ms + self.lease_ms,
                    },
                )
                self._log(reviewer, "claim", task_id, now_ms)
                task = self.task(task_id)
                if send_lease is not None:
                    self._send_lease(task, reviewer, signer, now_ms, send_lease)
                return task
        return None

    def _send_lease(
        self,
        task: Mapping[str, Any],
        reviewer: str,
        signer: Reviewer | None,
        now_ms: int,
        send: Callable[[dict[str, Any]], None],
    ) -> None:
        """The lease as a review.leases record, signed by the reviewer where a key is given."""
        record = lease_record(task, reviewer, now_ms, self.lease_ms)
        if signer is not None:
            record = signer.sign(record)
        try:
            send(record)
        except (KafkaError, OSError) as error:
            self._log(reviewer, "unsent:lease", str(task["task_id"]), now_ms)
            raise ReviewError(
                f"lease of task {task['task_id']!r} not sent to review.leases "
                f"({type(error).__name__}): the moderation job would refuse your decision; "
                "the task stays claimed by you here until the lease runs out"
            ) from None
        self.redis.hset(f"review:lease:{task['task_id']}", "expires", now_ms + self.lease_ms)

    def task(self, task_id: str) -> dict[str, Any]:
        raw = self.redis.get(f"review:task:{task_id}")
        if raw is None:
            raise ReviewError(f"unknown task {task_id!r}")
        return dict(json.loads(raw))

    def show(self, task_id: str, reviewer: str) -> dict[str, Any]:
        """What the reviewer needs to decide, and nothing unrelated about users."""
        task = self.task(task_id)
        if not self.roles.may(reviewer, task["queue"]):
            self._log(reviewer, "denied:show", task_id)
            raise ReviewError(f"reviewer {reviewer!r} is not granted queue {task['queue']!r}")
        self._log(reviewer, "show", task_id)
        keep = (
            "task_id",
            "kind",
            "content_id",
            "content_version",
            "decision_revision",
            "policy_version",
            "queue",
            "priority",
            "reasons",
            "evidence",
            "ts",
        )
        return {key: task[key] for key in keep if key in task}

    def decide(
        self,
        task_id: str,
        reviewer: str | Reviewer,
        outcome: str,
        reason: str,
        now_ms: int,
        send: Callable[[dict[str, Any]], None],
        send_lease: Callable[[dict[str, Any]], None] | None = None,
    ) -> dict[str, Any]:
        """Send the task's review.decisions record with `send` (it returns once the broker
        acknowledged it, and raises otherwise), then acknowledge the task: an outbox order.
        Lease holder only; given a `Reviewer` (what the command passes) the record is signed
        with the reviewer's key. A refused send changes nothing but the pending record, which
        the reviewer's retry sends again byte for byte (issue 27, point 6)."""
        signer = reviewer if isinstance(reviewer, Reviewer) else None
        reviewer = reviewer.reviewer_id if isinstance(reviewer, Reviewer) else reviewer
        task = self.task(task_id)
        lease = {
            _text(k): _text(v) for k, v in self.redis.hgetall(f"review:lease:{task_id}").items()
        }
        if lease.get("reviewer") != reviewer:
            self._log(reviewer, "denied:decide", task_id, now_ms)
            raise ReviewError(f"task {task_id!r} is not claimed by {reviewer!r}")
        expires = int(lease.get("expires") or 0)
        if send_lease is not None and expires and now_ms >= expires:
            # The lease ran out and nobody took the task since: renewed before the decision.
            self._send_lease(task, reviewer, signer, now_ms, send_lease)
        record = self._pending(task_id, reviewer, outcome, reason)
        if record is None:
            record = decision_record(task, reviewer, outcome, reason, now_ms)
            if signer is not None:
                record = signer.sign(record)
            # Kept before the send: whatever happens next, a retry sends these same bytes.
            self.redis.set(f"{OUTBOX}{task_id}", json.dumps(record))
        try:
            send(record)
        except (KafkaError, OSError) as error:
            self._log(reviewer, "unsent:decide", task_id, now_ms)
            raise ReviewError(
                f"decision for task {task_id!r} not sent to review.decisions "
                f"({type(error).__name__}); nothing changed: the task stays claimed by "
                f"{reviewer!r}; run the same `review decide` again once Kafka is reachable"
            ) from None
        transaction = self.redis.pipeline(transaction=True)
        transaction.xack(lease["stream"], GROUP, lease["entry"])
        transaction.delete(f"review:lease:{task_id}")
        transaction.hset(
            f"review:decided:{task_id}",
            mapping={"reviewer": reviewer, "outcome": outcome, "reason": reason, "ts": now_ms},
        )
        transaction.delete(f"{OUTBOX}{task_id}")
        transaction.execute()
        self._log(reviewer, "decide", task_id, now_ms)
        return record

    def _pending(
        self, task_id: str, reviewer: str, outcome: str, reason: str
    ) -> dict[str, Any] | None:
        """This reviewer's decision for the task kept by a send that failed (or whose reply was
        lost), or None. Another outcome or reason is refused: the kept record may already be
        on the topic. A record kept for an earlier lease holder is replaced."""
        raw = self.redis.get(f"{OUTBOX}{task_id}")
        if raw is None:
            return None
        pending: dict[str, Any] = json.loads(raw)
        if pending.get("reviewer_id") != reviewer:
            return None
        if (pending.get("outcome"), pending.get("reason")) != (outcome, reason):
            raise ReviewError(
                f"task {task_id!r}: your decision {pending.get('outcome')} "
                f"(reason {pending.get('reason')!r}) was not confirmed sent; decide again with "
                "the same outcome and reason to send it"
            )
        return pending

    def backlog(self, now_ms: int) -> dict[str, dict[str, int]]:
        """Per queue: tasks not yet decided, and the age of the oldest in ms."""
        result: dict[str, dict[str, int]] = {}
        for queue in sorted(_text(q) for q in self.redis.smembers("review:queues")):
            depth, oldest = 0, None
            for priority in PRIORITIES:
                stream = _stream(queue, priority)
                if not self.redis.exists(stream):
                    continue
                for group in self.redis.xinfo_groups(stream):
                    depth += int(group.get("lag") or 0) + int(group.get("pending") or 0)
                    last = _text(group.get("last-delivered-id", "0-0"))
                pending = self.redis.xpending_range(stream, GROUP, "-", "+", 1)
                first_new = self.redis.xrange(stream, min=f"({last}", count=1)
                candidates = [_text(p["message_id"]) for p in pending]
                candidates += [_text(e[0]) for e in first_new]
                for entry_id in candidates:
                    at = int(entry_id.split("-")[0])
                    oldest = at if oldest is None else min(oldest, at)
            result[queue] = {"depth": depth, "oldest_age_ms": now_ms - oldest if oldest else 0}
        return result
