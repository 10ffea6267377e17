-- Block rate by policy version and surface per hour: of the content versions uploaded in each
-- UTC hour on each surface, how many were decided under each policy version and what share of
-- them that version's latest decision blocked. Active decisions (moderation.decisions) and a
-- shadow or canary candidate's (moderation.shadow, shadow = true) side by side. Decisions carry
-- no surface: it comes from the upload (content.versions upserts).
WITH uploads AS (
  SELECT content_id, content_version, MAX(surface) AS surface, MIN(event_time) AS uploaded
  FROM content_versions
  WHERE `type` = 'upsert' AND content_id IS NOT NULL AND content_version IS NOT NULL
    AND surface IS NOT NULL
  GROUP BY content_id, content_version
),
revisions AS (
  SELECT content_id, content_version, policy_version, outcome, FALSE AS shadow,
    ROW_NUMBER() OVER (
      PARTITION BY content_id, content_version, policy_version
      ORDER BY decision_revision DESC) AS newest
  FROM moderation_decisions
  UNION ALL
  SELECT content_id, content_version, policy_version, outcome, TRUE AS shadow,
    ROW_NUMBER() OVER (
      PARTITION BY content_id, content_version, policy_version
      ORDER BY decision_revision DESC) AS newest
  FROM moderation_shadow
)
SELECT
  DATE_FORMAT(u.uploaded, 'yyyy-MM-dd HH:00') AS hour_utc,
  r.policy_version,
  r.shadow,
  u.surface,
  COUNT(*) AS versions,
  SUM(CASE WHEN r.outcome = 'BLOCK' THEN 1 ELSE 0 END) AS blocked,
  ROUND(CAST(SUM(CASE WHEN r.outcome = 'BLOCK' THEN 1 ELSE 0 END) AS DOUBLE) / COUNT(*), 4)
    AS block_rate
FROM revisions AS r
JOIN uploads AS u ON r.content_id = u.content_id AND r.content_version = u.content_version
WHERE r.newest = 1
GROUP BY DATE_FORMAT(u.uploaded, 'yyyy-MM-dd HH:00'), r.policy_version, r.shadow, u.surface
ORDER BY hour_utc, policy_version, shadow, surface
