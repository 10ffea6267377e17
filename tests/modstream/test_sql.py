"""The pure parts of modstream/analytics/sql.py: a deployment's connection, the table listing of an
error, values that come back as JSON text; no JVM (the queries run in
tests/integration/test_sql.py)."""

from __future__ import annotations

import decimal
from pathlib import Path

from modstream.analytics import sql
from modstream.core.config import Settings


def _settings(tmp_path: Path, **env: str) -> Settings:
    return Settings.from_env(
        {"MODSTREAM_RUN_DIR": str(tmp_path), "MODSTREAM_CONFIG": "none", **env}
    )


def test_connection_of_a_prefixed_secured_deployment(tmp_path: Path) -> None:
    settings = _settings(
        tmp_path,
        MODSTREAM_KAFKA__BOOTSTRAP_SERVERS="kafka-1:9093",
        MODSTREAM_KAFKA__SECURITY_PROTOCOL="SSL",
        MODSTREAM_KAFKA__PROPERTIES='{"ssl.endpoint.identification.algorithm": "https"}',
    )
    where = sql.connection(settings, "demo1a2b3c")
    assert where.bootstrap_servers == "kafka-1:9093"
    assert where.topic("moderation.decisions") == "demo1a2b3c.moderation.decisions"
    assert where.properties == {
        "security.protocol": "SSL",
        "ssl.endpoint.identification.algorithm": "https",
    }
    assert sql.connection(settings, None).topic("review.tasks") == "review.tasks"


def test_the_listing_names_the_tables_and_missing_topics() -> None:
    tables = sql.Tables(["review_tasks", "moderation_decisions"], ["p.content.visibility"])
    assert tables.listing() == (
        "the tables: moderation_decisions, review_tasks; no table for the missing topic(s)"
        " p.content.visibility"
    )
    assert "none of this deployment's topics exists" in sql.Tables([], ["p.a"]).listing()


def test_json_text_columns_are_decoded_others_made_plain() -> None:
    values = ['{"required": 2}', '"2026-12-02T01:00:00Z"', decimal.Decimal("2"), None, "[1]"]
    assert sql._decoded(values, frozenset({0, 1, 3})) == (
        {"required": 2},
        "2026-12-02T01:00:00Z",
        2,
        None,
        "[1]",  # a string column holding JSON text stays text
    )


def test_queries_are_told_from_other_statements() -> None:
    for text in ("SELECT 1", "with x AS (SELECT 1) SELECT * FROM x", "(SELECT 1)", "VALUES (1)"):
        assert sql._QUERY.match(text), text
    for text in ("SHOW TABLES", "DESCRIBE moderation_decisions", "CREATE VIEW v AS SELECT 1"):
        assert not sql._QUERY.match(text), text
