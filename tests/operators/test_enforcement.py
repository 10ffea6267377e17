"""The intent pattern around the Content Service, with in-memory intents and target."""

from __future__ import annotations

import random

import pytest

from modstream.enforcement.apply import (
    BASE_BACKOFF_MS,
    MAX_BACKOFF_MS,
    Outcome,
    Retry,
    backoff_ms,
    enforce,
    heal_retry,
    heals_left,
    retry_after,
    served_visibility,
)
from modstream.testing.enforcement import MemoryContent, MemoryIntents, action


def test_applied_once_then_acknowledged() -> None:
    intents, content = MemoryIntents(), MemoryContent()
    assert enforce(action(1), intents, content).status == "applied"
    assert enforce(action(1), intents, content).status == "acknowledged"
    assert content.applies == 1 and intents.keys["a-1-1"] == "COMPLETED"


def test_a_newer_revision_first_leaves_the_older_one_stale() -> None:
    intents, content = MemoryIntents(), MemoryContent()
    assert enforce(action(3, "hidden"), intents, content).status == "applied"
    assert enforce(action(2, "public"), intents, content).status == "stale"
    assert (content.revision, content.visibility) == (3, "hidden")
    assert intents.keys["a-1-2"] == "STALE"


def test_an_action_for_a_superseded_version_is_ignored() -> None:
    intents, content = MemoryIntents(), MemoryContent(version=2)
    assert enforce(action(5, "public", version=1), intents, content).status == "stale"
    assert content.applies == 0


def test_a_held_intent_is_left_to_its_owner_until_its_ttl() -> None:
    intents, content = MemoryIntents(), MemoryContent()
    intents.keys["a-1-1"] = "PENDING"  # a worker died between apply and COMPLETED
    outcome = enforce(action(1), intents, content, intent_ttl_ms=3_000)
    assert (outcome.status, outcome.retry_in_ms) == ("in_progress", 3_000)
    del intents.keys["a-1-1"]  # the TTL freed it
    assert enforce(action(1), intents, content).status == "applied"


def test_after_a_crash_between_apply_and_completed_nothing_is_applied_twice() -> None:
    intents, content = MemoryIntents(), MemoryContent()
    enforce(action(1), intents, content)
    intents.keys["a-1-1"] = "PENDING"  # as if COMPLETED was never written…
    del intents.keys["a-1-1"]  # …and the TTL expired
    assert enforce(action(1), intents, content).status == "stale"
    assert content.applies == 1


def test_failures_release_the_intent_and_back_off_with_jitter() -> None:
    intents, content = MemoryIntents(), MemoryContent(failures=1)
    failed = enforce(action(1), intents, content, attempt=1, rng=random.Random(1))
    assert failed.status == "failed" and failed.error == "ConnectionError"
    assert "a-1-1" not in intents.keys and 100 <= (failed.retry_in_ms or 0) <= 200
    assert enforce(action(1), intents, content, attempt=2).status == "applied"


def test_backoff_grows_and_is_capped() -> None:
    rng = random.Random(7)
    for attempt in range(1, 12):
        ceiling = min(MAX_BACKOFF_MS, BASE_BACKOFF_MS * 2 ** (attempt - 1))
        samples = [backoff_ms(attempt, rng) for _ in range(50)]
        assert all(ceiling // 2 <= sample <= ceiling for sample in samples)
        assert len(set(samples)) > 1  # jittered


def test_a_repair_re_applies_the_applied_revision() -> None:
    intents, content = MemoryIntents(), MemoryContent()
    enforce(action(2, "hidden"), intents, content)
    content.visibility = "public"  # changed by hand / a lost invalidation
    repair = action(2, "hidden", repair_of="a-1-2") | {"action_id": "repair-1"}
    assert enforce(repair, intents, content).status == "applied"
    assert content.visibility == "hidden"


def test_an_unreachable_intent_store_is_a_failed_attempt_not_a_crash() -> None:
    class DownIntents(MemoryIntents):
        def begin(self, action_id: str, ttl_ms: int) -> str | None:
            raise ConnectionError("intent store down")

    content = MemoryContent()
    failed = enforce(action(1), DownIntents(), content, attempt=3, rng=random.Random(1))
    assert failed.status == "failed" and failed.error == "ConnectionError"
    assert 400 <= (failed.retry_in_ms or 0) <= 800 and content.applies == 0


@pytest.mark.parametrize(
    ("decided", "serving", "purging", "served_as", "has_media", "seen"),
    [
        ("hidden", True, False, "public", True, "public"),  # the file step never ran
        ("hidden", False, True, "limited", True, "limited"),  # a purge is pending
        ("hidden", False, True, None, True, "public"),
        ("public", False, False, None, True, "pending"),  # decided, not exported yet
        ("public", True, False, "public", True, "public"),
        ("limited", True, False, "public", True, "public"),  # re-exported under the new one soon
        ("public", False, False, None, False, "public"),  # no media: nothing to serve
        ("hidden", False, False, "public", True, "hidden"),
        ("pending", False, False, None, True, "pending"),
    ],
)
def test_visibility_comes_from_what_is_served(
    decided: str, serving: bool, purging: bool, served_as: str | None, has_media: bool, seen: str
) -> None:
    assert (
        served_visibility(
            decided, serving=serving, purging=purging, served_as=served_as, has_media=has_media
        )
        == seen
    )


@pytest.mark.parametrize(
    ("outcome", "attempt", "expected"),
    [
        (Outcome("applied"), 1, None),
        (Outcome("acknowledged"), 3, None),
        (Outcome("failed", retry_in_ms=200), 1, Retry(2, 200)),
        (Outcome("failed", retry_in_ms=200), 6, Retry(7, 200, exhausted=True)),
        (Outcome("in_progress", retry_in_ms=30_000), 6, Retry(6, 30_000)),  # nothing failed
    ],
)
def test_what_follows_an_attempt(outcome: Outcome, attempt: int, expected: Retry | None) -> None:
    assert retry_after(outcome, attempt, max_attempts=6) == expected


def test_what_is_served_heals_at_most_max_attempts_times_on_the_backoff() -> None:
    assert [heals_left(attempt, 3) for attempt in (1, 2, 3)] == [True, True, False]
    retry = heal_retry(2, random.Random(1))
    assert retry.attempt == 3 and 200 <= retry.in_ms <= 400 and not retry.exhausted
