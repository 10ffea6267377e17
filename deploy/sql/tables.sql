-- Flink SQL tables over modstream's topics: GENERATED from schemas/ by
modstream/analytics/sql_tables.py. -- Do not edit: run `modstream schemas export` (a test checks
this file is fresh). -- Written for the contract's topic names on the local stack's broker;
`modstream sql` creates -- the same tables for the chosen deployment (--prefix / --last-demo: its
topics, bootstrap -- servers and Kafka client security). Column and option choices:
modstream/analytics/sql_tables.py. -- Bounded (scan.bounded.mode = latest-offset) for batch queries:
remove that option for a -- streaming table in the Flink SQL client.

-- content.versions
CREATE TABLE `content_versions` (
  `event_id` STRING,
  `content_id` STRING,
  `content_version` BIGINT,
  `ts` BIGINT,
  `type` STRING,
  `author_id` STRING,
  `modality` STRING,
  `surface` STRING,
  `region` STRING,
  `audience` STRING,
  `account_risk` DOUBLE,
  `size_bytes` BIGINT,
  `mime_type` STRING,
  `sha256` STRING,
  `phash` STRING,
  `text` STRING,
  `media_ref` STRING,
  `segments` BIGINT,
  `_partition` INT METADATA FROM 'partition' VIRTUAL,
  `_offset` BIGINT METADATA FROM 'offset' VIRTUAL,
  `_timestamp` TIMESTAMP_LTZ(3) METADATA FROM 'timestamp' VIRTUAL,
  `event_time` AS COALESCE(TO_TIMESTAMP_LTZ(`ts`, 3), `_timestamp`),
  WATERMARK FOR `event_time` AS `event_time` - INTERVAL '5' SECOND
) WITH (
  'connector' = 'kafka',
  'topic' = 'content.versions',
  'properties.bootstrap.servers' = '127.0.0.1:9092',
  'properties.isolation.level' = 'read_committed',
  'scan.startup.mode' = 'earliest-offset',
  'scan.bounded.mode' = 'latest-offset',
  'format' = 'json',
  'json.fail-on-missing-field' = 'false',
  'json.ignore-parse-errors' = 'true'
);

-- detector.results
CREATE TABLE `detector_results` (
  `event_id` STRING,
  `content_id` STRING,
  `content_version` BIGINT,
  `detector` STRING,
  `model_version` STRING,
  `status` STRING,
  `ts` BIGINT,
  `segment_id` BIGINT,
  `scores` MAP<STRING, DOUBLE>,
  `evidence_ref` STRING,
  `signature` STRING,
  `inference_ms` BIGINT,
  `language` STRING,
  `language_confidence` DOUBLE,
  `findings` ARRAY<ROW<`offensive` DOUBLE, `confidence` DOUBLE, `box` ARRAY<BIGINT>, `frame_ms` BIGINT, `start_ms` BIGINT, `end_ms` BIGINT>>,
  `_partition` INT METADATA FROM 'partition' VIRTUAL,
  `_offset` BIGINT METADATA FROM 'offset' VIRTUAL,
  `_timestamp` TIMESTAMP_LTZ(3) METADATA FROM 'timestamp' VIRTUAL,
  `event_time` AS COALESCE(TO_TIMESTAMP_LTZ(`ts`, 3), `_timestamp`),
  WATERMARK FOR `event_time` AS `event_time` - INTERVAL '5' SECOND
) WITH (
  'connector' = 'kafka',
  'topic' = 'detector.results',
  'properties.bootstrap.servers' = '127.0.0.1:9092',
  'properties.isolation.level' = 'read_committed',
  'scan.startup.mode' = 'earliest-offset',
  'scan.bounded.mode' = 'latest-offset',
  'format' = 'json',
  'json.fail-on-missing-field' = 'false',
  'json.ignore-parse-errors' = 'true'
);

-- policy.rules
CREATE TABLE `policy_rules` (
  `event_id` STRING,
  `policy_id` STRING,
  `version` BIGINT,
  `parent_version` BIGINT,
  `mode` STRING,
  `canary_percent` DOUBLE,
  `author` STRING,
  `ts` BIGINT,
  `signature` STRING,
  `document` STRING,
  `command` STRING,
  `_partition` INT METADATA FROM 'partition' VIRTUAL,
  `_offset` BIGINT METADATA FROM 'offset' VIRTUAL,
  `_timestamp` TIMESTAMP_LTZ(3) METADATA FROM 'timestamp' VIRTUAL,
  `event_time` AS COALESCE(TO_TIMESTAMP_LTZ(`ts`, 3), `_timestamp`),
  WATERMARK FOR `event_time` AS `event_time` - INTERVAL '5' SECOND
) WITH (
  'connector' = 'kafka',
  'topic' = 'policy.rules',
  'properties.bootstrap.servers' = '127.0.0.1:9092',
  'properties.isolation.level' = 'read_committed',
  'scan.startup.mode' = 'earliest-offset',
  'scan.bounded.mode' = 'latest-offset',
  'format' = 'json',
  'json.fail-on-missing-field' = 'false',
  'json.ignore-parse-errors' = 'true'
);

-- hash.bank
CREATE TABLE `hash_bank` (
  `event_id` STRING,
  `bank` STRING,
  `hash_type` STRING,
  `hash` STRING,
  `op` STRING,
  `ts` BIGINT,
  `signature` STRING,
  `_partition` INT METADATA FROM 'partition' VIRTUAL,
  `_offset` BIGINT METADATA FROM 'offset' VIRTUAL,
  `_timestamp` TIMESTAMP_LTZ(3) METADATA FROM 'timestamp' VIRTUAL,
  `event_time` AS COALESCE(TO_TIMESTAMP_LTZ(`ts`, 3), `_timestamp`),
  WATERMARK FOR `event_time` AS `event_time` - INTERVAL '5' SECOND
) WITH (
  'connector' = 'kafka',
  'topic' = 'hash.bank',
  'properties.bootstrap.servers' = '127.0.0.1:9092',
  'properties.isolation.level' = 'read_committed',
  'scan.startup.mode' = 'earliest-offset',
  'scan.bounded.mode' = 'latest-offset',
  'format' = 'json',
  'json.fail-on-missing-field' = 'false',
  'json.ignore-parse-errors' = 'true'
);

-- moderation.reports
CREATE TABLE `moderation_reports` (
  `event_id` STRING,
  `report_id` STRING,
  `content_id` STRING,
  `content_version` BIGINT,
  `reporter_id` STRING,
  `reason` STRING,
  `ts` BIGINT,
  `_partition` INT METADATA FROM 'partition' VIRTUAL,
  `_offset` BIGINT METADATA FROM 'offset' VIRTUAL,
  `_timestamp` TIMESTAMP_LTZ(3) METADATA FROM 'timestamp' VIRTUAL,
  `event_time` AS COALESCE(TO_TIMESTAMP_LTZ(`ts`, 3), `_timestamp`),
  WATERMARK FOR `event_time` AS `event_time` - INTERVAL '5' SECOND
) WITH (
  'connector' = 'kafka',
  'topic' = 'moderation.reports',
  'properties.bootstrap.servers' = '127.0.0.1:9092',
  'properties.isolation.level' = 'read_committed',
  'scan.startup.mode' = 'earliest-offset',
  'scan.bounded.mode' = 'latest-offset',
  'format' = 'json',
  'json.fail-on-missing-field' = 'false',
  'json.ignore-parse-errors' = 'true'
);

-- review.decisions
CREATE TABLE `review_decisions` (
  `event_id` STRING,
  `task_id` STRING,
  `content_id` STRING,
  `content_version` BIGINT,
  `reviewer_id` STRING,
  `outcome` STRING,
  `reason` STRING,
  `ts` BIGINT,
  `signature` STRING,
  `_partition` INT METADATA FROM 'partition' VIRTUAL,
  `_offset` BIGINT METADATA FROM 'offset' VIRTUAL,
  `_timestamp` TIMESTAMP_LTZ(3) METADATA FROM 'timestamp' VIRTUAL,
  `event_time` AS COALESCE(TO_TIMESTAMP_LTZ(`ts`, 3), `_timestamp`),
  WATERMARK FOR `event_time` AS `event_time` - INTERVAL '5' SECOND
) WITH (
  'connector' = 'kafka',
  'topic' = 'review.decisions',
  'properties.bootstrap.servers' = '127.0.0.1:9092',
  'properties.isolation.level' = 'read_committed',
  'scan.startup.mode' = 'earliest-offset',
  'scan.bounded.mode' = 'latest-offset',
  'format' = 'json',
  'json.fail-on-missing-field' = 'false',
  'json.ignore-parse-errors' = 'true'
);

-- moderation.appeals
CREATE TABLE `moderation_appeals` (
  `event_id` STRING,
  `appeal_id` STRING,
  `content_id` STRING,
  `content_version` BIGINT,
  `decision_revision` BIGINT,
  `user_id` STRING,
  `ts` BIGINT,
  `signature` STRING,
  `_partition` INT METADATA FROM 'partition' VIRTUAL,
  `_offset` BIGINT METADATA FROM 'offset' VIRTUAL,
  `_timestamp` TIMESTAMP_LTZ(3) METADATA FROM 'timestamp' VIRTUAL,
  `event_time` AS COALESCE(TO_TIMESTAMP_LTZ(`ts`, 3), `_timestamp`),
  WATERMARK FOR `event_time` AS `event_time` - INTERVAL '5' SECOND
) WITH (
  'connector' = 'kafka',
  'topic' = 'moderation.appeals',
  'properties.bootstrap.servers' = '127.0.0.1:9092',
  'properties.isolation.level' = 'read_committed',
  'scan.startup.mode' = 'earliest-offset',
  'scan.bounded.mode' = 'latest-offset',
  'format' = 'json',
  'json.fail-on-missing-field' = 'false',
  'json.ignore-parse-errors' = 'true'
);

-- moderation.reevaluate
CREATE TABLE `moderation_reevaluate` (
  `event_id` STRING,
  `content_id` STRING,
  `content_version` BIGINT,
  `reason` STRING,
  `ts` BIGINT,
  `_partition` INT METADATA FROM 'partition' VIRTUAL,
  `_offset` BIGINT METADATA FROM 'offset' VIRTUAL,
  `_timestamp` TIMESTAMP_LTZ(3) METADATA FROM 'timestamp' VIRTUAL,
  `event_time` AS COALESCE(TO_TIMESTAMP_LTZ(`ts`, 3), `_timestamp`),
  WATERMARK FOR `event_time` AS `event_time` - INTERVAL '5' SECOND
) WITH (
  'connector' = 'kafka',
  'topic' = 'moderation.reevaluate',
  'properties.bootstrap.servers' = '127.0.0.1:9092',
  'properties.isolation.level' = 'read_committed',
  'scan.startup.mode' = 'earliest-offset',
  'scan.bounded.mode' = 'latest-offset',
  'format' = 'json',
  'json.fail-on-missing-field' = 'false',
  'json.ignore-parse-errors' = 'true'
);

-- moderation.decisions
CREATE TABLE `moderation_decisions` (
  `decision_id` STRING,
  `content_id` STRING,
  `content_version` BIGINT,
  `decision_revision` BIGINT,
  `outcome` STRING,
  `restriction` STRING,
  `expires_ts` BIGINT,
  `reasons` ARRAY<STRING>,
  `matched_rules` ARRAY<STRING>,
  `policy_id` STRING,
  `policy_version` BIGINT,
  `evidence` ARRAY<ROW<`detector` STRING, `model_version` STRING, `segment_id` BIGINT, `evidence_ref` STRING, `language` STRING, `finding_ms` BIGINT>>,
  `completeness` ROW<`required` BIGINT, `received` BIGINT, `unknown` ARRAY<STRING>>,
  `trigger` STRING,
  `state` STRING,
  `ts` BIGINT,
  `workflow_version` BIGINT,
  `language` STRING,
  `_partition` INT METADATA FROM 'partition' VIRTUAL,
  `_offset` BIGINT METADATA FROM 'offset' VIRTUAL,
  `_timestamp` TIMESTAMP_LTZ(3) METADATA FROM 'timestamp' VIRTUAL,
  `event_time` AS COALESCE(TO_TIMESTAMP_LTZ(`ts`, 3), `_timestamp`),
  WATERMARK FOR `event_time` AS `event_time` - INTERVAL '5' SECOND
) WITH (
  'connector' = 'kafka',
  'topic' = 'moderation.decisions',
  'properties.bootstrap.servers' = '127.0.0.1:9092',
  'properties.isolation.level' = 'read_committed',
  'scan.startup.mode' = 'earliest-offset',
  'scan.bounded.mode' = 'latest-offset',
  'format' = 'json',
  'json.fail-on-missing-field' = 'false',
  'json.ignore-parse-errors' = 'false'
);

-- moderation.actions
CREATE TABLE `moderation_actions` (
  `action_id` STRING,
  `content_id` STRING,
  `content_version` BIGINT,
  `decision_revision` BIGINT,
  `outcome` STRING,
  `visibility` STRING,
  `restriction` STRING,
  `policy_version` BIGINT,
  `ts` BIGINT,
  `_partition` INT METADATA FROM 'partition' VIRTUAL,
  `_offset` BIGINT METADATA FROM 'offset' VIRTUAL,
  `_timestamp` TIMESTAMP_LTZ(3) METADATA FROM 'timestamp' VIRTUAL,
  `event_time` AS COALESCE(TO_TIMESTAMP_LTZ(`ts`, 3), `_timestamp`),
  WATERMARK FOR `event_time` AS `event_time` - INTERVAL '5' SECOND
) WITH (
  'connector' = 'kafka',
  'topic' = 'moderation.actions',
  'properties.bootstrap.servers' = '127.0.0.1:9092',
  'properties.isolation.level' = 'read_committed',
  'scan.startup.mode' = 'earliest-offset',
  'scan.bounded.mode' = 'latest-offset',
  'format' = 'json',
  'json.fail-on-missing-field' = 'false',
  'json.ignore-parse-errors' = 'false'
);

-- review.tasks
CREATE TABLE `review_tasks` (
  `task_id` STRING,
  `kind` STRING,
  `content_id` STRING,
  `content_version` BIGINT,
  `decision_revision` BIGINT,
  `policy_version` BIGINT,
  `queue` STRING,
  `priority` BIGINT,
  `reasons` ARRAY<STRING>,
  `evidence` ARRAY<STRING>,
  `ts` BIGINT,
  `second_review` ROW<`round` STRING, `of_task` STRING, `sampled` BOOLEAN, `outcomes` ARRAY<STRING>>,
  `escalated_from` STRING,
  `_partition` INT METADATA FROM 'partition' VIRTUAL,
  `_offset` BIGINT METADATA FROM 'offset' VIRTUAL,
  `_timestamp` TIMESTAMP_LTZ(3) METADATA FROM 'timestamp' VIRTUAL,
  `event_time` AS COALESCE(TO_TIMESTAMP_LTZ(`ts`, 3), `_timestamp`),
  WATERMARK FOR `event_time` AS `event_time` - INTERVAL '5' SECOND
) WITH (
  'connector' = 'kafka',
  'topic' = 'review.tasks',
  'properties.bootstrap.servers' = '127.0.0.1:9092',
  'properties.isolation.level' = 'read_committed',
  'scan.startup.mode' = 'earliest-offset',
  'scan.bounded.mode' = 'latest-offset',
  'format' = 'json',
  'json.fail-on-missing-field' = 'false',
  'json.ignore-parse-errors' = 'false'
);

-- content.visibility
CREATE TABLE `content_visibility` (
  `content_id` STRING,
  `content_version` BIGINT,
  `decision_revision` BIGINT,
  `visibility` STRING,
  `ts` BIGINT,
  `_partition` INT METADATA FROM 'partition' VIRTUAL,
  `_offset` BIGINT METADATA FROM 'offset' VIRTUAL,
  `_timestamp` TIMESTAMP_LTZ(3) METADATA FROM 'timestamp' VIRTUAL,
  `event_time` AS COALESCE(TO_TIMESTAMP_LTZ(`ts`, 3), `_timestamp`),
  WATERMARK FOR `event_time` AS `event_time` - INTERVAL '5' SECOND
) WITH (
  'connector' = 'kafka',
  'topic' = 'content.visibility',
  'properties.bootstrap.servers' = '127.0.0.1:9092',
  'properties.isolation.level' = 'read_committed',
  'scan.startup.mode' = 'earliest-offset',
  'scan.bounded.mode' = 'latest-offset',
  'format' = 'json',
  'json.fail-on-missing-field' = 'false',
  'json.ignore-parse-errors' = 'false'
);

-- moderation.discrepancies
CREATE TABLE `moderation_discrepancies` (
  `content_id` STRING,
  `content_version` BIGINT,
  `desired_visibility` STRING,
  `effective_visibility` STRING,
  `decision_revision` BIGINT,
  `age_ms` BIGINT,
  `action` STRING,
  `ts` BIGINT,
  `_partition` INT METADATA FROM 'partition' VIRTUAL,
  `_offset` BIGINT METADATA FROM 'offset' VIRTUAL,
  `_timestamp` TIMESTAMP_LTZ(3) METADATA FROM 'timestamp' VIRTUAL,
  `event_time` AS COALESCE(TO_TIMESTAMP_LTZ(`ts`, 3), `_timestamp`),
  WATERMARK FOR `event_time` AS `event_time` - INTERVAL '5' SECOND
) WITH (
  'connector' = 'kafka',
  'topic' = 'moderation.discrepancies',
  'properties.bootstrap.servers' = '127.0.0.1:9092',
  'properties.isolation.level' = 'read_committed',
  'scan.startup.mode' = 'earliest-offset',
  'scan.bounded.mode' = 'latest-offset',
  'format' = 'json',
  'json.fail-on-missing-field' = 'false',
  'json.ignore-parse-errors' = 'false'
);

-- account.actions
CREATE TABLE `account_actions` (
  `action_id` STRING,
  `user_id` STRING,
  `sanction` STRING,
  `content_id` STRING,
  `content_version` BIGINT,
  `decision_revision` BIGINT,
  `policy_version` BIGINT,
  `reason` STRING,
  `strike_count` BIGINT,
  `expires_ts` BIGINT,
  `ts` BIGINT,
  `_partition` INT METADATA FROM 'partition' VIRTUAL,
  `_offset` BIGINT METADATA FROM 'offset' VIRTUAL,
  `_timestamp` TIMESTAMP_LTZ(3) METADATA FROM 'timestamp' VIRTUAL,
  `event_time` AS COALESCE(TO_TIMESTAMP_LTZ(`ts`, 3), `_timestamp`),
  WATERMARK FOR `event_time` AS `event_time` - INTERVAL '5' SECOND
) WITH (
  'connector' = 'kafka',
  'topic' = 'account.actions',
  'properties.bootstrap.servers' = '127.0.0.1:9092',
  'properties.isolation.level' = 'read_committed',
  'scan.startup.mode' = 'earliest-offset',
  'scan.bounded.mode' = 'latest-offset',
  'format' = 'json',
  'json.fail-on-missing-field' = 'false',
  'json.ignore-parse-errors' = 'false'
);

-- user.notifications
CREATE TABLE `user_notifications` (
  `notification_id` STRING,
  `user_id` STRING,
  `content_id` STRING,
  `content_version` BIGINT,
  `decision_revision` BIGINT,
  `outcome` STRING,
  `reason_code` STRING,
  `message` STRING,
  `appeal_allowed` BOOLEAN,
  `ts` BIGINT,
  `_partition` INT METADATA FROM 'partition' VIRTUAL,
  `_offset` BIGINT METADATA FROM 'offset' VIRTUAL,
  `_timestamp` TIMESTAMP_LTZ(3) METADATA FROM 'timestamp' VIRTUAL,
  `event_time` AS COALESCE(TO_TIMESTAMP_LTZ(`ts`, 3), `_timestamp`),
  WATERMARK FOR `event_time` AS `event_time` - INTERVAL '5' SECOND
) WITH (
  'connector' = 'kafka',
  'topic' = 'user.notifications',
  'properties.bootstrap.servers' = '127.0.0.1:9092',
  'properties.isolation.level' = 'read_committed',
  'scan.startup.mode' = 'earliest-offset',
  'scan.bounded.mode' = 'latest-offset',
  'format' = 'json',
  'json.fail-on-missing-field' = 'false',
  'json.ignore-parse-errors' = 'false'
);

-- moderation.shadow
CREATE TABLE `moderation_shadow` (
  `decision_id` STRING,
  `content_id` STRING,
  `content_version` BIGINT,
  `decision_revision` BIGINT,
  `outcome` STRING,
  `restriction` STRING,
  `expires_ts` BIGINT,
  `reasons` ARRAY<STRING>,
  `matched_rules` ARRAY<STRING>,
  `policy_id` STRING,
  `policy_version` BIGINT,
  `evidence` ARRAY<ROW<`detector` STRING, `model_version` STRING, `segment_id` BIGINT, `evidence_ref` STRING, `language` STRING, `finding_ms` BIGINT>>,
  `completeness` ROW<`required` BIGINT, `received` BIGINT, `unknown` ARRAY<STRING>>,
  `trigger` STRING,
  `state` STRING,
  `ts` BIGINT,
  `workflow_version` BIGINT,
  `language` STRING,
  `shadow` BOOLEAN,
  `_partition` INT METADATA FROM 'partition' VIRTUAL,
  `_offset` BIGINT METADATA FROM 'offset' VIRTUAL,
  `_timestamp` TIMESTAMP_LTZ(3) METADATA FROM 'timestamp' VIRTUAL,
  `event_time` AS COALESCE(TO_TIMESTAMP_LTZ(`ts`, 3), `_timestamp`),
  WATERMARK FOR `event_time` AS `event_time` - INTERVAL '5' SECOND
) WITH (
  'connector' = 'kafka',
  'topic' = 'moderation.shadow',
  'properties.bootstrap.servers' = '127.0.0.1:9092',
  'properties.isolation.level' = 'read_committed',
  'scan.startup.mode' = 'earliest-offset',
  'scan.bounded.mode' = 'latest-offset',
  'format' = 'json',
  'json.fail-on-missing-field' = 'false',
  'json.ignore-parse-errors' = 'false'
);

-- moderation.dlq
CREATE TABLE `moderation_dlq` (
  `source_topic` STRING,
  `key` STRING,
  `error_class` STRING,
  `message` STRING,
  `attempts` BIGINT,
  `workflow_version` BIGINT,
  `raw` STRING,
  `ts` BIGINT,
  `owner` STRING,
  `job` STRING,
  `history` ARRAY<ROW<`ts` BIGINT, `error_class` STRING, `message` STRING, `job` STRING>>,
  `_partition` INT METADATA FROM 'partition' VIRTUAL,
  `_offset` BIGINT METADATA FROM 'offset' VIRTUAL,
  `_timestamp` TIMESTAMP_LTZ(3) METADATA FROM 'timestamp' VIRTUAL,
  `event_time` AS COALESCE(TO_TIMESTAMP_LTZ(`ts`, 3), `_timestamp`),
  WATERMARK FOR `event_time` AS `event_time` - INTERVAL '5' SECOND
) WITH (
  'connector' = 'kafka',
  'topic' = 'moderation.dlq',
  'properties.bootstrap.servers' = '127.0.0.1:9092',
  'properties.isolation.level' = 'read_committed',
  'scan.startup.mode' = 'earliest-offset',
  'scan.bounded.mode' = 'latest-offset',
  'format' = 'json',
  'json.fail-on-missing-field' = 'false',
  'json.ignore-parse-errors' = 'false'
);

-- content.validated
CREATE TABLE `content_validated` (
  `event_id` STRING,
  `content_id` STRING,
  `content_version` BIGINT,
  `ts` BIGINT,
  `type` STRING,
  `author_id` STRING,
  `modality` STRING,
  `surface` STRING,
  `region` STRING,
  `audience` STRING,
  `account_risk` DOUBLE,
  `size_bytes` BIGINT,
  `mime_type` STRING,
  `sha256` STRING,
  `phash` STRING,
  `text` STRING,
  `media_ref` STRING,
  `segments` BIGINT,
  `_partition` INT METADATA FROM 'partition' VIRTUAL,
  `_offset` BIGINT METADATA FROM 'offset' VIRTUAL,
  `_timestamp` TIMESTAMP_LTZ(3) METADATA FROM 'timestamp' VIRTUAL,
  `event_time` AS COALESCE(TO_TIMESTAMP_LTZ(`ts`, 3), `_timestamp`),
  WATERMARK FOR `event_time` AS `event_time` - INTERVAL '5' SECOND
) WITH (
  'connector' = 'kafka',
  'topic' = 'content.validated',
  'properties.bootstrap.servers' = '127.0.0.1:9092',
  'properties.isolation.level' = 'read_committed',
  'scan.startup.mode' = 'earliest-offset',
  'scan.bounded.mode' = 'latest-offset',
  'format' = 'json',
  'json.fail-on-missing-field' = 'false',
  'json.ignore-parse-errors' = 'true'
);

-- review.access
CREATE TABLE `review_access` (
  `event_id` STRING,
  `reviewer_id` STRING,
  `action` STRING,
  `ts` BIGINT,
  `task_id` STRING,
  `queue` STRING,
  `content_id` STRING,
  `content_version` BIGINT,
  `evidence_ref` STRING,
  `outcome` STRING,
  `note` STRING,
  `detail` STRING,
  `_partition` INT METADATA FROM 'partition' VIRTUAL,
  `_offset` BIGINT METADATA FROM 'offset' VIRTUAL,
  `_timestamp` TIMESTAMP_LTZ(3) METADATA FROM 'timestamp' VIRTUAL,
  `event_time` AS COALESCE(TO_TIMESTAMP_LTZ(`ts`, 3), `_timestamp`),
  WATERMARK FOR `event_time` AS `event_time` - INTERVAL '5' SECOND
) WITH (
  'connector' = 'kafka',
  'topic' = 'review.access',
  'properties.bootstrap.servers' = '127.0.0.1:9092',
  'properties.isolation.level' = 'read_committed',
  'scan.startup.mode' = 'earliest-offset',
  'scan.bounded.mode' = 'latest-offset',
  'format' = 'json',
  'json.fail-on-missing-field' = 'false',
  'json.ignore-parse-errors' = 'false'
);
