"""In-memory stand-ins for enforcement's world (the Content Service's fences, the intent store)
and the moderation.actions records that drive it, for tests of modstream/enforcement/ and of
the enforce and reconciler jobs' adapters without Redis or a content store.

    from modstream.enforcement.apply import enforce
    from modstream.testing.enforcement import MemoryContent, MemoryIntents, action

    intents, content = MemoryIntents(), MemoryContent(failures=1)  # the store down once
    assert enforce(action(1), intents, content).status == "failed"  # retried later

`POISON_ACTIONS` is malformed input of every kind the enforce path must dead-letter.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from modstream.scanning.plan import sha256_hex
from modstream.testing.records import T0


class MemoryIntents:
    """The enforce job's intent store (Redis in the job), in memory."""

    def __init__(self) -> None:
        self.keys: dict[str, str] = {}

    def begin(self, action_id: str, ttl_ms: int) -> str | None:
        if action_id in self.keys:
            return self.keys[action_id]
        self.keys[action_id] = "PENDING"
        return None

    def finish(self, action_id: str, status: str, ttl_ms: int) -> None:
        self.keys[action_id] = status

    def abandon(self, action_id: str) -> None:
        self.keys.pop(action_id, None)


@dataclass
class Result:
    """What the Content Service answers an apply."""

    status: str
    current_version: int
    revision: int


class MemoryContent:
    """The Content Service's fences, in memory."""

    def __init__(self, version: int = 1, failures: int = 0) -> None:
        self.version = version
        self.revision = 0
        self.visibility = "pending"
        self.applies = 0
        self.failures = failures

    def apply(
        self,
        content_id: str,
        version: int,
        revision: int,
        visibility: str,
        restriction: str | None,
        ts: int,
        *,
        repair: bool = False,
    ) -> Result:
        if self.failures:
            self.failures -= 1
            raise ConnectionError("content store down")
        if version != self.version:
            return Result("superseded", self.version, self.revision)
        if revision < self.revision or (revision == self.revision and not repair):
            return Result("stale", self.version, self.revision)
        self.revision, self.visibility = revision, visibility
        self.applies += 1
        return Result("applied", self.version, self.revision)


def action(
    revision: int, visibility: str = "hidden", version: int = 1, **extra: Any
) -> dict[str, Any]:
    """A moderation.actions record of c-1 (BLOCK), with a readable action id `a-V-R`."""
    return {
        "action_id": f"a-{version}-{revision}",
        "content_id": "c-1",
        "content_version": version,
        "decision_revision": revision,
        "outcome": "BLOCK",
        "visibility": visibility,
        "policy_version": 1,
        "ts": T0,
        **extra,
    }


def job_action(revision: int, visibility: str = "hidden", **extra: Any) -> dict[str, Any]:
    """A moderation.actions record as the moderation job writes it (sha256 action ids)."""
    record = action(revision, visibility)
    record["action_id"] = hashlib.sha256(f"c-1|1|{revision}".encode()).hexdigest()
    return {**record, **extra}


def content_action(
    content_id: str, revision: int, visibility: str, version: int = 1
) -> dict[str, Any]:
    """A moderation.actions record for any content item: its outcome follows `visibility`
    (limited: an age gate), stamped T0 + revision, its id as the moderation job makes it."""
    outcome = {"public": "ALLOW", "hidden": "BLOCK", "limited": "RESTRICT"}.get(
        visibility, "PENDING"
    )
    record: dict[str, Any] = {
        "action_id": sha256_hex(content_id, version, revision),
        "content_id": content_id,
        "content_version": version,
        "decision_revision": revision,
        "outcome": outcome,
        "visibility": visibility,
        "policy_version": 1,
        "ts": T0 + revision,
    }
    if visibility == "limited":
        record["restriction"] = "age_gate"
    return record


# A valid action, and malformed variants of it or worse.
VALID_ACTION = json.dumps(job_action(1, "hidden"))

POISON_ACTIONS: dict[str, str | None] = {
    "invalid JSON": "{not json",
    "50,000 nested brackets": "[" * 50_000 + "]" * 50_000,
    "nested objects": '{"a":' * 100_000 + "1" + "}" * 100_000,
    "huge integer": VALID_ACTION.replace(
        '"decision_revision": 1', '"decision_revision": ' + "9" * 40
    ),
    "integer beyond a long": VALID_ACTION.replace(
        '"decision_revision": 1', '"decision_revision": ' + str(2**70)
    ),
    "NaN": VALID_ACTION.replace('"policy_version": 1', '"policy_version": NaN'),
    "bool for int": VALID_ACTION.replace('"decision_revision": 1', '"decision_revision": true'),
    "wrong type": VALID_ACTION.replace('"content_id": "c-1"', '"content_id": ["c-1"]'),
    "duplicated field": VALID_ACTION[:-1] + ', "visibility": "public"}',
    "not an object": json.dumps([job_action(1)]),
    "empty": "",
    "null value": None,
    "not UTF-8 text": "\udcff\udcfe",
}
