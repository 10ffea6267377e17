"""modstream/review/quality.py: which outputs of a firing count as an appealable decision, an
appeal, an appeal's result and a human review's agreement with the model, and with which labels."""

from __future__ import annotations

from typing import Any

import pytest

from modstream.review.quality import COUNTERS, InForce, Slice, counted, models

SLICE = Slice(surface="public_post", region="DE", model_version="offensive_text@v3", language="de")
LABELS = {
    "surface": "public_post",
    "region": "DE",
    "language": "de",
    "model_version": "offensive_text@v3",
    "policy_version": "7",
}


def decision(outcome: str, trigger: str, revision: int = 2) -> tuple[str, str, dict[str, Any]]:
    record = {"outcome": outcome, "trigger": trigger, "decision_revision": revision}
    return ("moderation.decisions", "c-1", {**record, "policy_version": 7})


def notice(outcome: str, appeal_allowed: bool, revision: int = 2) -> tuple[str, str, Any]:
    record = {"outcome": outcome, "appeal_allowed": appeal_allowed, "decision_revision": revision}
    return ("user.notifications", "c-1", record)


def task(kind: str) -> tuple[str, str, dict[str, Any]]:
    return ("review.tasks", "c-1", {"kind": kind, "queue": "appeals", "policy_version": 7})


def never() -> InForce | None:
    raise AssertionError("the decision in force was read for a firing without a human decision")


def test_a_restrictive_decision_the_author_may_appeal_counts_as_appealable() -> None:
    fired = [decision("BLOCK", "evidence"), notice("BLOCK", True), ("moderation.index", "k", {})]
    assert counted(fired, lambda: SLICE, never) == [("appealable_decisions", LABELS)]
    assert counted([decision("ALLOW", "evidence"), notice("ALLOW", False)], unread, never) == []


def unread() -> Slice:
    raise AssertionError("the version's slice was read for a firing that counts nothing")


def test_the_slice_is_read_once_and_only_when_an_output_counts() -> None:
    reads: list[Slice] = []

    def slice_of() -> Slice:
        reads.append(SLICE)
        return SLICE

    fired = [task("appeal"), notice("BLOCK", True), decision("BLOCK", "evidence")]
    assert [name for name, _ in counted(fired, slice_of, never)] == [
        "appeals",
        "appealable_decisions",
    ]
    assert len(reads) == 1
    assert counted([task("review"), ("moderation.index", "k", {})], unread, never) == []


def test_an_appeal_counts_when_its_task_opens_not_a_review_task() -> None:
    assert counted([task("appeal")], lambda: SLICE, never) == [("appeals", LABELS)]
    assert counted([task("review")], lambda: SLICE, never) == []


@pytest.mark.parametrize(
    ("before", "outcome", "result"),
    [
        (InForce("BLOCK", human=False), "ALLOW", "overturned"),
        (InForce("BLOCK", human=False), "BLOCK", "upheld"),
        (InForce("RESTRICT", human=True), "BLOCK", "overturned"),  # a review's decision too
    ],
)
def test_an_appeal_is_overturned_when_its_outcome_differs_from_the_one_appealed(
    before: InForce, outcome: str, result: str
) -> None:
    fired = [decision(outcome, "appeal"), notice(outcome, False)]
    assert counted(fired, lambda: SLICE, lambda: before) == [
        ("appeal_outcomes", {**LABELS, "result": result})
    ]


@pytest.mark.parametrize(
    ("before", "outcome", "expected"),
    [
        (InForce("BLOCK", human=False), "ALLOW", [("human_reviews", "disagree")]),
        (InForce("PENDING", human=False), "PENDING", [("human_reviews", "agree")]),
        (InForce("BLOCK", human=True), "ALLOW", []),  # a human reviewed again: not the model
        (None, "ALLOW", []),  # nothing was decided before (the job sends it to the DLQ)
    ],
)
def test_a_review_of_the_models_decision_agrees_or_disagrees(
    before: InForce | None, outcome: str, expected: list[tuple[str, str]]
) -> None:
    counts = counted([decision(outcome, "review")], lambda: SLICE, lambda: before)
    assert counts == [(name, {**LABELS, "agreement": value}) for name, value in expected]


def test_a_reviewed_block_is_both_judged_and_appealable_and_reads_the_state_once() -> None:
    reads: list[int] = []

    def earlier() -> InForce:
        reads.append(1)
        return InForce("ALLOW", human=False)

    fired = [decision("BLOCK", "review", 3), notice("BLOCK", True, 3), decision("BLOCK", "review")]
    names = [name for name, _ in counted(fired, lambda: SLICE, earlier)]
    assert set(names) <= set(COUNTERS)
    assert names == [
        "human_reviews",
        "appealable_decisions",
        "human_reviews",
    ]
    assert reads == [1]


def test_the_model_label_names_every_detector_and_version_once_in_order() -> None:
    evidence = [("nsfw_image", "2"), ("offensive_text", "v3"), ("nsfw_image", "2")]
    assert models(evidence) == "nsfw_image@2,offensive_text@v3"
    assert models([]) == "none"
    assert SLICE.labels(None)["policy_version"] == "unknown"
