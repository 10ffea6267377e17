"""Cost per decision by policy version and workflow version (issue 29 item 5): what deciding a
content version took, so a policy or workflow release can be judged by its cost as well as its
outcomes. docs/ANALYSTS.md, "Cost per decision", has the definitions; in short, per content
version decided, attributed to the policy_version and workflow_version of its latest revision:

- detector calls: its detector.results (distinct event_id, any status: a timeout was a call);
- inference ms: their `inference_ms` (each result's share of its batch's model call, written by
  the scan job; results of other producers have none and count 0);
- review minutes: per review task (distinct task_id), from the task's `ts` to the first
  review.decisions record naming it; a task still open counts 0. Task to decision, queue wait
  included: review.leases (the claim) are not archived, so this bounds the reviewer's time
  from above;
- re-evaluations: its revisions made by `reevaluation` or `policy_change`.

Two implementations of one definition, checked against each other in
tests/modstream/test_cost.py: `cost_per_decision` over records (the demo summary, read from the
topics) and `VIEW` over the archive (DuckDB: the `cost_per_decision` view, the report);
deploy/sql/queries/cost_per_decision.sql is the same over the topics in Flink SQL.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

REEVALUATING = ("reevaluation", "policy_change")
MS_PER_MINUTE = 60_000


@dataclass(frozen=True)
class Cost:
    """The cost of the decisions of one (policy_version, workflow_version): totals, and per
    decision (a content version decided)."""

    policy_version: int
    workflow_version: int | None  # None: revisions written before it was carried
    decisions: int
    detector_calls: int
    inference_ms: int
    review_minutes: float
    reevaluations: int

    def per_decision(self) -> dict[str, float]:
        return {
            "detector_calls": round(self.detector_calls / self.decisions, 3),
            "inference_ms": round(self.inference_ms / self.decisions, 3),
            "review_minutes": round(self.review_minutes / self.decisions, 3),
            "reevaluations": round(self.reevaluations / self.decisions, 3),
        }


Version = tuple[str, int]


def cost_per_decision(
    decisions: Iterable[Mapping[str, Any]],
    results: Iterable[Mapping[str, Any]],
    tasks: Iterable[Mapping[str, Any]],
    reviews: Iterable[Mapping[str, Any]],
) -> list[Cost]:
    """Cost per (policy_version, workflow_version), ordered by them (None first)."""
    latest: dict[Version, Mapping[str, Any]] = {}
    reevaluations: dict[Version, int] = defaultdict(int)
    for decision in decisions:
        version = (decision["content_id"], decision["content_version"])
        known = latest.get(version)
        if known is None or decision["decision_revision"] > known["decision_revision"]:
            latest[version] = decision
        if decision["trigger"] in REEVALUATING:
            reevaluations[version] += 1
    calls: dict[Version, dict[str, int]] = defaultdict(dict)
    for result in results:
        ms = result.get("inference_ms")
        calls[(result["content_id"], result["content_version"])][result["event_id"]] = (
            ms if isinstance(ms, int) else 0
        )
    answered: dict[str, int] = {}  # task_id -> its first review decision's ts
    for review in reviews:
        answered[review["task_id"]] = min(
            review["ts"], answered.get(review["task_id"], review["ts"])
        )
    opened: dict[Version, dict[str, int]] = defaultdict(dict)  # task_id -> its first ts
    for task in tasks:
        book = opened[(task["content_id"], task["content_version"])]
        book[task["task_id"]] = min(task["ts"], book.get(task["task_id"], task["ts"]))
    totals: dict[tuple[int, int | None], list[float]] = defaultdict(lambda: [0, 0, 0, 0.0, 0])
    for version, decision in latest.items():
        group = totals[(int(decision["policy_version"]), decision.get("workflow_version"))]
        group[0] += 1
        group[1] += len(calls[version])
        group[2] += sum(calls[version].values())
        group[3] += sum(
            max(0, answered[task_id] - ts) / MS_PER_MINUTE
            for task_id, ts in opened[version].items()
            if task_id in answered
        )
        group[4] += reevaluations[version]
    return [
        Cost(policy, workflow, int(n), int(found), int(ms), round(minutes, 3), int(again))
        for (policy, workflow), (n, found, ms, minutes, again) in sorted(
            totals.items(), key=lambda item: (item[0][0], item[0][1] or 0)
        )
    ]


# The archive's view (modstream/analytics/streams.py registers it): one row per (policy_version,
# workflow_version), totals and per decision, as `cost_per_decision` computes them.
VIEW = """
WITH latest AS (
  SELECT content_id, content_version,
    arg_max(policy_version, decision_revision) AS policy_version,
    arg_max_null(workflow_version, decision_revision) AS workflow_version,
    count(*) FILTER (WHERE "trigger" IN ('reevaluation', 'policy_change')) AS reevaluations
  FROM decisions GROUP BY content_id, content_version
),
calls AS (
  SELECT content_id, content_version, count(*) AS detector_calls,
    sum(coalesce(inference_ms, 0)) AS inference_ms
  FROM (SELECT DISTINCT ON (content_id, content_version, event_id) * FROM detector_results)
  GROUP BY content_id, content_version
),
answered AS (SELECT task_id, min(ts) AS ts FROM review_decisions GROUP BY task_id),
reviewed AS (
  SELECT t.content_id, t.content_version,
    sum(greatest(0, a.ts - t.ts) / 60000.0) AS review_minutes
  FROM (SELECT content_id, content_version, task_id, min(ts) AS ts FROM review_tasks
        GROUP BY content_id, content_version, task_id) AS t
  JOIN answered AS a ON a.task_id = t.task_id
  GROUP BY t.content_id, t.content_version
)
SELECT l.policy_version, l.workflow_version,
  count(*) AS decisions,
  coalesce(sum(c.detector_calls), 0)::BIGINT AS detector_calls,
  coalesce(sum(c.inference_ms), 0)::BIGINT AS inference_ms,
  round(coalesce(sum(r.review_minutes), 0), 3) AS review_minutes,
  sum(l.reevaluations)::BIGINT AS reevaluations,
  round(coalesce(sum(c.detector_calls), 0) / count(*), 3) AS detector_calls_per_decision,
  round(coalesce(sum(c.inference_ms), 0) / count(*), 3) AS inference_ms_per_decision,
  round(coalesce(sum(r.review_minutes), 0) / count(*), 3) AS review_minutes_per_decision,
  round(sum(l.reevaluations) / count(*), 3) AS reevaluations_per_decision
FROM latest AS l
LEFT JOIN calls AS c USING (content_id, content_version)
LEFT JOIN reviewed AS r USING (content_id, content_version)
GROUP BY l.policy_version, l.workflow_version
ORDER BY l.policy_version, coalesce(l.workflow_version, 0)
"""
