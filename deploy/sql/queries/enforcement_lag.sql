-- Decision-to-enforcement lag, p50 and p99 per visibility applied: for each decision revision
-- that users can see applied (content.visibility, the enforcement side's report, matched on
-- content_id, content_version and decision_revision), the time from the decision's event time
-- (`ts`: what caused it) and from when the moderation job wrote it (its Kafka record time) to
-- when enforcement saw it served. PERCENTILE is Flink 2.x's exact percentile. A demo's event
-- time ends ten minutes before it runs, so its event-to-visible lag includes those minutes.
WITH applied AS (
  SELECT content_id, content_version, decision_revision, MAX(visibility) AS visibility,
    MIN(ts) AS visible_ts, MIN(event_time) AS visible_at
  FROM content_visibility
  GROUP BY content_id, content_version, decision_revision
),
lags AS (
  SELECT a.visibility,
    a.visible_ts - d.ts AS event_to_visible_ms,
    TIMESTAMPDIFF(SECOND, d._timestamp, a.visible_at) AS written_to_visible_s
  FROM moderation_decisions AS d
  JOIN applied AS a ON a.content_id = d.content_id AND a.content_version = d.content_version
    AND a.decision_revision = d.decision_revision
)
SELECT
  COALESCE(visibility, 'all') AS visibility,
  COUNT(*) AS revisions,
  PERCENTILE(event_to_visible_ms, 0.5) AS event_to_visible_p50_ms,
  PERCENTILE(event_to_visible_ms, 0.99) AS event_to_visible_p99_ms,
  PERCENTILE(written_to_visible_s, 0.5) AS written_to_visible_p50_s,
  PERCENTILE(written_to_visible_s, 0.99) AS written_to_visible_p99_s
FROM lags
GROUP BY GROUPING SETS ((visibility), ())
ORDER BY revisions DESC
