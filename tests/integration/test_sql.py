"""`modstream sql` on the real broker (one JVM for the whole test): a deployment's topics as
tables, a join of decisions with the uploads' surface, read_committed (an aborted
transaction's decision is not counted), an input topic's non-JSON record skipped, and a wrong
statement refused with the tables listed. The ready queries run on a demo's topics in
tests/integration/test_demo.py."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from kafka import KafkaProducer

from modstream.analytics import sql
from modstream.analytics.sql_script import Script, inline_script, read_script
from modstream.contract.outputs import Completeness, Decision
from modstream.core import topics
from modstream.core.config import Settings, kafka_options
from modstream.testing.stack import Kafka

pytestmark = pytest.mark.integration

BY_SURFACE = """\
-- Decided versions and blocks per surface (the latest revision of each version).
WITH latest AS (
  SELECT content_id, content_version, outcome,
    ROW_NUMBER() OVER (
      PARTITION BY content_id, content_version ORDER BY decision_revision DESC) AS newest
  FROM moderation_decisions
)
SELECT c.surface, COUNT(*) AS versions,
  SUM(CASE WHEN l.outcome = 'BLOCK' THEN 1 ELSE 0 END) AS blocked,
  MAX(l.outcome) AS outcome
FROM latest AS l
JOIN content_versions AS c ON c.content_id = l.content_id AND c.content_version = l.content_version
WHERE l.newest = 1 AND c.`type` = 'upsert'
GROUP BY c.surface
ORDER BY c.surface
"""


def _decision(content_id: str, revision: int, outcome: str, ts: int) -> bytes:
    return (
        Decision(
            decision_id=f"{content_id}-{revision}",
            content_id=content_id,
            content_version=1,
            decision_revision=revision,
            outcome=outcome,  # type: ignore[arg-type]
            reasons=[],
            matched_rules=[],
            policy_id="global",
            policy_version=1,
            evidence=[],
            completeness=Completeness(required=1, received=1, unknown=[]),
            trigger="evidence" if revision > 1 else "fast_gate",
            state="blocked" if outcome == "BLOCK" else "approved",
            ts=ts,
        )
        .model_dump_json()
        .encode()
    )


def _upload(content_id: str, surface: str, ts: int) -> bytes:
    return (
        f'{{"event_id": "up-{content_id}", "type": "upsert", "content_id": "{content_id}",'
        f' "content_version": 1, "ts": {ts}, "surface": "{surface}", "author_id": "u1"}}'
    ).encode()


def _aborted(bootstrap_servers: str, topic: str, value: bytes) -> None:
    """`value` written in a transaction that is then aborted."""
    producer = KafkaProducer(
        bootstrap_servers=bootstrap_servers,
        transactional_id=f"it-sql-{uuid.uuid4().hex[:8]}",
        **kafka_options(),
    )
    try:
        producer.init_transactions()
        producer.begin_transaction()
        producer.send(topic, key=b"aborted", value=value).get(timeout=30)
        producer.abort_transaction()
    finally:
        producer.close(timeout=10)


def test_queries_over_a_deployments_topics(stack: Settings, kafka: Kafka, tmp_path: Path) -> None:
    prefix = f"itsql{uuid.uuid4().hex[:8]}"
    names = {
        name: topics.physical(name, prefix) for name in ("moderation.decisions", "content.versions")
    }
    kafka.create_topics(list(names.values()))
    ts = 1_796_000_000_000
    kafka.produce(
        names["content.versions"],
        [
            ("a", _upload("a", "public_post", ts)),
            ("b", _upload("b", "comment", ts + 1)),
            ("x", b"not json at all"),  # what the ingest check refuses: skipped here
        ],
    )
    kafka.produce(
        names["moderation.decisions"],
        [
            ("a", _decision("a", 1, "PENDING", ts)),
            ("a", _decision("a", 2, "BLOCK", ts + 5)),
            ("b", _decision("b", 1, "PENDING", ts + 1)),
        ],
    )
    _aborted(stack.bootstrap_servers, names["moderation.decisions"], _decision("b", 2, "BLOCK", 9))
    query = tmp_path / "by_surface.sql"
    query.write_text(BY_SURFACE)
    scripts: list[Script] = [
        read_script(query),
        inline_script("SELECT COUNT(*) AS n, MIN(event_time) AS since FROM moderation_decisions"),
        inline_script("SELECT *\nFROM moderation_shadow"),  # its topic does not exist here
    ]

    results = []
    with pytest.raises(sql.SqlError) as refused:
        for result in sql.execute(stack, prefix, scripts):
            results.append(result)

    by_surface, counted = results
    assert by_surface.title.startswith("Decided versions and blocks per surface")
    assert by_surface.columns == ("surface", "versions", "blocked", "outcome")
    assert by_surface.rows == (("comment", 1, 0, "PENDING"), ("public_post", 1, 1, "BLOCK"))
    assert counted.rows == ((3, "2026-11-30T00:53:20Z"),)
    assert refused.value.exit_code == 2
    message = str(refused.value)
    assert message.startswith("query:2:6: Object 'moderation_shadow' not found")
    assert "the tables: content_versions, moderation_decisions;" in message
    assert f"{prefix}.moderation.shadow" in message
    assert "\tat " not in message
