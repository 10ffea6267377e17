"""`modstream replay` of contract v1.1 cases (issue 12, items 1, 2 and 5), one replay:

- a reviewer's BLOCK 40 days after the version was decided (its full state expired after 30
  days) applies, with the next revision, and an action hides the content;
- a review for a version never decided goes to the DLQ as `stale`;
- a PROVISIONAL_ALLOW whose evidence never completes is decided again at its `expires_ts`
  (trigger `deadline`, state `expired`, PENDING) with a review task in queue `provisional`;
- a signed policy version that changes only a rule's restriction, then a re-evaluation: the
  restriction-only change emits an action;
- a signed policy version with `ALLOW` as its `scanning` outcome is refused (DLQ `policy`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from modstream.demo.workload import write
from modstream.review.queue import grant_record
from modstream.testing.policies import GLOBAL_YAML, global_document, version_record
from modstream.testing.records import T0, blocking_review, evidence, upload
from modstream.testing.stack import run_replay

pytestmark = pytest.mark.integration
KEY = "replay-v11-key"
DAY = 86_400_000
HOUR = 3_600_000
FREE_TEXT = "free text that is not a rule reason"
TEXT = {"modality": "text", "mime_type": "text/plain", "surface": "comment"}


def line(topic: str, value: dict[str, Any]) -> dict[str, Any]:
    return {"topic": topic, "value": value}


def events() -> list[dict[str, Any]]:
    rules = global_document()["rules"]
    for rule in rules:
        if rule["id"] == "offensive-limit":
            rule["restriction"] = "age_gate"
    restricted_v2 = version_record(
        global_document(2, rules=rules), ts=T0 + 2 * HOUR, key=KEY.encode(), event_id="p-v2"
    )
    allow_while_scanning = version_record(
        global_document(3, scanning={"high_risk": "PENDING", "default": "ALLOW"}),
        ts=T0 + 2 * HOUR + 1,
        key=KEY.encode(),
        event_id="p-v3",
    )
    lines = [
        line("content.versions", upload("reviewed-late", at=T0, **TEXT)),
        line("detector.results", evidence("reviewed-late", at=T0 + 10)),
        # A text (media is never provisional: issue 27) whose check never answers.
        line("content.versions", upload("provisional", at=T0, **TEXT)),
        line("content.versions", upload("restricted", at=T0, **TEXT)),
        line(
            "detector.results",
            evidence("restricted", at=T0 + 10, scores={"offensive": 0.9}),
        ),
        line("policy.rules", restricted_v2),
        line("policy.rules", allow_while_scanning),
        line(
            "moderation.reevaluate",
            {
                "event_id": "re-restricted",
                "content_id": "restricted",
                "content_version": 1,
                "reason": "policy v2",
                "ts": T0 + 3 * HOUR,
            },
        ),
        # alice's proactive reviews apply under her grant (modstream/review/access.py).
        line("review.grants", grant_record("alice", ["external"], "lead-1", T0)),
        line("review.decisions", blocking_review("never-uploaded", T0 + 3 * HOUR, FREE_TEXT)),
        line("review.decisions", blocking_review("reviewed-late", T0 + 40 * DAY, FREE_TEXT)),
    ]
    return sorted(lines, key=lambda item: item["value"]["ts"])


def test_contract_v11_cases_through_replay(tmp_path: Path) -> None:
    source = tmp_path / "events.jsonl"
    write(events(), source)
    out = run_replay(source, tmp_path / "out", GLOBAL_YAML, KEY, timeout_s=400)
    decisions: dict[str, list[dict[str, Any]]] = {}
    for decision in out["moderation.decisions"]:
        decisions.setdefault(decision["content_id"], []).append(decision)
    actions = out["moderation.actions"]

    # Item 1: a review 40 days later applies; one for a version never decided is stale.
    *before, late = decisions["reviewed-late"]
    assert before[-1]["outcome"] == "ALLOW"
    assert (late["trigger"], late["outcome"], late["ts"]) == ("review", "BLOCK", T0 + 40 * DAY)
    assert late["decision_revision"] == before[-1]["decision_revision"] + 1
    assert late["reasons"] == ["human_review"]
    hidden = [a for a in actions if a["content_id"] == "reviewed-late"][-1]
    assert (hidden["visibility"], hidden["decision_revision"]) == (
        "hidden",
        late["decision_revision"],
    )
    stale = [d for d in out["moderation.dlq"] if d["error_class"] == "stale"]
    assert [d["key"] for d in stale] == ["never-uploaded"]
    assert "free text" not in str(out.get("user.notifications", []))

    # Item 2: provisional is not forever.
    provisional = decisions["provisional"]
    expired = provisional[-1]
    assert provisional[-2]["outcome"] == "PROVISIONAL_ALLOW"
    assert (expired["trigger"], expired["state"], expired["outcome"], expired["ts"]) == (
        "deadline",
        "expired",
        "PENDING",
        provisional[-2]["expires_ts"],
    )
    assert any(
        t["content_id"] == "provisional" and t["queue"] == "provisional"
        for t in out["review.tasks"]
    )

    # Item 5: a restriction-only change emits an action; ALLOW while scanning is refused.
    restricted = decisions["restricted"]
    assert (restricted[-2]["restriction"], restricted[-1]["restriction"]) == (
        "reduced_reach",
        "age_gate",
    )
    assert restricted[-1]["trigger"] == "reevaluation" and restricted[-1]["policy_version"] == 2
    last_action = [a for a in actions if a["content_id"] == "restricted"][-1]
    assert (last_action["restriction"], last_action["visibility"]) == ("age_gate", "limited")
    refused = [d for d in out["moderation.dlq"] if d["error_class"] == "policy"]
    assert len(refused) == 1 and "ALLOW" in refused[0]["message"]
