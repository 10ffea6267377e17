-- Decision-to-enforcement lag, p50 and p99 per visibility applied: for each decision revision
-- users can see applied (content.visibility, the enforcement side's report with its own clock's
-- `ts`, matched on content_id, content_version and decision_revision), the milliseconds from
-- the moderation job writing the decision (its Kafka record time) and from the decision's event
-- time (`ts`: when what caused it happened) to then. PERCENTILE is Flink 2.x's exact
-- percentile. A demo's event time ends ten minutes before it runs, so its event-to-visible lag
-- holds those minutes; the written-to-visible lag is the enforcement side's alone.
WITH applied AS (
  SELECT content_id, content_version, decision_revision, MAX(visibility) AS visibility,
    MIN(ts) AS visible_ts
  FROM content_visibility
  GROUP BY content_id, content_version, decision_revision
),
lags AS (
  SELECT a.visibility,
    a.visible_ts - (EXTRACT(EPOCH FROM d._timestamp) * 1000
      + EXTRACT(MILLISECOND FROM d._timestamp)) AS written_to_visible_ms,
    a.visible_ts - d.ts AS event_to_visible_ms
  FROM moderation_decisions AS d
  JOIN applied AS a ON a.content_id = d.content_id AND a.content_version = d.content_version
    AND a.decision_revision = d.decision_revision
)
SELECT
  COALESCE(visibility, 'all') AS visibility,
  COUNT(*) AS revisions,
  PERCENTILE(written_to_visible_ms, 0.5) AS written_to_visible_p50_ms,
  PERCENTILE(written_to_visible_ms, 0.99) AS written_to_visible_p99_ms,
  PERCENTILE(event_to_visible_ms, 0.5) AS event_to_visible_p50_ms,
  PERCENTILE(event_to_visible_ms, 0.99) AS event_to_visible_p99_ms
FROM lags
GROUP BY GROUPING SETS ((visibility), ())
ORDER BY revisions DESC, visibility
