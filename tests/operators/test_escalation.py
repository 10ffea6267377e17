"""The escalation rule (modstream/review/escalation.py): a task left open past its queue's
`after_ms` gets the policy's priority and/or queue, once, on an event-time timer."""

from __future__ import annotations

import dataclasses
from typing import Any

import msgspec

from modstream.moderation import state_schema
from modstream.moderation.state import VersionState
from modstream.review.access import ReviewGrants, issued_queue
from modstream.testing.records import T0
from modstream.testing.versions import Version, context, image, image_evidence, review

HOUR = 3_600_000
OPENED = T0 + 1  # the adult task opens with the evidence
NEW_FIELDS = ("task_queues", "second", "escalation_task", "escalation_timer")


def adult_task(escalation: dict[str, Any], **ctx_fields: Any) -> Version:
    """A borderline image on a public post: PENDING, a task in queue adult at OPENED."""
    version = Version(dataclasses.replace(context(escalation=escalation), **ctx_fields))
    version.upload(**image(surface="public_post"))
    for record in image_evidence("c-1", OPENED, nsfw=0.6):
        version.send("detector.results", record)
    assert [t["queue"] for t in version.of("review.tasks")] == ["adult"]
    return version


def test_a_task_left_open_moves_and_gets_the_new_priority_once() -> None:
    version = adult_task({"adult": {"after_ms": HOUR, "priority": 0, "queue": "senior"}})
    [task] = version.of("review.tasks")
    assert OPENED + HOUR in version.timers
    version.fire_until(OPENED + HOUR - 1)
    assert len(version.of("review.tasks")) == 1
    version.fire_until(OPENED + 10 * HOUR)
    [_, moved] = version.of("review.tasks")
    assert moved["task_id"] == task["task_id"]
    assert (moved["queue"], moved["priority"], moved["escalated_from"]) == ("senior", 0, "adult")
    assert moved["ts"] == OPENED + HOUR and moved["reasons"] == task["reasons"]
    assert version.state is not None and version.state.escalation_timer is None


def test_priority_only_keeps_the_queue() -> None:
    version = adult_task({"adult": {"after_ms": HOUR, "priority": 0}})
    version.fire_until(OPENED + HOUR)
    moved = version.of("review.tasks")[-1]
    assert (moved["queue"], moved["priority"], moved["escalated_from"]) == ("adult", 0, "adult")


def test_a_task_decided_before_its_wait_ends_is_not_escalated() -> None:
    version = adult_task({"adult": {"after_ms": HOUR, "queue": "senior"}})
    [task] = version.of("review.tasks")
    version.send("review.decisions", review(task["task_id"], "ALLOW", at=OPENED + 100))
    version.fire_until(OPENED + 2 * HOUR)
    assert len(version.of("review.tasks")) == 1


def test_a_queue_without_a_rule_is_left_alone() -> None:
    version = adult_task({"text": {"after_ms": HOUR, "priority": 0}})
    assert version.state is not None and version.state.escalation_timer is None
    version.fire_until(OPENED + 2 * HOUR)
    assert len(version.of("review.tasks")) == 1


def test_an_escalation_task_of_a_disagreement_escalates_too() -> None:
    ctx = context(
        second_review={"outcomes": ["BLOCK"]},
        escalation={"escalation": {"after_ms": HOUR, "queue": "leads"}},
    )
    version = Version(ctx)
    version.upload(**image(surface="public_post"))
    for record in image_evidence("c-1", OPENED, nsfw=0.6):
        version.send("detector.results", record)
    [task] = version.of("review.tasks")
    version.send(
        "review.decisions", review(task["task_id"], "BLOCK", at=T0 + 100, reviewer_id="r1")
    )
    second = version.of("review.tasks")[-1]["task_id"]
    version.send("review.decisions", review(second, "ALLOW", at=T0 + 200, reviewer_id="r2"))
    escalation = version.of("review.tasks")[-1]
    version.fire_until(T0 + 200 + HOUR)
    moved = version.of("review.tasks")[-1]
    assert (moved["task_id"], moved["queue"]) == (escalation["task_id"], "leads")
    assert moved["escalated_from"] == "escalation"


def test_a_state_stored_before_these_fields_loads_with_nothing_open() -> None:
    """Today's stored schema 5 arrays end before `task_queues`: they load with the defaults,
    so a job upgraded in place reads its checkpoint (nothing tracked, nothing escalated)."""
    version = adult_task({"adult": {"after_ms": HOUR, "priority": 0}})
    assert version.state is not None
    stored = msgspec.msgpack.decode(state_schema.dump_version(version.state))
    first = VersionState.__struct_fields__.index(NEW_FIELDS[0])
    old = msgspec.msgpack.encode(stored[:first])
    loaded = state_schema.load_version(old)
    assert loaded is not None and loaded.open_tasks == version.state.open_tasks
    assert (loaded.task_queues, loaded.second, loaded.escalation_timer) == ({}, None, None)
    # Appended after schema 5 in this order (fields appended later follow them).
    assert VersionState.__struct_fields__[first : first + len(NEW_FIELDS)] == NEW_FIELDS


def test_a_moved_task_is_leased_in_its_new_queue() -> None:
    table = ReviewGrants()
    table.apply("lead", ["senior"], T0)
    version = adult_task({"adult": {"after_ms": HOUR, "queue": "senior"}}, grants=table)
    [task] = version.of("review.tasks")
    version.fire_until(OPENED + HOUR)
    assert version.state is not None
    assert issued_queue(version.state, task["task_id"], "senior")
    version.send(
        "review.leases",
        {
            "event_id": "lease-lead",
            "task_id": task["task_id"],
            "queue": "senior",
            "content_id": "c-1",
            "content_version": 1,
            "reviewer_id": "lead",
            "ts": OPENED + HOUR + 10,
            "expires_ts": OPENED + 2 * HOUR,
        },
    )
    version.send(
        "review.decisions",
        review(task["task_id"], "ALLOW", at=OPENED + HOUR + 20, reviewer_id="lead"),
    )
    assert version.dead_letters == []
    assert version.last["outcome"] == "ALLOW"


def test_replay_escalates_the_same_tasks_at_the_same_ts() -> None:
    """Timers fired one by one or all at once past them give the same records."""
    rules = {"adult": {"after_ms": HOUR, "priority": 0}}
    stepwise, at_once = adult_task(rules), adult_task(rules)
    for hour in range(1, 4):
        stepwise.fire_until(OPENED + hour * HOUR)
    at_once.fire_until(OPENED + 3 * HOUR)
    assert stepwise.of("review.tasks") == at_once.of("review.tasks")
