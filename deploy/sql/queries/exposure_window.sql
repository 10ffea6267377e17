-- Exposure window by surface, region and trigger, recomputed from the contract's topics (the
-- reconciler's enforcement.exposure holds the same per version; docs/enforcement.md, "Exposure
-- window"): for each content version shown (a content.visibility record `public` or `limited`)
-- and later restricted, the milliseconds from its first showing to the first content.visibility
-- record of a restrictive revision (a BLOCK or RESTRICT decision, not a deletion) that shows
-- it less open than it had been shown. Both times are the enforcement side's `ts`. Versions
-- restricted before they were ever shown have no window and are left out. Surface and region
-- come from the upload (content.versions); language does not exist yet (issue 28).
WITH uploads AS (
  SELECT content_id, content_version, MAX(surface) AS surface, MAX(region) AS region
  FROM content_versions
  WHERE `type` = 'upsert' AND content_id IS NOT NULL AND content_version IS NOT NULL
  GROUP BY content_id, content_version
),
restrictive AS (
  SELECT content_id, content_version, decision_revision, MAX(`trigger`) AS `trigger`
  FROM moderation_decisions
  WHERE outcome IN ('BLOCK', 'RESTRICT') AND `state` <> 'deleted'
  GROUP BY content_id, content_version, decision_revision
),
seen AS (
  SELECT content_id, content_version, decision_revision, ts,
    CASE visibility WHEN 'public' THEN 2 WHEN 'limited' THEN 1 ELSE 0 END AS openness
  FROM content_visibility
),
effects AS (
  SELECT c.content_id, c.content_version, c.ts AS restricted_ts, MAX(r.`trigger`) AS `trigger`
  FROM seen AS c
  JOIN restrictive AS r ON r.content_id = c.content_id
    AND r.content_version = c.content_version AND r.decision_revision = c.decision_revision
  JOIN seen AS s ON s.content_id = c.content_id AND s.content_version = c.content_version
    AND s.ts <= c.ts AND s.openness > c.openness
  GROUP BY c.content_id, c.content_version, c.ts
),
firsts AS (
  SELECT content_id, content_version, restricted_ts, `trigger`,
    ROW_NUMBER() OVER (
      PARTITION BY content_id, content_version ORDER BY restricted_ts) AS nth
  FROM effects
),
windows AS (
  SELECT f.content_id, f.content_version, f.`trigger`,
    f.restricted_ts - MIN(s.ts) AS exposure_ms
  FROM firsts AS f
  JOIN seen AS s ON s.content_id = f.content_id AND s.content_version = f.content_version
    AND s.openness > 0 AND s.ts <= f.restricted_ts
  WHERE f.nth = 1
  GROUP BY f.content_id, f.content_version, f.`trigger`, f.restricted_ts
),
labelled AS (
  SELECT COALESCE(u.surface, 'unknown') AS surface, COALESCE(u.region, 'unknown') AS region,
    w.`trigger`, w.exposure_ms
  FROM windows AS w
  LEFT JOIN uploads AS u ON u.content_id = w.content_id AND u.content_version = w.content_version
)
SELECT
  COALESCE(surface, 'all') AS surface,
  COALESCE(region, 'all') AS region,
  COALESCE(`trigger`, 'all') AS `trigger`,
  COUNT(*) AS versions,
  PERCENTILE(exposure_ms, 0.5) AS exposure_p50_ms,
  PERCENTILE(exposure_ms, 0.99) AS exposure_p99_ms,
  MAX(exposure_ms) AS exposure_max_ms
FROM labelled
GROUP BY GROUPING SETS ((surface, region, `trigger`), ())
ORDER BY versions DESC, surface, region, `trigger`
