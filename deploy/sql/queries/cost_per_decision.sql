-- Cost per decision by policy and workflow version (issue 29 item 5; modstream/analytics/cost.py, the
-- archive's cost_per_decision view, defines the same): per content version decided, under its
-- latest revision's policy_version and workflow_version, its detector calls (detector.results,
-- one per event_id, any status), their inference_ms (the scan job's share of each model call;
-- 0 for other producers' results), the minutes from each review task to the first
-- review.decisions record naming it (queue wait included; open tasks count 0), and its
-- revisions made by reevaluation or policy_change. Totals and per decision.
WITH revisions AS (
  SELECT content_id, content_version, decision_revision, policy_version, workflow_version,
    `trigger`,
    ROW_NUMBER() OVER (
      PARTITION BY content_id, content_version ORDER BY decision_revision DESC) AS newest
  FROM moderation_decisions
  WHERE content_id IS NOT NULL AND content_version IS NOT NULL AND decision_revision IS NOT NULL
    AND policy_version IS NOT NULL
),
reevaluated AS (
  SELECT content_id, content_version,
    SUM(CASE WHEN `trigger` IN ('reevaluation', 'policy_change') THEN 1 ELSE 0 END)
      AS reevaluations
  FROM revisions
  GROUP BY content_id, content_version
),
latest AS (
  SELECT r.content_id, r.content_version, r.policy_version, r.workflow_version, e.reevaluations
  FROM revisions AS r
  JOIN reevaluated AS e ON r.content_id = e.content_id AND r.content_version = e.content_version
  WHERE r.newest = 1
),
results AS (
  SELECT content_id, content_version, event_id, MAX(COALESCE(inference_ms, 0)) AS inference_ms
  FROM detector_results
  WHERE content_id IS NOT NULL AND content_version IS NOT NULL AND event_id IS NOT NULL
  GROUP BY content_id, content_version, event_id
),
calls AS (
  SELECT content_id, content_version, COUNT(*) AS detector_calls,
    SUM(inference_ms) AS inference_ms
  FROM results
  GROUP BY content_id, content_version
),
tasks AS (
  SELECT task_id, MAX(content_id) AS content_id, MAX(content_version) AS content_version,
    MIN(ts) AS opened_ts
  FROM review_tasks
  WHERE task_id IS NOT NULL AND ts IS NOT NULL
  GROUP BY task_id
),
answered AS (
  SELECT task_id, MIN(ts) AS answered_ts
  FROM review_decisions
  WHERE task_id IS NOT NULL AND ts IS NOT NULL
  GROUP BY task_id
),
reviewed AS (
  SELECT t.content_id, t.content_version,
    SUM(CAST(GREATEST(a.answered_ts - t.opened_ts, 0) AS DOUBLE) / 60000) AS review_minutes
  FROM tasks AS t
  JOIN answered AS a ON t.task_id = a.task_id
  GROUP BY t.content_id, t.content_version
)
SELECT
  l.policy_version,
  l.workflow_version,
  COUNT(*) AS decisions,
  SUM(COALESCE(c.detector_calls, 0)) AS detector_calls,
  SUM(COALESCE(c.inference_ms, 0)) AS inference_ms,
  ROUND(SUM(COALESCE(r.review_minutes, 0)), 3) AS review_minutes,
  SUM(l.reevaluations) AS reevaluations,
  ROUND(CAST(SUM(COALESCE(c.detector_calls, 0)) AS DOUBLE) / COUNT(*), 3)
    AS detector_calls_per_decision,
  ROUND(CAST(SUM(COALESCE(c.inference_ms, 0)) AS DOUBLE) / COUNT(*), 3)
    AS inference_ms_per_decision,
  ROUND(SUM(COALESCE(r.review_minutes, 0)) / COUNT(*), 3) AS review_minutes_per_decision,
  ROUND(CAST(SUM(l.reevaluations) AS DOUBLE) / COUNT(*), 3) AS reevaluations_per_decision
FROM latest AS l
LEFT JOIN calls AS c ON l.content_id = c.content_id AND l.content_version = c.content_version
LEFT JOIN reviewed AS r ON l.content_id = r.content_id AND l.content_version = r.content_version
GROUP BY l.policy_version, l.workflow_version
ORDER BY l.policy_version, l.workflow_version
