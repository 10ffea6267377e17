"""The labels file's format, reviewers' decisions as labels, and which label wins."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from modstream.analytics.labels import (
    Label,
    LabelsError,
    merge,
    parse_labels,
    read_labels,
    refused_event_ids,
    review_labels,
    with_id_prefix,
)

GOOD = '{"content_id": "c7-1", "content_version": 1, "violating": true, "reason": "malware"}'
RULE_REASONS = frozenset({"malware", "sexual_content", "harassment"})


def test_a_file_of_labels_reads_in_order_and_skips_blank_lines(tmp_path: Path) -> None:
    path = tmp_path / "labels.jsonl"
    path.write_text(
        GOOD
        + "\n\n"
        + '{"content_id": "c7-2", "content_version": 3, "violating": false, "labeler": "ana"}\n'
    )
    first, second = read_labels(path)
    assert first == Label("c7-1", 1, True, "malware", "file")
    assert second == Label("c7-2", 3, False, None, "file", "ana")


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        ("not json", "not a JSON object"),
        ("[1, 2]", "not a JSON object"),
        ('{"content_version": 1, "violating": true}', "content_id must be"),
        ('{"content_id": "", "content_version": 1, "violating": true}', "content_id must be"),
        ('{"content_id": "a", "content_version": "1", "violating": true}', "content_version must"),
        ('{"content_id": "a", "content_version": true, "violating": true}', "content_version must"),
        ('{"content_id": "a", "content_version": 0, "violating": true}', "1 or more"),
        ('{"content_id": "a", "content_version": 1, "violating": 1}', "violating must be"),
        ('{"content_id": "a", "content_version": 1}', "violating must be"),
        ('{"content_id": "a", "content_version": 1, "violating": true, "reason": 3}', "reason"),
        ('{"content_id": "a", "content_version": 1, "violating": false, "reason": "x"}', "not"),
        ('{"content_id": "a", "content_version": 1, "violating": true, "labeler": 2}', "labeler"),
        ('{"content_id": "a", "content_version": 1, "violating": true, "reson": "x"}', "'reson'"),
        (
            '{"content_id": "a", "content_id": "b", "content_version": 1, "violating": true}',
            "twice",
        ),
    ],
)
def test_a_bad_line_is_an_error_naming_file_and_line(line: str, problem: str) -> None:
    with pytest.raises(LabelsError) as error:
        parse_labels([GOOD, "", line], "gold.jsonl")
    assert str(error.value).startswith("gold.jsonl:3: ")
    assert problem in str(error.value)


def test_a_version_labelled_twice_names_both_lines() -> None:
    with pytest.raises(LabelsError, match=r"gold.jsonl:2: c7-1 version 1 .*first at line 1"):
        parse_labels(
            [GOOD, GOOD.replace("true", "false").replace('"malware"', "null")], "gold.jsonl"
        )


def test_an_unreadable_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(LabelsError, match=r"missing\.jsonl"):
        read_labels(tmp_path / "missing.jsonl")


def test_the_id_prefix_goes_before_every_content_id() -> None:
    labels = with_id_prefix(parse_labels([GOOD]), "demo1a2b3c-")
    assert [label.version for label in labels] == [("demo1a2b3c-c7-1", 1)]


def review(content_id: str, outcome: str, reason: str = "", ts: int = 1, **extra: object) -> dict:
    return {
        "event_id": f"rv-{content_id}-{ts}",
        "content_id": content_id,
        "content_version": 1,
        "reviewer_id": "mod-1",
        "outcome": outcome,
        "reason": reason,
        "ts": ts,
        **extra,
    }


def test_reviews_become_labels_with_a_rule_reason_or_none() -> None:
    labels = review_labels(
        [
            review("a", "BLOCK", "malware"),
            review("b", "RESTRICT", "looked bad to me"),
            review("c", "ALLOW", "malware"),
            review("d", "PROVISIONAL_ALLOW"),
            review("e", "PENDING", "malware"),
        ],
        RULE_REASONS,
    )
    assert [(lab.content_id, lab.violating, lab.reason, lab.source) for lab in labels] == [
        ("a", True, "malware", "review"),
        ("b", True, None, "review"),
        ("c", False, None, "review"),
        ("d", False, None, "review"),
    ]  # PENDING is no verdict: no label for "e"


def test_the_latest_review_wins_and_refused_reviews_are_no_labels() -> None:
    rows = [
        review("a", "ALLOW", ts=9, _partition=0, _offset=7),  # the appeal's review, later
        review("a", "BLOCK", "malware", ts=5, _partition=0, _offset=3),
        review("b", "BLOCK", "malware", ts=5, _offset=1),
        review("b", "ALLOW", ts=5, _offset=2),  # same ts: the later offset
        review("c", "BLOCK", "malware", ts=1),
    ]
    refused = frozenset({"rv-c-1"})
    labels = {lab.content_id: lab.violating for lab in review_labels(rows, RULE_REASONS, refused)}
    assert labels == {"a": False, "b": False}


def test_refused_reviews_are_found_in_the_dlq_by_event_id() -> None:
    dlq = [
        {"source_topic": "demo1.review.decisions", "raw": json.dumps({"event_id": "rv-9"})},
        {"source_topic": "demo1.detector.results", "raw": json.dumps({"event_id": "ev-1"})},
        {"source_topic": "review.decisions", "raw": "not json"},
        {"source_topic": "review.decisions", "raw": None},
    ]
    assert refused_event_ids(dlq) == {"rv-9"}


def test_the_file_wins_over_a_review_and_disagreements_are_counted() -> None:
    file_labels = [
        Label("a", 1, True, "malware", "file"),
        Label("b", 1, False, None, "file"),
    ]
    reviews = [
        Label("a", 1, True, None, "review"),  # agrees (violating), reason aside
        Label("b", 1, True, "malware", "review"),  # disagrees
        Label("c", 1, False, None, "review"),
    ]
    merged = merge(file_labels, reviews)
    assert merged.labels[("a", 1)].reason == "malware"
    assert merged.labels[("b", 1)].source == "file"
    assert merged.labels[("c", 1)].source == "review"
    assert (merged.from_file, merged.from_reviews, merged.overlap, merged.disagree) == (2, 1, 2, 1)
