-- Review backlog by queue: the review tasks opened (review.tasks, one per task_id) minus those
-- closed (a review.decisions record with the same task_id), per queue, with the oldest open
-- task's event time (UTC). Appeals are the tasks of kind `appeal`.
WITH tasks AS (
  SELECT task_id, MAX(queue) AS queue, MIN(event_time) AS opened_at
  FROM review_tasks
  GROUP BY task_id
),
closed AS (
  SELECT DISTINCT task_id FROM review_decisions WHERE task_id IS NOT NULL
)
SELECT
  t.queue,
  COUNT(*) AS opened,
  COUNT(c.task_id) AS closed,
  COUNT(*) - COUNT(c.task_id) AS open_tasks,
  DATE_FORMAT(MIN(CASE WHEN c.task_id IS NULL THEN t.opened_at END), 'yyyy-MM-dd HH:mm:ss')
    AS oldest_open_utc
FROM tasks AS t
LEFT JOIN closed AS c ON t.task_id = c.task_id
GROUP BY t.queue
ORDER BY open_tasks DESC, queue
