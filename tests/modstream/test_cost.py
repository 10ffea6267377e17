"""modstream/analytics/cost.py: cost per decision by policy and workflow version, on hand-made
records, and the archive's cost_per_decision view giving what the records give."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from modstream.analytics import cost
from modstream.analytics import streams as analytics
from modstream.contract.workflow import WORKFLOW_VERSION
from modstream.testing import archive as archive_data
from modstream.testing.records import T0, evidence

MINUTE = 60_000


def _decision(content_id: str, revision: int, trigger: str, policy: int, **extra: Any) -> Any:
    return {"content_id": content_id, "content_version": 1, "decision_revision": revision,
            "trigger": trigger, "policy_version": policy, "ts": T0 + revision, **extra}  # fmt: skip


def _task(task_id: str, content_id: str, at: int) -> dict[str, Any]:
    return {"task_id": task_id, "content_id": content_id, "content_version": 1, "ts": at}


def test_cost_is_per_version_decided_under_its_latest_revisions_versions() -> None:
    decisions = [
        _decision("a", 1, "fast_gate", 3, workflow_version=2),
        _decision("a", 2, "evidence", 3, workflow_version=2),
        _decision("a", 3, "policy_change", 4, workflow_version=2),  # a counts under policy 4
        _decision("b", 1, "fast_gate", 3, workflow_version=2),
        _decision("b", 2, "reevaluation", 3, workflow_version=2),
        _decision("c", 1, "fast_gate", 3),  # written before workflow_version was carried
    ]
    results = [
        evidence("a", T0, event_id="r1", inference_ms=12),
        evidence("a", T0, event_id="r1", inference_ms=12),  # a duplicate: one call
        evidence("a", T0, event_id="r2", detector="nsfw_image", status="timeout", scores=None),
        evidence("b", T0, event_id="r3", inference_ms=5),
        evidence("b", T0, event_id="r4"),  # another producer's: no inference_ms
        evidence("z", T0, event_id="r5", inference_ms=99),  # no decision: not counted
    ]
    tasks = [_task("t1", "b", T0), _task("t1", "b", T0 + MINUTE), _task("t2", "b", T0),
             _task("t3", "c", T0)]  # fmt: skip
    reviews = [{"task_id": "t1", "ts": T0 + 3 * MINUTE}, {"task_id": "t1", "ts": T0 + 9 * MINUTE},
               {"task_id": "t3", "ts": T0 + MINUTE // 2}]  # t2 is still open  # fmt: skip
    found = cost.cost_per_decision(decisions, results, tasks, reviews)
    assert found == [
        cost.Cost(3, None, 1, 0, 0, 0.5, 0),
        cost.Cost(3, 2, 1, 2, 5, 3.0, 1),
        cost.Cost(4, 2, 1, 2, 12, 0.0, 1),
    ]
    assert found[1].per_decision() == {
        "detector_calls": 2, "inference_ms": 5, "review_minutes": 3, "reevaluations": 1,
    }  # fmt: skip
    assert cost.cost_per_decision([], results, tasks, reviews) == []


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    where = tmp_path_factory.mktemp("archive")
    archive_data.build(where)
    return where


def test_the_archives_view_is_what_the_records_give(root: Path) -> None:
    records = archive_data.records()

    def valid(topic: str) -> list[dict[str, Any]]:
        return [r for r in records[topic] if isinstance(r, dict) and "content_id" in r]

    results = [r for r in valid("detector.results") if "detector" in r]
    expected = cost.cost_per_decision(
        valid("moderation.decisions"), results, valid("review.tasks"), valid("review.decisions")
    )
    assert [c.workflow_version for c in expected]
    assert all(c.workflow_version == WORKFLOW_VERSION for c in expected)
    assert sum(c.detector_calls for c in expected) > 0
    con = analytics.connect(root=root)
    view = con.sql(
        "SELECT policy_version, workflow_version, decisions, detector_calls, inference_ms, "
        "review_minutes, reevaluations FROM cost_per_decision"
    ).fetchall()
    assert [tuple(row) for row in view] == [
        (c.policy_version, c.workflow_version, c.decisions, c.detector_calls, c.inference_ms,
         pytest.approx(c.review_minutes, abs=1e-3), c.reevaluations)
        for c in expected
    ]  # fmt: skip
