-- Appeal rate and overturn rate per policy version: of the content versions that version
-- blocked or restricted (sanctioned_versions, plus any appealed version it decided otherwise),
-- the share whose author appealed (moderation.appeals, matched to the decision revision named
-- in the appeal); of those appeals a reviewer decided (review.decisions with task_id
-- `appeal-<appeal_id>`), the share where the reviewer's outcome differs from the appealed one
-- (overturned).
WITH negative AS (
  SELECT DISTINCT policy_version, content_id, content_version
  FROM moderation_decisions
  WHERE outcome IN ('BLOCK', 'RESTRICT')
),
appealed AS (
  SELECT a.appeal_id, d.policy_version, a.content_id, a.content_version,
    d.outcome AS appealed_outcome
  FROM moderation_appeals AS a
  JOIN moderation_decisions AS d ON d.content_id = a.content_id
    AND d.content_version = a.content_version AND d.decision_revision = a.decision_revision
  WHERE a.appeal_id IS NOT NULL
),
answers AS (
  SELECT task_id, outcome,
    ROW_NUMBER() OVER (PARTITION BY task_id ORDER BY ts DESC) AS newest
  FROM review_decisions
  WHERE task_id LIKE 'appeal-%' AND outcome IS NOT NULL
),
appeals AS (
  SELECT p.policy_version, p.content_id, p.content_version, p.appealed_outcome,
    w.outcome AS reviewed_outcome
  FROM appealed AS p
  LEFT JOIN answers AS w ON w.task_id = CONCAT('appeal-', p.appeal_id) AND w.newest = 1
),
per_version AS (
  SELECT policy_version, content_id, content_version FROM negative
  UNION
  SELECT policy_version, content_id, content_version FROM appeals
),
appeal_counts AS (
  SELECT policy_version,
    COUNT(DISTINCT CONCAT(content_id, '#', CAST(content_version AS STRING))) AS appealed_versions,
    COUNT(*) AS appeals,
    COUNT(reviewed_outcome) AS decided_appeals,
    SUM(CASE WHEN reviewed_outcome <> appealed_outcome THEN 1 ELSE 0 END) AS overturned
  FROM appeals GROUP BY policy_version
)
SELECT
  v.policy_version,
  v.sanctioned_versions,
  COALESCE(c.appealed_versions, 0) AS appealed_versions,
  ROUND(CAST(COALESCE(c.appealed_versions, 0) AS DOUBLE) / v.sanctioned_versions, 4)
    AS appeal_rate,
  COALESCE(c.decided_appeals, 0) AS decided_appeals,
  COALESCE(c.overturned, 0) AS overturned,
  ROUND(CAST(c.overturned AS DOUBLE) / NULLIF(c.decided_appeals, 0), 4) AS overturn_rate
FROM (
  SELECT policy_version, COUNT(*) AS sanctioned_versions FROM per_version GROUP BY policy_version
) AS v
LEFT JOIN appeal_counts AS c ON v.policy_version = c.policy_version
ORDER BY policy_version
