-- Who revealed what: every reveal of blurred evidence in the review console (review.access,
-- action `reveal`), newest first, with the reviewer, the task and its queue, the content version
-- and the evidence reference revealed, and whether the same reviewer then decided the task (the
-- decision's outcome; NULL when they revealed it and left it). Add a WHERE on reviewer_id or
-- content_id to answer for one reviewer or one piece of content.
WITH reveals AS (
  SELECT reviewer_id, task_id, queue, content_id, content_version, evidence_ref, event_time
  FROM review_access
  WHERE action = 'reveal'
),
decided AS (
  SELECT reviewer_id, task_id, MAX(outcome) AS outcome
  FROM review_access
  WHERE action = 'decide'
  GROUP BY reviewer_id, task_id
)
SELECT
  DATE_FORMAT(r.event_time, 'yyyy-MM-dd HH:mm:ss') AS revealed_at_utc,
  r.reviewer_id,
  r.queue,
  r.content_id,
  r.content_version,
  r.task_id,
  r.evidence_ref,
  d.outcome AS then_decided
FROM reveals AS r
LEFT JOIN decided AS d ON r.reviewer_id = d.reviewer_id AND r.task_id = d.task_id
ORDER BY r.event_time DESC
