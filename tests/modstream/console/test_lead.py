"""The lead view's figures from real records (the ones the console and the review command
write): throughput per reviewer over the hour and the day, second-review agreement per queue and
pair, the access log searched by reviewer, content id and action, and what is held bounded."""

from __future__ import annotations

import json
from typing import Any

import pytest

from modstream.console import lead
from modstream.console.evidence import access_record
from modstream.console.lead import AccessQuery, ReviewActivity, search_access, throughput
from modstream.console.permissions import admit_signed
from modstream.review.queue import decision_record
from modstream.testing.records import T0
from modstream.trust.keyring import Keyring
from modstream.trust.signing import signed

KEYRING = Keyring(dev_secret=b"console-lead-test")
MINUTE = 60_000


def all_granted(reviewer_id: str, queue: str, ts: int) -> bool:
    return True


def task(task_id: str, content_id: str, queue: str = "adult", of_task: str = "") -> dict[str, Any]:
    record = {"task_id": task_id, "content_id": content_id, "content_version": 1, "queue": queue}
    if of_task:
        record["second_review"] = {"round": "second", "of_task": of_task}
    return record


def decided(reviewer: str, of: dict[str, Any], outcome: str, ts: int) -> dict[str, Any]:
    return decision_record(of, reviewer, outcome, "", ts)


def test_throughput_counts_each_reviewers_decisions_in_the_hour_and_the_day() -> None:
    now = T0 + lead.DAY_MS
    a = task("t-1", "c-1")
    decisions = [
        decided("carol", a, "BLOCK", now - 5 * MINUTE),
        decided("carol", a, "BLOCK", now - 5 * MINUTE),  # the same record read twice
        decided("carol", task("t-2", "c-2"), "ALLOW", now - 3 * lead.HOUR_MS),
        decided("erin", task("t-3", "c-3"), "ALLOW", now - 59 * MINUTE),
        decided("erin", task("t-4", "c-4"), "ALLOW", now - 2 * MINUTE),
        decided("dave", task("t-5", "c-5"), "ALLOW", now - lead.DAY_MS),  # a day ago: out
        decided("dave", task("t-6", "c-6"), "ALLOW", now + MINUTE),  # in the future: out
    ]
    assert throughput(decisions, now) == [
        {"reviewer_id": "erin", "last_hour": 2, "last_day": 2},
        {"reviewer_id": "carol", "last_hour": 1, "last_day": 2},
    ]


def test_agreement_pairs_the_first_and_the_second_review_of_a_task_per_queue() -> None:
    activity = ReviewActivity()
    firsts = [task(f"t-{n}", f"c-{n}") for n in range(4)]
    seconds = [task(f"s-{n}", f"c-{n}", of_task=f"t-{n}") for n in range(4)]
    for record in firsts + seconds:
        activity.add_task(record)
    for n, (first, second) in enumerate(
        [("BLOCK", "BLOCK"), ("ALLOW", "ALLOW"), ("BLOCK", "ALLOW"), ("ALLOW", "ALLOW")]
    ):
        activity.add_decision(decided("carol", firsts[n], first, T0 + n))
        activity.add_decision(decided("erin", seconds[n], second, T0 + 100 + n))
    [row] = activity.view(T0 + 1_000, AccessQuery(), all_granted)["agreement"]
    assert (row["queue"], row["pair"], row["items"], row["agreed"]) == ("adult", "carol,erin", 4, 3)
    assert row["kappa"] == pytest.approx(0.5)


def test_only_a_decision_signed_as_the_job_requires_is_admitted() -> None:
    record = signed("review.decisions", decided("carol", task("t-1", "c-1"), "BLOCK", T0), KEYRING)
    admitted, refusal = admit_signed("review.decisions", json.dumps(record).encode(), KEYRING)
    assert admitted == record and refusal is None
    forged = record | {"outcome": "ALLOW"}
    admitted, refusal = admit_signed("review.decisions", json.dumps(forged).encode(), KEYRING)
    assert admitted is None and "does not verify" in (refusal or "")


ACCESS = [
    access_record("carol", "claim", T0, task("t-1", "c-1")),
    access_record("carol", "reveal", T0 + 2, task("t-1", "c-1"), evidence_ref="file:///m/a.png"),
    access_record("erin", "reveal", T0 + 3, task("t-2", "c-2"), evidence_ref="file:///m/b.png"),
    access_record("carol", "decide", T0 + 4, task("t-1", "c-1"), outcome="BLOCK", note="nudity"),
    access_record("dave", "refused", T0 + 5, detail="reviewer dave holds no grant"),
]


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        (AccessQuery(), [("dave", "refused"), ("carol", "decide"), ("erin", "reveal"),
                         ("carol", "reveal"), ("carol", "claim")]),
        (AccessQuery(reviewer_id="carol"), [("carol", "decide"), ("carol", "reveal"),
                                            ("carol", "claim")]),
        (AccessQuery(action="reveal"), [("erin", "reveal"), ("carol", "reveal")]),
        (AccessQuery(reviewer_id="carol", content_id="c-1", action="reveal"),
         [("carol", "reveal")]),
        (AccessQuery(content_id="c-2", action="claim"), []),
        (AccessQuery(limit=2), [("dave", "refused"), ("carol", "decide")]),
    ],
)  # fmt: skip
def test_the_access_log_is_searched_newest_first(
    query: AccessQuery, expected: list[tuple[str, str]]
) -> None:
    found = search_access(list(reversed(ACCESS)), query)
    assert [(a["reviewer_id"], a["action"]) for a in found] == expected


def test_a_query_from_a_page_keeps_its_three_fields_and_says_what_it_searched() -> None:
    query = AccessQuery.of({"reviewer_id": " carol ", "action": "reveal", "other": "x"})
    assert query == AccessQuery(reviewer_id="carol", action="reveal")
    assert query.described() == "reviewer_id=carol action=reveal"
    assert AccessQuery.of({}).described() == "all"


def test_what_is_held_is_bounded_to_the_newest(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(lead, "TASKS_KEPT", 3)
    activity = ReviewActivity()
    for n in range(5):
        activity.add_task(task(f"t-{n}", f"c-{n}"))
    assert list(activity.tasks) == ["t-2", "t-3", "t-4"]
    assert activity.access.maxlen == lead.ACCESS_KEPT
    assert activity.decisions.maxlen == lead.DECISIONS_KEPT


def test_queues_with_the_longest_wait_come_first() -> None:
    backlog = {
        "adult": {"depth": 2, "oldest_age_ms": 10},
        "text": {"depth": 1, "oldest_age_ms": 50},
    }
    assert [row["queue"] for row in lead.backlog_rows(backlog)] == ["text", "adult"]


def test_a_decision_without_a_grant_or_on_a_task_not_held_is_not_counted() -> None:
    activity = ReviewActivity()
    adult, text = task("t-1", "c-1"), task("t-2", "c-2", queue="text")
    activity.add_task(adult)
    activity.add_task(text)
    for reviewer, of in (("carol", adult), ("dave", adult), ("dave", text)):
        activity.add_decision(decided(reviewer, of, "BLOCK", T0))
    activity.add_decision(decided("carol", task("t-9", "c-9"), "BLOCK", T0))  # not held

    def granted(reviewer_id: str, queue: str, ts: int) -> bool:
        return (reviewer_id, queue) in {("carol", "adult"), ("dave", "text")} and ts >= T0

    counted = activity.view(T0 + MINUTE, AccessQuery(), granted)["throughput"]
    assert [(row["reviewer_id"], row["last_day"]) for row in counted] == [("carol", 1), ("dave", 1)]
