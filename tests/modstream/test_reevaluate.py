"""Selecting what to re-evaluate, and pacing the requests."""

from __future__ import annotations

import json
from typing import Any

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


def test_run_skips_malformed_decisions_and_uploads_with_a_warning(monkeypatch: Any) -> None:
    from kafka.consumer.fetcher import ConsumerRecord

    from modstream import kafkaio, reevaluate
    from tests.conftest import upload

    def full(cid: str, version: int) -> dict[str, Any]:
        return {
            **decision(cid, 1, version),
            "decision_id": f"d-{cid}",
            "outcome": "ALLOW",
            "reasons": [],
            "matched_rules": [],
            "evidence": [],
            "completeness": {"required": 0, "received": 0, "unknown": []},
            "trigger": "evidence",
        }

    def rec(value: bytes) -> ConsumerRecord:
        return ConsumerRecord("t", 0, 0, 0, 0, 0, None, value, [], None, -1, len(value), -1)

    topics = {
        "moderation.decisions": [
            rec(json.dumps(full("b", 1)).encode()),
            rec(b"[" * 50_000),
            rec(json.dumps({**full("x", 1), "decision_revision": "one"}).encode()),
            rec(json.dumps({"content_id": "y"}).encode()),
            rec(json.dumps(full("c", 1)).encode()),
        ],
        "content.versions": [
            rec(json.dumps(upload("b", surface="comment")).encode()),
            rec(b"{broken"),
            rec(json.dumps(upload("c", surface="dm")).encode()),
        ],
    }
    monkeypatch.setattr(kafkaio, "read_to_end", lambda servers, topic, **kw: topics[topic])
    produced: list[tuple[str, list[Any]]] = []
    monkeypatch.setattr(
        kafkaio, "produce", lambda s, topic, items: produced.append((topic, list(items))) or 1
    )
    said: list[str] = []
    code = reevaluate.run(
        "unused:1",
        Selection("global", 2, surface="comment"),
        rate_per_s=1000,
        ts=99,
        say=said.append,
    )
    assert code == 0
    assert [key for key, _ in produced[0][1]] == ["b"]
    assert "reevaluate: moderation.decisions: skipped 3 malformed record(s) of 5" in said
    assert "reevaluate: content.versions: skipped 1 malformed record(s) of 3" in said
