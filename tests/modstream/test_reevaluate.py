"""Selecting what to re-evaluate, and pacing the requests."""

from __future__ import annotations

import json

from modstream.reevaluate import Selection, paced, requests, select


def decision(
    cid: str,
    revision: int,
    version: int,
    state: str = "approved",
    ts: int = 10,
    policy_id: str = "global",
) -> dict:
    return {
        "content_id": cid,
        "content_version": 1,
        "decision_revision": revision,
        "policy_id": policy_id,
        "policy_version": version,
        "state": state,
        "ts": ts,
    }


def test_only_versions_whose_latest_decision_predates_the_policy() -> None:
    decisions = [
        decision("a", 1, 1),
        decision("a", 2, 2),  # already under v2
        decision("b", 1, 1),  # selected
        decision("c", 1, 1),
        decision("c", 2, 1, "deleted"),  # deleted: never
        decision("d", 1, 1, ts=1),  # too old for --since
        decision("e", 1, 1, policy_id="other"),  # another policy
        decision("f", 1, 1),  # filtered by surface
    ]
    uploads = {("b", 1): {"surface": "comment"}, ("f", 1): {"surface": "dm"}}
    chosen = select(decisions, uploads, Selection("global", 2, since_ts=5, surface="comment"))
    assert chosen == [("b", 1)]
    assert select(decisions, {}, Selection("global", 2, since_ts=5)) == [("b", 1), ("f", 1)]


def test_requests_have_deterministic_event_ids_and_are_schema_valid() -> None:
    from schemas import parse

    produced = list(requests([("b", 1)], Selection("global", 2), ts=99))
    key, value = produced[0]
    record = json.loads(value)
    assert key == "b"
    assert record["event_id"] == "reeval-global-v2-b-1"
    parse("moderation.reevaluate", value)


def test_pacing_bounds_the_rate() -> None:
    now = [0.0]
    slept: list[float] = []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        now[0] += seconds

    items = list(paced(iter(range(11)), 5.0, sleep=sleep, clock=lambda: now[0]))
    assert items == list(range(11))
    assert abs(now[0] - 2.0) < 1e-9  # 11 items at 5/s: the last one at t = 2 s
