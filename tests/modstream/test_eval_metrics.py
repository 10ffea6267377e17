"""Grading automated decisions against labels: hand-computed cases, slices, the printed table."""

from __future__ import annotations

from typing import Any

import pytest

from modstream.analytics.eval_metrics import (
    ANY,
    NO_MODEL,
    UNKNOWN,
    EvalResult,
    ReasonRow,
    automated_predictions,
    evaluate,
    natural,
)
from modstream.analytics.eval_table import format_table
from modstream.analytics.labels import Label, LabelSet, merge


def decision(
    content_id: str,
    revision: int,
    outcome: str,
    reasons: tuple[str, ...] = (),
    trigger: str = "evidence",
    policy_version: int = 1,
    models: tuple[str, ...] = ("nsfw_image-1",),
) -> dict[str, Any]:
    return {
        "content_id": content_id,
        "content_version": 1,
        "decision_revision": revision,
        "outcome": outcome,
        "reasons": list(reasons),
        "trigger": trigger,
        "policy_version": policy_version,
        "evidence": [
            {"detector": m.split("-")[0], "model_version": m, "segment_id": None} for m in models
        ],
    }


def facts(content_id: str, surface: str, region: str = "DE", modality: str = "image") -> dict:
    return {
        "content_id": content_id,
        "content_version": 1,
        "type": "upsert",
        "surface": surface,
        "region": region,
        "modality": modality,
        "ts": 1,
    }


def label(content_id: str, violating: bool, reason: str | None = None) -> Label:
    return Label(content_id, 1, violating, reason, "file")


DECISIONS = [
    decision("a", 1, "PENDING", ("scanning",), "fast_gate", models=()),
    decision("a", 2, "BLOCK", ("malware",), models=("media_check-1", "nsfw_image-1")),
    decision("b", 1, "RESTRICT", ("mature_content", "sexual_content")),
    decision("c", 1, "ALLOW"),
    decision("c", 2, "BLOCK", ("human_review",), "review"),
    decision("c", 3, "BLOCK", ("human_review",), "reevaluation", policy_version=2),
    decision("d", 1, "BLOCK", ("malware",)),
    decision("d", 2, "BLOCK", ("malware",), "delete"),
    decision("e", 1, "PENDING", ("sexual_content",)),
    decision("f", 1, "BLOCK", ("harassment",), policy_version=2, models=("offensive_text-1",)),
    decision("h", 1, "ALLOW"),
    decision("i", 1, "BLOCK", ("human_review",), "review"),
]
LABELS = [
    label("a", True, "malware"),
    label("b", True, "sexual_content"),
    label("c", True, "harassment"),
    label("d", False),
    label("e", True, "sexual_content"),
    label("f", True),  # violating, reason not given
    label("g", False),  # no decision
]
CONTENTS = [facts("a", "public_post"), facts("b", "comment"), facts("c", "comment", "US")]
TASKS = [{"content_id": v, "content_version": 1} for v in ("b", "e", "i", "z")]


@pytest.fixture(scope="module")
def result() -> EvalResult:
    return evaluate(DECISIONS, CONTENTS, TASKS, merge(LABELS, []), samples=5)


def rows(result: EvalResult) -> dict[str, ReasonRow]:
    return {row.reason: row for row in result.reasons}


def test_the_graded_decision_is_the_latest_before_any_human_one() -> None:
    predictions = automated_predictions(DECISIONS)
    graded = {v[0]: (p.decision_revision, p.outcome) for v, p in predictions.items()}
    assert graded == {
        "a": (2, "BLOCK"),
        "b": (1, "RESTRICT"),
        "c": (1, "ALLOW"),  # the review (2) and the sticky re-evaluation after it (3) are not
        "d": (1, "BLOCK"),  # the delete is not a judgement
        "e": (1, "PENDING"),
        "f": (1, "BLOCK"),
        "h": (1, "ALLOW"),
    }  # "i": only a human decision, nothing automated to grade
    assert predictions[("a", 1)].model_versions == ("media_check-1", "nsfw_image-1")


def test_precision_and_recall_per_reason_by_hand(result: EvalResult) -> None:
    found = {r.reason: (r.tp, r.fp, r.fn, r.precision, r.recall) for r in result.reasons}
    assert result.reasons[0].reason == ANY
    assert found == {
        ANY: (3, 1, 2, 0.75, 0.6),  # tp a b f, fp d, fn c (ALLOW) e (PENDING is no prediction)
        "harassment": (0, 0, 1, None, 0.0),  # f has no label reason: graded only under (any)
        "malware": (1, 1, 0, 0.5, 1.0),
        "mature_content": (0, 1, 0, 0.0, None),  # b is labelled sexual_content: one vs rest
        "sexual_content": (1, 0, 1, 1.0, 0.5),
    }


def test_mistakes_are_listed_by_id(result: EvalResult) -> None:
    by_reason = rows(result)
    assert by_reason[ANY].false_positives == (("d", 1),)
    assert by_reason[ANY].false_negatives == (("c", 1), ("e", 1))
    assert by_reason["mature_content"].false_positives == (("b", 1),)


def test_samples_are_capped() -> None:
    capped = evaluate(DECISIONS, CONTENTS, TASKS, merge(LABELS, []), samples=1)
    assert rows(capped)[ANY].false_negatives == (("c", 1),)


def test_rates_and_coverage(result: EvalResult) -> None:
    assert (result.versions, result.blocked, result.reviewed) == (7, 3, 2)  # a d f; b e
    assert result.block_rate == pytest.approx(3 / 7)
    assert result.review_rate == pytest.approx(2 / 7)
    coverage = result.coverage
    assert (coverage.labels, coverage.matched, coverage.unmatched) == (7, 6, 1)
    assert coverage.unmatched_samples == (("g", 1),)


def test_slices_by_surface_model_and_policy_version(result: EvalResult) -> None:
    found = {(row.dimension, row.value): row for row in result.slices}
    comment = found[("surface", "comment")]  # b (tp), c (fn)
    assert (comment.versions, comment.labelled, comment.tp, comment.fp, comment.fn) == (
        2, 2, 1, 0, 1,
    )  # fmt: skip
    assert comment.review_rate == 0.5 and comment.block_rate == 0.0
    unknown = found[("surface", UNKNOWN)]  # d e f h: no content facts
    assert (unknown.versions, unknown.blocked, unknown.fp, unknown.fn) == (4, 2, 1, 1)
    assert found[("region", "US")].fn == 1
    # a counts under both of its model versions; f under its own; none: no evidence
    assert found[("model_version", "media_check-1")].tp == 1
    assert found[("model_version", "nsfw_image-1")].versions == 6  # a b c d e h
    assert found[("model_version", "offensive_text-1")].tp == 1
    assert found[("policy_version", "2")].versions == 1  # f; c's v2 revision is not graded
    assert NO_MODEL not in {row.value for row in result.slices}
    dimensions = [row.dimension for row in result.slices]
    order = ["surface", "region", "modality", "model_version", "policy_version"]
    assert dimensions == sorted(dimensions, key=order.index)


def test_undefined_figures_print_as_a_dash(result: EvalResult) -> None:
    table = format_table(result)
    lines = {line.split()[0]: line.split() for line in table.splitlines() if line.strip()}
    assert lines["harassment"][-2:] == ["-", "0.00"]
    assert lines["mature_content"][-2:] == ["0.00", "-"]
    assert lines[ANY][1:] == ["3", "1", "2", "0.75", "0.60"]
    assert "false negatives, (any): c v1, e v1" in table
    assert "block rate 42.9%, review rate 28.6%" in table
    assert "by surface:" in table and "by policy version:" in table


def test_nothing_to_grade_gives_dashes_not_errors() -> None:
    empty = evaluate([], [], [], LabelSet({}, 0, 0, 0, 0))
    assert [(r.reason, r.precision, r.recall) for r in empty.reasons] == [(ANY, None, None)]
    assert empty.block_rate is None and empty.slices == ()
    table = format_table(empty)
    assert "block rate -, review rate -" in table
    assert empty.to_dict()["reasons"][0]["precision"] is None


def test_ids_sort_as_people_count() -> None:
    versions = [("c7-24", 1), ("c7-3", 2), ("banked-1", 1), ("c7-3", 1), ("a1", 1), ("a", 1)]
    assert sorted(versions, key=natural) == [
        ("a", 1), ("a1", 1), ("banked-1", 1), ("c7-3", 1), ("c7-3", 2), ("c7-24", 1),
    ]  # fmt: skip
