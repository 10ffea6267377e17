"""The Flink SQL tables generated from schemas/ (modstream/analytics/sql_tables.py); no JVM."""

from __future__ import annotations

from pathlib import Path

import pytest

from modstream.analytics import sql_tables
from modstream.analytics.sql_script import split
from modstream.analytics.sql_tables import Column, Connection, columns, create_table, options

ANALYST_TOPICS = (
    "moderation.decisions",
    "moderation.shadow",
    "moderation.actions",
    "review.tasks",
    "review.decisions",
    "moderation.appeals",
    "detector.results",
    "content.versions",
    "content.validated",
    "moderation.dlq",
    "content.visibility",
)


def test_committed_tables_are_a_fresh_generation() -> None:
    assert sql_tables.stale() == [], "run `modstream schemas export` and commit deploy/sql/"


def test_stale_names_a_changed_or_missing_file(tmp_path: Path) -> None:
    path = sql_tables.export(tmp_path / "tables.sql")
    assert sql_tables.stale(path) == []
    path.write_text(path.read_text().replace("`outcome` STRING", "`outcome` INT"))
    assert sql_tables.stale(path) == ["tables.sql: differs from the models"]
    assert sql_tables.stale(tmp_path / "none.sql") == ["none.sql: missing"]


def test_every_table_analysts_need_is_generated() -> None:
    assert set(ANALYST_TOPICS) <= set(sql_tables.TABLE_TOPICS)
    text = sql_tables.render()
    for topic in ANALYST_TOPICS:
        assert f"CREATE TABLE `{topic.replace('.', '_')}` (" in text
    assert len(split(text, "tables.sql")) == len(sql_tables.TABLE_TOPICS)


def test_decision_columns_follow_the_model() -> None:
    assert columns("moderation.decisions") == [
        Column("decision_id", "STRING"),
        Column("content_id", "STRING"),
        Column("content_version", "BIGINT"),
        Column("decision_revision", "BIGINT"),
        Column("outcome", "STRING"),
        Column("restriction", "STRING"),
        Column("expires_ts", "BIGINT"),
        Column("reasons", "ARRAY<STRING>"),
        Column("matched_rules", "ARRAY<STRING>"),
        Column("policy_id", "STRING"),
        Column("policy_version", "BIGINT"),
        Column(
            "evidence",
            "ARRAY<ROW<`detector` STRING, `model_version` STRING, `segment_id` BIGINT,"
            " `evidence_ref` STRING, `language` STRING, `finding_ms` BIGINT>>",
        ),
        Column(
            "completeness", "ROW<`required` BIGINT, `received` BIGINT, `unknown` ARRAY<STRING>>"
        ),
        Column("trigger", "STRING"),
        Column("state", "STRING"),
        Column("ts", "BIGINT"),
        Column("workflow_version", "BIGINT"),
        Column("language", "STRING"),
    ]


@pytest.mark.parametrize(
    ("topic", "name", "sql_type"),
    [
        ("moderation.shadow", "shadow", "BOOLEAN"),
        ("detector.results", "scores", "MAP<STRING, DOUBLE>"),
        ("detector.results", "segment_id", "BIGINT"),
        ("content.versions", "account_risk", "DOUBLE"),
        ("content.versions", "segments", "BIGINT"),  # an upsert's field in the union
        ("content.validated", "surface", "STRING"),  # content.versions' schema
        ("review.tasks", "evidence", "ARRAY<STRING>"),
        ("policy.rules", "document", "STRING"),  # free-form: its JSON text
        ("policy.rules", "command", "STRING"),  # a control record's field in the union
        ("moderation.dlq", "raw", "STRING"),
    ],
)
def test_field_types(topic: str, name: str, sql_type: str) -> None:
    assert Column(name, sql_type) in columns(topic)


def test_an_unknown_topic_is_refused() -> None:
    with pytest.raises(sql_tables.SqlSchemaError, match="no schema for topic 'nope'"):
        columns("nope")


def test_options_for_a_prefixed_secured_deployment() -> None:
    where = Connection(
        bootstrap_servers="kafka-1:9093",
        topics={"moderation.decisions": "demo1.moderation.decisions"},
        properties={"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN"},
    )
    chosen = options("moderation.decisions", where)
    assert chosen["topic"] == "demo1.moderation.decisions"
    assert chosen["properties.bootstrap.servers"] == "kafka-1:9093"
    assert chosen["properties.security.protocol"] == "SASL_SSL"
    assert chosen["properties.sasl.mechanism"] == "PLAIN"
    assert chosen["properties.isolation.level"] == "read_committed"
    assert chosen["scan.startup.mode"] == "earliest-offset"
    assert chosen["scan.bounded.mode"] == "latest-offset"
    assert (
        options("moderation.decisions", Connection(bounded=False)).get("scan.bounded.mode") is None
    )


def test_inputs_skip_unparsable_records_outputs_fail_on_them() -> None:
    assert options("content.versions", Connection())["json.ignore-parse-errors"] == "true"
    assert options("content.validated", Connection())["json.ignore-parse-errors"] == "true"
    assert options("moderation.decisions", Connection())["json.ignore-parse-errors"] == "false"
    assert options("moderation.dlq", Connection())["json.fail-on-missing-field"] == "false"


def test_create_table_has_event_time_watermark_and_quoted_values() -> None:
    statement = create_table(
        "review.decisions",
        Connection(properties={"sasl.jaas.config": 'x required password="it\'s";'}),
    )
    assert statement.startswith("CREATE TABLE `review_decisions` (\n  `event_id` STRING,")
    assert "`_offset` BIGINT METADATA FROM 'offset' VIRTUAL" in statement
    assert "`event_time` AS COALESCE(TO_TIMESTAMP_LTZ(`ts`, 3), `_timestamp`)" in statement
    assert "WATERMARK FOR `event_time` AS `event_time` - INTERVAL '5' SECOND" in statement
    assert "'properties.sasl.jaas.config' = 'x required password=\"it''s\";'" in statement
    assert "`reason` STRING" in statement
