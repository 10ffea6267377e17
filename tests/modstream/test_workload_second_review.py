"""The workload's second reviews (modstream/demo/workload_extras.py) against the moderation step and
the shipped policy: the sampled reviews, leases and decisions name the tasks the job opens, one
blind second review agrees, the other disagrees and its escalation decides. No JVM: the pure
step, driven per version as the job's event-time order feeds it."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from modstream.demo.workload import generate
from modstream.demo.workload_extras import SECOND_REVIEWED
from modstream.moderation.state import Agreement, StepResult
from modstream.review.access import ReviewGrants
from modstream.testing.versions import Version, context


class Driven(Version):
    """The test driver, keeping the second reviews each step compared."""

    compared: list[Agreement]

    def _take(self, result: StepResult) -> StepResult:
        self.compared = getattr(self, "compared", []) + result.agreements
        return super()._take(result)


def _driven(lines: list[dict[str, Any]], content_id: str) -> Driven:
    """Version 1 of `content_id` through the step: its records in `ts` order (the job's
    per-version order), every timer due fired before the record that passes it."""
    grants = ReviewGrants()
    for line in lines:
        if line["topic"] == "review.grants":
            grant = line["value"]
            grants.apply(grant["reviewer_id"], grant["queues"], grant["ts"])
    version = Driven(dataclasses.replace(context(), grants=grants))
    version.compared = []
    mine = [
        line
        for line in lines
        if isinstance(line["value"], dict)
        and line["value"].get("content_id") == content_id
        and line["value"].get("content_version") == 1
    ]
    for line in sorted(mine, key=lambda line: line["value"]["ts"]):
        version.fire_until(line["value"]["ts"] - 1)
        version.send(line["topic"], line["value"])
    return version


@pytest.fixture(scope="module")
def lines() -> list[dict[str, Any]]:
    return generate(seed=7, versions=60)


def test_the_confirmed_review_is_compared_once_and_agrees(lines: list[dict[str, Any]]) -> None:
    version = _driven(lines, f"c7-{SECOND_REVIEWED[0]}")
    assert version.dead_letters == []
    assert version.compared == [
        Agreement("external", "mod-3", "mod-4", "ALLOW", "ALLOW", sampled=True)
    ]
    [task] = [t for t in version.of("review.tasks") if t.get("second_review")]
    assert (task["queue"], task["second_review"]["sampled"]) == ("second_review", True)
    assert version.last["outcome"] == "ALLOW"
    assert version.state is not None and version.state.open_tasks == []


def test_the_disputed_review_escalates_and_the_escalation_decides(
    lines: list[dict[str, Any]],
) -> None:
    version = _driven(lines, f"c7-{SECOND_REVIEWED[1]}")
    assert version.dead_letters == []
    assert version.compared == [
        Agreement("external", "mod-3", "mod-4", "BLOCK", "ALLOW", sampled=True)
    ]
    [escalation] = [t for t in version.of("review.tasks") if t["queue"] == "escalation"]
    assert escalation["second_review"]["outcomes"] == ["BLOCK", "ALLOW"]
    reviewed = [d for d in version.decisions if d["trigger"] == "review"]
    # The sampled BLOCK decided at once; the escalation's ALLOW is the decision in force.
    assert [d["outcome"] for d in reviewed] == ["BLOCK", "ALLOW"]
    assert version.last["outcome"] == "ALLOW"
    assert version.state is not None and version.state.escalation_task is None
    assert version.state.open_tasks == []
