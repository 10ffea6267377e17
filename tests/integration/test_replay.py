"""`modstream replay` on a Flink MiniCluster: contract outputs, identical at parallelism 1 and 2."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
import yaml

from modstream.contract import parse
from modstream.demo.workload import generate, write
from modstream.moderation.records import DEFAULT_NOTICES
from modstream.testing.policies import GLOBAL_YAML
from modstream.testing.stack import run_replay

pytestmark = pytest.mark.integration
KEY = "replay-test-key"


def replay(events: Path, out: Path, parallelism: int) -> dict[str, list[dict[str, Any]]]:
    return run_replay(events, out, GLOBAL_YAML, KEY, parallelism=parallelism, timeout_s=400)


@pytest.fixture(scope="module")
def outputs(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], dict[str, Any]]:
    base = tmp_path_factory.mktemp("replay")
    events = base / "events.jsonl"
    policy = yaml.safe_load(GLOBAL_YAML.read_text())
    write(generate(seed=11, versions=120, policy_document=policy, policy_key=KEY.encode()), events)
    return replay(events, base / "p1", 1), replay(events, base / "p2", 2)


def canonical(records: list[dict[str, Any]]) -> list[str]:
    return sorted(json.dumps(record, sort_keys=True) for record in records)


def test_parallelism_1_and_2_give_identical_sorted_outputs(
    outputs: tuple[dict[str, Any], dict[str, Any]],
) -> None:
    one, two = outputs
    assert set(one) == set(two)
    for topic in one:
        assert canonical(one[topic]) == canonical(two[topic]), topic
    assert len(one["moderation.decisions"]) > 120


def test_every_output_follows_the_contract(outputs: tuple[dict[str, Any], dict[str, Any]]) -> None:
    one, _ = outputs
    for topic, records in one.items():
        for record in records:
            parse(topic, json.dumps(record))
    revisions: dict[tuple[str, int], list[int]] = defaultdict(list)
    for decision in one["moderation.decisions"]:
        revisions[(decision["content_id"], decision["content_version"])].append(
            decision["decision_revision"]
        )
    for key, seen in revisions.items():
        assert sorted(seen) == list(range(1, len(seen) + 1)), key
    firsts = [d for d in one["moderation.decisions"] if d["decision_revision"] == 1]
    assert {d["trigger"] for d in firsts} == {"fast_gate"}
    for decision in one["moderation.decisions"]:
        if decision["outcome"] == "ALLOW":
            completeness = decision["completeness"]
            assert completeness["received"] == completeness["required"]
            assert completeness["unknown"] == []


def test_contract_rules_hold_in_the_replayed_workload(
    outputs: tuple[dict[str, Any], dict[str, Any]],
) -> None:
    one, _ = outputs
    decisions = one["moderation.decisions"]
    by_id: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for decision in decisions:
        by_id[decision["content_id"]].append(decision)
    banked = by_id["banked-1"]
    assert (banked[0]["trigger"], banked[0]["outcome"]) == ("fast_gate", "BLOCK")
    expired = [d for d in decisions if d["state"] == "expired"]
    assert expired and all(
        d["trigger"] == "deadline" and d["completeness"]["unknown"] for d in expired
    )
    assert any(d["trigger"] == "appeal" and d["outcome"] == "ALLOW" for d in decisions)
    assert any(d["trigger"] == "delete" and d["state"] == "deleted" for d in decisions)
    assert any(t["task_id"] == "appeal-a1" and t["kind"] == "appeal" for t in one["review.tasks"])
    by_queue: dict[str, set[str]] = defaultdict(set)
    for task in one["review.tasks"]:
        by_queue[task["queue"]].add(task["content_id"])
    assert by_queue["reports"] == {"c11-2"}  # three established reporters
    assert by_queue["brigading"] == {"c11-8"}  # a burst of new reporters
    assert "c11-9" not in by_queue["reports"]  # the flooder's report over its limit did not count
    classes = sorted(letter["error_class"] for letter in one["moderation.dlq"])
    assert classes.count("conflict") == 1  # the second appeal while the first is active
    assert classes.count("schema") == 4
    shadows = one["moderation.shadow"]
    assert shadows and all(s["shadow"] is True and s["policy_version"] == 2 for s in shadows)
    edits = [d for d in decisions if d["content_version"] == 2]
    assert edits and edits[0]["trigger"] == "fast_gate"


def test_strikes_and_notices_follow_the_contract(
    outputs: tuple[dict[str, Any], dict[str, Any]],
) -> None:
    one, _ = outputs
    sanctions = one["account.actions"]
    strikes = [s for s in sanctions if s["sanction"] == "strike"]
    assert strikes
    # One offense, one strike: never twice for one user's content item.
    assert len({(s["user_id"], s["content_id"]) for s in strikes}) == len(strikes)
    assert len({s["action_id"] for s in sanctions}) == len(sanctions)
    # A human ALLOW on a struck item reverses its strike: the appeal granted, or a review that
    # overturns the model's BLOCK (the workload's second-reviewed versions: one of them is a
    # struck item under some seeds).
    granted = {
        d["content_id"]
        for d in one["moderation.decisions"]
        if d["trigger"] in ("appeal", "review") and d["outcome"] == "ALLOW"
    }
    reversed_items = {s["content_id"] for s in sanctions if s["sanction"] == "strike_reversed"}
    assert reversed_items and reversed_items <= granted
    appealed = {d["content_id"] for d in one["moderation.decisions"] if d["trigger"] == "appeal"}
    assert reversed_items & appealed  # the extras' granted appeal among them
    # One notice per visible change (the author's own delete excepted), policy text only.
    actions = one["moderation.actions"]
    deleted = {
        (d["content_id"], d["content_version"], d["decision_revision"])
        for d in one["moderation.decisions"]
        if d["state"] == "deleted"
    }
    notices = one["user.notifications"]
    assert sorted(
        (n["content_id"], n["content_version"], n["decision_revision"]) for n in notices
    ) == sorted(
        (a["content_id"], a["content_version"], a["decision_revision"])
        for a in actions
        if (a["content_id"], a["content_version"], a["decision_revision"]) not in deleted
    )
    # Fixed text only, never the content: the policy's notices, or the fallback per outcome
    # where the policy has none for the reasons (a reviewer's BLOCK: reason `human_review`).
    texts = set(yaml.safe_load(GLOBAL_YAML.read_text())["notices"].values())
    texts |= set(DEFAULT_NOTICES.values())
    blocked = [n for n in notices if n["outcome"] == "BLOCK"]
    bad = [n for n in blocked if not (n["message"] in texts and n["appeal_allowed"])]
    assert blocked and not bad, bad
