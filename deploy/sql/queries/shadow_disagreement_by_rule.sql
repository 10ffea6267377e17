-- Shadow vs active disagreement by rule: for each content version decided by both a shadow (or
-- canary) policy version and the active policy, their latest automated decisions compared (a
-- human review or appeal, which both follow, is no policy's outcome), per rule that either
-- matched ("(default)": neither matched a rule): versions, how many outcomes differ, and the
-- new BLOCKs the candidate would add (the diff `modstream policy promote` is about).
WITH active AS (
  SELECT content_id, content_version, policy_version, outcome, matched_rules,
    ROW_NUMBER() OVER (
      PARTITION BY content_id, content_version ORDER BY decision_revision DESC) AS newest
  FROM moderation_decisions
  WHERE `trigger` NOT IN ('review', 'appeal')
),
shadow AS (
  SELECT content_id, content_version, policy_version, outcome, matched_rules,
    ROW_NUMBER() OVER (
      PARTITION BY content_id, content_version, policy_version
      ORDER BY decision_revision DESC) AS newest
  FROM moderation_shadow
  WHERE `trigger` NOT IN ('review', 'appeal')
),
pairs AS (
  SELECT s.policy_version AS shadow_version, a.policy_version AS active_version,
    s.content_id, s.content_version, s.outcome AS shadow_outcome, a.outcome AS active_outcome,
    s.matched_rules AS shadow_rules, a.matched_rules AS active_rules
  FROM shadow AS s
  JOIN active AS a ON a.content_id = s.content_id AND a.content_version = s.content_version
  WHERE s.newest = 1 AND a.newest = 1
),
by_rule AS (
  SELECT p.shadow_version, p.active_version, p.content_id, p.content_version,
    p.shadow_outcome, p.active_outcome, matched.rule_id
  FROM pairs AS p CROSS JOIN UNNEST(p.shadow_rules) AS matched (rule_id)
  UNION
  SELECT p.shadow_version, p.active_version, p.content_id, p.content_version,
    p.shadow_outcome, p.active_outcome, matched.rule_id
  FROM pairs AS p CROSS JOIN UNNEST(p.active_rules) AS matched (rule_id)
  UNION
  SELECT shadow_version, active_version, content_id, content_version,
    shadow_outcome, active_outcome, '(default)' AS rule_id
  FROM pairs
  WHERE CARDINALITY(shadow_rules) = 0 AND CARDINALITY(active_rules) = 0
)
SELECT
  shadow_version,
  active_version,
  rule_id,
  COUNT(*) AS versions,
  SUM(CASE WHEN shadow_outcome <> active_outcome THEN 1 ELSE 0 END) AS disagreements,
  ROUND(CAST(SUM(CASE WHEN shadow_outcome <> active_outcome THEN 1 ELSE 0 END) AS DOUBLE)
    / COUNT(*), 4) AS disagreement_rate,
  SUM(CASE WHEN shadow_outcome = 'BLOCK' AND active_outcome <> 'BLOCK' THEN 1 ELSE 0 END)
    AS new_blocks
FROM by_rule
GROUP BY shadow_version, active_version, rule_id
ORDER BY disagreements DESC, rule_id
