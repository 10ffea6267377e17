"""Applying one action exactly once in effect: the intent pattern around the Content Service.

Contract: docs/CONTRACT.md, "moderation.actions (exactly once; what the Content Service must
apply)": "The Content Service applies an action only if `content_version` is its current version
and `decision_revision` is greater than the one it applied; anything else is acknowledged and
ignored."

Proved by:
    tests/operators/test_enforcement.py::test_applied_once_then_acknowledged
    tests/operators/test_enforcement.py::test_a_newer_revision_first_leaves_the_older_one_stale
    tests/operators/test_enforcement.py::test_an_action_for_a_superseded_version_is_ignored
    tests/operators/test_enforcement.py::test_after_a_crash_between_apply_and_completed_nothing_is_applied_twice
    tests/operators/test_enforcement.py::test_failures_release_the_intent_and_back_off_with_jitter

For each action (or reconciler repair) the Action Service takes an intent in a shared store:
`SET intent:<action_id> PENDING NX PX <ttl>`.
- the key exists and is COMPLETED or STALE: acknowledge (it was applied, or never will be);
- it is PENDING: another worker owns it; check again when its TTL may have freed it (a worker
  that died between apply and COMPLETED leaves PENDING behind, and the TTL frees it);
- we own it: apply behind the Content Service's version and revision fences, then mark it
  COMPLETED (or STALE when a fence refused it), keeping a TTL; on failure delete the key and
  retry with exponential backoff and jitter, up to a maximum of attempts (`retry_after`). An
  intent store that cannot be reached is a failed attempt too, retried the same way (never a
  crash). What is served but not decided (a failed purge) is healed on the same backoff, at most
  as many times (`heals_left`, `heal_retry`).
A retry after a crash re-applies at most what the fences allow, so nothing is applied twice.
I/O comes in as two small interfaces; the Flink adapter (modstream/jobs/enforce.py) opens Redis.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any, Protocol

INTENT_TTL_MS = 30_000
COMPLETED_TTL_MS = 7 * 86_400_000
MAX_ATTEMPTS = 6
BASE_BACKOFF_MS = 200
MAX_BACKOFF_MS = 30_000


# Visibilities under which the media is exported to the public location.
EXPORTED = ("public", "limited")


def served_visibility(
    decided: str, *, serving: bool, purging: bool, served_as: str | None, has_media: bool
) -> str:
    """What users can see of one item, from what is served rather than what was decided: a
    public file of it, or a purge not yet done (caches may serve it), is visible as it was
    exported (`served_as`); a decided `public`/`limited` whose media exists but is not
    exported is not visible yet (`pending`). An item without media shows what was decided."""
    if serving or purging:
        return served_as if served_as in EXPORTED else "public"
    if decided in EXPORTED and has_media:
        return "pending"
    return decided


class Intents(Protocol):
    def begin(self, action_id: str, ttl_ms: int) -> str | None:
        """Take the intent (None) or return the status someone else left."""

    def finish(self, action_id: str, status: str, ttl_ms: int) -> None: ...

    def abandon(self, action_id: str) -> None: ...


class Applied(Protocol):
    status: str  # applied | stale | superseded
    current_version: int
    revision: int


class Target(Protocol):
    def apply(
        self,
        content_id: str,
        content_version: int,
        decision_revision: int,
        visibility: str,
        restriction: str | None,
        ts: int,
        *,
        repair: bool = False,
    ) -> Applied: ...


@dataclass(frozen=True)
class Outcome:
    """What happened to one action: `applied`, `stale` (a fence refused it: superseded version
    or not a newer revision), `acknowledged` (already done), `in_progress` (another owner),
    `failed` (the Content Service failed; retry after `retry_in_ms`)."""

    status: str
    retry_in_ms: int | None = None
    error: str | None = None


def backoff_ms(attempt: int, rng: random.Random | None = None) -> int:
    """Exponential backoff with full jitter: uniform in [base * 2^(attempt-1) / 2, that]."""
    ceiling = min(MAX_BACKOFF_MS, BASE_BACKOFF_MS * 2 ** max(0, attempt - 1))
    return int((rng or random).uniform(ceiling / 2, ceiling))


@dataclass(frozen=True)
class Retry:
    """Another attempt at an action, or at healing what it served: its number, how long after
    now it is due, and whether it is past the maximum (then the action is dead-lettered)."""

    attempt: int
    in_ms: int
    exhausted: bool = False


def retry_after(outcome: Outcome, attempt: int, max_attempts: int) -> Retry | None:
    """What follows attempt `attempt`: None when the action is done (applied, stale or
    acknowledged); else the next attempt when `outcome` says, one more after a failure and the
    same number while another worker holds the intent (nothing failed), exhausted past
    `max_attempts`."""
    if outcome.retry_in_ms is None:
        return None
    next_attempt = attempt + (1 if outcome.status == "failed" else 0)
    return Retry(next_attempt, outcome.retry_in_ms, exhausted=next_attempt > max_attempts)


def heals_left(attempt: int, max_attempts: int) -> bool:
    """Whether what an action serves may be healed again after attempt `attempt`: at most
    `max_attempts` times, then the reconciler's repairs take over."""
    return attempt < max_attempts


def heal_retry(attempt: int, rng: random.Random | None = None) -> Retry:
    """The next heal after attempt `attempt`, on the same backoff as a failed apply."""
    return Retry(attempt + 1, backoff_ms(attempt, rng))


def enforce(
    action: dict[str, Any],
    intents: Intents,
    target: Target,
    *,
    attempt: int = 1,
    intent_ttl_ms: int = INTENT_TTL_MS,
    completed_ttl_ms: int = COMPLETED_TTL_MS,
    rng: random.Random | None = None,
) -> Outcome:
    """Apply `action` (a moderation.actions record, or a repair with `repair_of`) once."""
    action_id = action["action_id"]
    try:
        held = intents.begin(action_id, intent_ttl_ms)
    except Exception as error:  # the intent store is unreachable: a failed attempt, retried
        return Outcome("failed", retry_in_ms=backoff_ms(attempt, rng), error=type(error).__name__)
    if held in ("COMPLETED", "STALE"):
        return Outcome("acknowledged")
    if held == "PENDING":
        return Outcome("in_progress", retry_in_ms=intent_ttl_ms)
    try:
        result = target.apply(
            action["content_id"],
            action["content_version"],
            action["decision_revision"],
            action["visibility"],
            action.get("restriction"),
            action["ts"],
            repair="repair_of" in action,
        )
    except Exception as error:
        intents.abandon(action_id)
        return Outcome("failed", retry_in_ms=backoff_ms(attempt, rng), error=type(error).__name__)
    if result.status == "applied":
        intents.finish(action_id, "COMPLETED", completed_ttl_ms)
        return Outcome("applied")
    intents.finish(action_id, "STALE", completed_ttl_ms)
    return Outcome("stale")


class RedisIntents:
    """The intent keys in Redis (`intent:<action_id>`)."""

    def __init__(self, client: Any, prefix: str = "intent") -> None:
        self.redis = client
        self.prefix = prefix

    def begin(self, action_id: str, ttl_ms: int) -> str | None:
        key = f"{self.prefix}:{action_id}"
        if self.redis.set(key, "PENDING", nx=True, px=ttl_ms):
            return None
        held = self.redis.get(key)
        if held is None:  # expired between SET and GET: try once more
            return None if self.redis.set(key, "PENDING", nx=True, px=ttl_ms) else "PENDING"
        return held.decode() if isinstance(held, bytes) else str(held)

    def finish(self, action_id: str, status: str, ttl_ms: int) -> None:
        self.redis.set(f"{self.prefix}:{action_id}", status, px=ttl_ms)

    def abandon(self, action_id: str) -> None:
        self.redis.delete(f"{self.prefix}:{action_id}")
