-- Unknown rate by detector: how often a detector's evidence was UNKNOWN (never safe). Per
-- detector: its results that timed out or errored (detector.results), and the content
-- versions whose latest decision names it in completeness.unknown (evidence missing or
-- unusable when the deadline passed), out of the versions it reported on or was missing for.
WITH results AS (
  SELECT detector, content_id, content_version, status
  FROM detector_results
  WHERE detector IS NOT NULL AND status IS NOT NULL AND content_id IS NOT NULL
    AND content_version IS NOT NULL
),
latest AS (
  SELECT content_id, content_version, completeness,
    ROW_NUMBER() OVER (
      PARTITION BY content_id, content_version ORDER BY decision_revision DESC) AS newest
  FROM moderation_decisions
),
missing_evidence AS (
  SELECT missing.detector, l.content_id, l.content_version
  FROM latest AS l CROSS JOIN UNNEST(l.completeness.`unknown`) AS missing (detector)
  WHERE l.newest = 1
),
per_version AS (
  SELECT detector, content_id, content_version FROM results
  UNION
  SELECT detector, content_id, content_version FROM missing_evidence
),
by_results AS (
  SELECT detector, COUNT(*) AS results,
    SUM(CASE WHEN status = 'timeout' THEN 1 ELSE 0 END) AS timeouts,
    SUM(CASE WHEN status = 'error' THEN 1 ELSE 0 END) AS errors
  FROM results GROUP BY detector
),
by_versions AS (
  SELECT p.detector, COUNT(*) AS versions, COUNT(u.detector) AS versions_unknown
  FROM per_version AS p
  LEFT JOIN missing_evidence AS u ON p.detector = u.detector AND p.content_id = u.content_id
    AND p.content_version = u.content_version
  GROUP BY p.detector
)
SELECT
  v.detector,
  COALESCE(r.results, 0) AS results,
  COALESCE(r.timeouts, 0) AS timeouts,
  COALESCE(r.errors, 0) AS errors,
  ROUND(CAST(COALESCE(r.timeouts + r.errors, 0) AS DOUBLE) / NULLIF(r.results, 0), 4)
    AS result_unknown_rate,
  v.versions,
  v.versions_unknown,
  ROUND(CAST(v.versions_unknown AS DOUBLE) / v.versions, 4) AS version_unknown_rate
FROM by_versions AS v
LEFT JOIN by_results AS r ON v.detector = r.detector
ORDER BY version_unknown_rate DESC, detector
