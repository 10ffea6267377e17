-- Model–human disagreement by detector and model version: for each content version a human
-- decided (review.decisions, reviews and appeals: the latest per version), whether the detector
-- flagged it (its highest score of any label over segments at or above 0.5) and whether the
-- human found a violation (BLOCK or RESTRICT); counts of both, of false flags (model yes, human
-- no) and misses (model no, human yes). Change 0.5 to a rule's threshold to check that rule.
WITH human AS (
  SELECT content_id, content_version, outcome,
    ROW_NUMBER() OVER (PARTITION BY content_id, content_version ORDER BY ts DESC) AS newest
  FROM review_decisions
  WHERE outcome IS NOT NULL AND content_id IS NOT NULL AND content_version IS NOT NULL
),
model AS (
  SELECT r.content_id, r.content_version, r.detector, r.model_version,
    MAX(s.score) AS score
  FROM detector_results AS r CROSS JOIN UNNEST(r.scores) AS s (label, score)
  WHERE r.status = 'ok' AND r.detector IS NOT NULL AND r.model_version IS NOT NULL
  GROUP BY r.content_id, r.content_version, r.detector, r.model_version
),
judged AS (
  SELECT m.detector, m.model_version,
    m.score >= 0.5 AS flagged,
    h.outcome IN ('BLOCK', 'RESTRICT') AS violating
  FROM model AS m
  JOIN human AS h ON h.content_id = m.content_id AND h.content_version = m.content_version
  WHERE h.newest = 1
)
SELECT
  detector,
  model_version,
  COUNT(*) AS reviewed_versions,
  SUM(CASE WHEN flagged THEN 1 ELSE 0 END) AS model_flagged,
  SUM(CASE WHEN violating THEN 1 ELSE 0 END) AS human_violating,
  SUM(CASE WHEN flagged AND NOT violating THEN 1 ELSE 0 END) AS false_flags,
  SUM(CASE WHEN violating AND NOT flagged THEN 1 ELSE 0 END) AS misses,
  ROUND(CAST(SUM(CASE WHEN flagged <> violating THEN 1 ELSE 0 END) AS DOUBLE) / COUNT(*), 4)
    AS disagreement_rate
FROM judged
GROUP BY detector, model_version
ORDER BY disagreement_rate DESC, detector, model_version
