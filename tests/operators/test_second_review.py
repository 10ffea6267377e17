"""Second review (modstream/review/second_review.py): two distinct reviewers for chosen outcomes or
rules, a sampled blind second review, and an escalation task when two reviewers disagree."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest

from modstream.contract import parse
from modstream.moderation.state import Agreement, from_document, to_document
from modstream.policy.document import PolicyError
from modstream.policy.evaluate import load_policy
from modstream.review.access import ReviewGrants
from modstream.review.second_review import escalation_task_id, sampled, second_task_id
from modstream.testing.policies import global_document
from modstream.testing.records import T0
from modstream.testing.versions import Version, appeal, context, image, image_evidence, review

SECOND = {"outcomes": ["BLOCK"], "queue": "second_review", "priority": 1}
ADULT_TASK_AT = T0 + 1


def adult_review(second_review: dict[str, Any] | None = None, **ctx_fields: Any) -> Version:
    """An image on a public post with a borderline nsfw score: PENDING, task in queue adult."""
    ctx = context(second_review=second_review or SECOND)
    version = Version(dataclasses.replace(ctx, **ctx_fields))
    version.upload(**image(surface="public_post"))
    for record in image_evidence("c-1", ADULT_TASK_AT, nsfw=0.6):
        version.send("detector.results", record)
    assert version.last["outcome"] == "PENDING"
    return version


def first_task(version: Version) -> str:
    [task] = [t for t in version.of("review.tasks") if t["queue"] == "adult"]
    return str(task["task_id"])


def by(reviewer: str, task_id: str, outcome: str, at: int) -> dict[str, Any]:
    return review(task_id, outcome, at=at, reviewer_id=reviewer, event_id=f"rv-{reviewer}-{at}")


def second_task(version: Version) -> dict[str, Any]:
    return [t for t in version.of("review.tasks") if t.get("second_review")][-1]


def agreements(version: Version, *sent: tuple[str, dict[str, Any]]) -> list[Agreement]:
    found: list[Agreement] = []
    for topic, record in sent:
        found += version.send(topic, record).agreements
    return found


def test_one_reviewers_block_does_not_enforce_the_seconds_does() -> None:
    version = adult_review()
    revisions, actions = len(version.decisions), len(version.of("moderation.actions"))
    version.send("review.decisions", by("r1", first_task(version), "BLOCK", T0 + 100))
    assert (len(version.decisions), len(version.of("moderation.actions"))) == (revisions, actions)
    assert version.state is not None and version.state.human is None
    task = second_task(version)
    assert (task["queue"], task["priority"], task["kind"]) == ("second_review", 1, "review")
    # Blind: the model's reasons, the task reviewed, never the first outcome or reviewer.
    assert task["reasons"] == ["sexual_content"]
    assert task["second_review"] == {
        "round": "second",
        "of_task": first_task(version),
        "sampled": False,
    }
    assert "BLOCK" not in json.dumps(task) and "r1" not in json.dumps(task)
    found = agreements(version, ("review.decisions", by("r2", task["task_id"], "BLOCK", T0 + 200)))
    assert (version.last["outcome"], version.last["trigger"]) == ("BLOCK", "review")
    assert version.of("moderation.actions")[-1]["visibility"] == "hidden"
    assert found == [Agreement("adult", "r1", "r2", "BLOCK", "BLOCK", sampled=False)]
    assert version.state is not None and version.state.second is None
    assert version.state.open_tasks == [] and version.state.task_queues == {}


def test_the_first_reviewer_cannot_be_the_second() -> None:
    version = adult_review()
    version.send("review.decisions", by("r1", first_task(version), "BLOCK", T0 + 100))
    task_id = second_task(version)["task_id"]
    revisions = len(version.decisions)
    version.send("review.decisions", by("r1", task_id, "BLOCK", T0 + 200))
    [(error_class, message)] = version.dead_letters
    assert error_class == "conflict" and "two distinct reviewers" in message
    assert len(version.decisions) == revisions
    version.send("review.decisions", by("r2", task_id, "BLOCK", T0 + 300))
    assert version.last["outcome"] == "BLOCK"


def test_a_disagreement_opens_an_escalation_task_which_decides() -> None:
    version = adult_review()
    version.send("review.decisions", by("r1", first_task(version), "BLOCK", T0 + 100))
    revisions = len(version.decisions)
    found = agreements(
        version, ("review.decisions", by("r2", second_task(version)["task_id"], "ALLOW", T0 + 200))
    )
    assert found == [Agreement("adult", "r1", "r2", "BLOCK", "ALLOW", sampled=False)]
    assert len(version.decisions) == revisions  # nothing changes until the escalation decides
    escalation = version.of("review.tasks")[-1]
    assert (escalation["queue"], escalation["priority"]) == ("escalation", 0)
    assert escalation["second_review"]["round"] == "escalation"
    assert escalation["second_review"]["outcomes"] == ["BLOCK", "ALLOW"]
    version.send("review.decisions", by("r3", escalation["task_id"], "ALLOW", T0 + 300))
    assert (version.last["outcome"], version.last["trigger"]) == ("ALLOW", "review")
    assert version.state is not None and version.state.escalation_task is None


def test_the_task_ids_are_the_ones_a_workload_computes_in_advance() -> None:
    """modstream/demo/workload_extras.py leases and decides these tasks before the job opens
    them."""
    version = adult_review()
    first = by("r1", first_task(version), "BLOCK", T0 + 100)
    version.send("review.decisions", first)
    second = second_task(version)["task_id"]
    assert second == second_task_id("c-1", 1, first["event_id"])
    version.send("review.decisions", by("r2", second, "ALLOW", T0 + 200))
    assert version.of("review.tasks")[-1]["task_id"] == escalation_task_id("c-1", 1, second)


def test_a_review_while_a_block_waits_for_its_second_is_refused() -> None:
    version = adult_review()
    version.send("review.decisions", by("r1", first_task(version), "BLOCK", T0 + 100))
    version.send("review.decisions", by("r3", "t-ext", "ALLOW", T0 + 150))
    assert [error_class for error_class, _ in version.dead_letters] == ["conflict"]
    assert version.state is not None and version.state.human is None


def test_an_outcome_the_policy_does_not_name_decides_at_once() -> None:
    version = adult_review()
    version.send("review.decisions", by("r1", first_task(version), "ALLOW", T0 + 100))
    assert (version.last["outcome"], version.last["trigger"]) == ("ALLOW", "review")
    assert not any(t.get("second_review") for t in version.of("review.tasks"))


def test_a_rule_the_policy_names_needs_two_reviewers_whatever_the_outcome() -> None:
    version = adult_review({"rules": ["nsfw-borderline-review"]})
    version.send("review.decisions", by("r1", first_task(version), "ALLOW", T0 + 100))
    assert version.last["outcome"] == "PENDING"
    version.send("review.decisions", by("r2", second_task(version)["task_id"], "ALLOW", T0 + 200))
    assert version.last["outcome"] == "ALLOW"


def test_a_sampled_review_decides_at_once_and_its_blind_second_only_counts() -> None:
    version = adult_review({"sample": 1.0})
    version.send("review.decisions", by("r1", first_task(version), "ALLOW", T0 + 100))
    assert (version.last["outcome"], version.last["trigger"]) == ("ALLOW", "review")
    task = second_task(version)
    assert task["second_review"]["sampled"] is True
    assert task["reasons"] == ["sexual_content"]  # the model's, not the first review's
    revisions = len(version.decisions)
    found = agreements(version, ("review.decisions", by("r2", task["task_id"], "ALLOW", T0 + 200)))
    assert found == [Agreement("adult", "r1", "r2", "ALLOW", "ALLOW", sampled=True)]
    assert len(version.decisions) == revisions


def test_a_sampled_disagreement_opens_an_escalation_and_the_first_stays_in_force() -> None:
    version = adult_review({"sample": 1.0})
    version.send("review.decisions", by("r1", first_task(version), "ALLOW", T0 + 100))
    version.send("review.decisions", by("r2", second_task(version)["task_id"], "BLOCK", T0 + 200))
    assert version.last["outcome"] == "ALLOW"
    assert version.of("review.tasks")[-1]["queue"] == "escalation"


def test_a_sampled_second_task_stays_open_when_another_review_decides() -> None:
    """One second review waits at a time: the later review is not sampled."""
    version = adult_review({"sample": 1.0})
    version.send("review.decisions", by("r1", first_task(version), "ALLOW", T0 + 100))
    task_id = second_task(version)["task_id"]
    version.send("review.decisions", by("r3", "t-ext", "ALLOW", T0 + 150))
    assert version.state is not None and version.state.open_tasks == [task_id]
    assert second_task(version)["task_id"] == task_id


def test_a_closed_second_task_refuses_a_late_review() -> None:
    version = adult_review()
    version.send("review.decisions", by("r1", first_task(version), "BLOCK", T0 + 100))
    task_id = second_task(version)["task_id"]
    version.send("review.decisions", by("r2", task_id, "BLOCK", T0 + 200))
    version.send("review.decisions", by("r3", task_id, "ALLOW", T0 + 300))
    assert [error_class for error_class, _ in version.dead_letters] == ["stale"]
    assert version.last["outcome"] == "BLOCK"


def test_sampling_is_a_deterministic_share_of_event_ids() -> None:
    ids = [f"rv-{n}" for n in range(4000)]
    chosen = [event_id for event_id in ids if sampled(event_id, 0.25)]
    assert 900 < len(chosen) < 1100
    assert chosen == [event_id for event_id in ids if sampled(event_id, 0.25)]
    assert not any(sampled(event_id, 0.0) for event_id in ids)
    assert all(sampled(event_id, 1.0) for event_id in ids)


def test_the_same_inputs_give_the_same_outputs() -> None:
    """Replay decides the same: task ids, records and agreements come from the inputs only."""
    runs = []
    for _ in range(2):
        version = adult_review({"outcomes": ["BLOCK"], "sample": 0.5})
        version.send("review.decisions", by("r1", first_task(version), "BLOCK", T0 + 100))
        version.send(
            "review.decisions", by("r2", second_task(version)["task_id"], "ALLOW", T0 + 200)
        )
        runs.append((version.outputs, version.dead_letters))
    assert runs[0] == runs[1]


def test_second_review_tasks_match_the_output_schema() -> None:
    version = adult_review()
    version.send("review.decisions", by("r1", first_task(version), "BLOCK", T0 + 100))
    version.send("review.decisions", by("r2", second_task(version)["task_id"], "ALLOW", T0 + 200))
    for topic, _, record in version.outputs:
        parse(topic, json.dumps(record))


def test_the_second_review_queue_takes_leases_and_reviews_under_its_grant_not_the_firsts() -> None:
    table = ReviewGrants()
    table.apply("r1", ["adult"], T0)
    table.apply("r2", ["second_review"], T0)
    version = adult_review(grants=table)

    def lease(reviewer: str, task_id: str, queue: str, at: int) -> dict[str, Any]:
        return {
            "event_id": f"lease-{reviewer}-{at}",
            "task_id": task_id,
            "queue": queue,
            "content_id": "c-1",
            "content_version": 1,
            "reviewer_id": reviewer,
            "ts": at,
            "expires_ts": at + 900_000,
        }

    version.send("review.leases", lease("r1", first_task(version), "adult", T0 + 50))
    version.send("review.decisions", by("r1", first_task(version), "BLOCK", T0 + 100))
    task_id = second_task(version)["task_id"]
    table.apply("r1", ["adult", "second_review"], T0 + 120)
    version.send("review.leases", lease("r1", task_id, "second_review", T0 + 130))
    [(error_class, message)] = version.dead_letters
    assert error_class == "conflict" and "two distinct reviewers" in message
    assert version.state is not None and task_id not in version.state.leases
    version.dead_letters.clear()
    version.send("review.leases", lease("r2", task_id, "second_review", T0 + 150))
    version.send("review.decisions", by("r2", task_id, "BLOCK", T0 + 200))
    assert version.dead_letters == []
    assert version.last["outcome"] == "BLOCK"


@pytest.mark.parametrize(
    ("second_review", "escalation", "found"),
    [
        ({"rules": ["no-such-rule"]}, {}, "second_review.rules: no rule with id no-such-rule"),
        ({"sample": 1.5}, {}, "second_review.sample"),
        (None, {"adult": {"after_ms": 1000}}, "needs a priority, a queue or both"),
    ],
)
def test_the_policy_refuses_a_bad_second_review_or_escalation(
    second_review: dict[str, Any] | None, escalation: dict[str, Any], found: str
) -> None:
    document = global_document(1, escalation=escalation)
    if second_review is not None:
        document["second_review"] = second_review
    with pytest.raises(PolicyError) as error:
        load_policy(document)
    assert found in str(error.value)


def test_a_waiting_second_review_survives_the_named_document_round_trip() -> None:
    """The JSON fallback of the stored state (`version_state.to_document` / `from_document`)
    keeps the wait and the tracked tasks typed."""
    version = adult_review({"sample": 1.0})
    version.send("review.decisions", by("r1", first_task(version), "ALLOW", T0 + 100))
    assert version.state is not None and version.state.second is not None
    assert from_document(to_document(version.state)) == version.state


def test_an_upheld_appeal_needs_two_reviewers_and_decides_as_the_appeal() -> None:
    """The appeal's reviewer upholds a BLOCK: it waits for a second reviewer, whose BLOCK
    decides as the appeal's answer and closes the appeal."""
    version = Version(context(second_review=SECOND))
    version.upload(**image(surface="public_post"))
    for record in image_evidence("c-1", T0 + 1, nsfw=0.99):
        version.send("detector.results", record)
    assert version.last["outcome"] == "BLOCK"
    version.send("moderation.appeals", appeal("a-1", at=T0 + 100))
    version.send("review.decisions", by("r1", "appeal-a-1", "BLOCK", T0 + 200))
    assert version.state is not None and version.state.appeal_id == "a-1"
    assert second_task(version)["second_review"]["of_task"] == "appeal-a-1"
    assert version.state.human is None
    version.send("review.decisions", by("r2", second_task(version)["task_id"], "BLOCK", T0 + 300))
    # Upheld: the same outcome and state, so no new revision; the appeal is closed.
    assert version.state is not None and version.state.appeal_id is None
    assert version.state.human is not None and version.state.human.outcome == "BLOCK"
