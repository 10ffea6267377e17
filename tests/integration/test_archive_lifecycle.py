"""Data outlives `modstream down` and `up` (issue 16, item 6): a topic's records (the broker's
KRaft log dir in the run directory), Redis's keys (its append-only file) and the Parquet
archive; a second `archive` after the restart adds nothing, and `modstream clean` removes
them all. Its own small stack on free ports, like test_stack_lifecycle.py."""

from __future__ import annotations

import dataclasses
import json
import os
import uuid
from pathlib import Path

import pytest
import redis

from modstream.contract.records import read_values
from modstream.core import kafkaio, topics
from modstream.core.config import Settings
from modstream.stack import deployments
from modstream.testing import archive as archive_data
from modstream.testing.stack import free_ports, modstream

pytestmark = pytest.mark.integration


def _ok(result: object) -> str:
    assert result.returncode == 0, result.stdout + result.stderr  # type: ignore[attr-defined]
    return str(result.stdout)  # type: ignore[attr-defined]


def _query(env: dict[str, str], prefix: str, sql: str) -> list[dict[str, object]]:
    out = _ok(modstream(env, "query", sql, "--prefix", prefix, "--format", "json"))
    return [json.loads(line) for line in out.splitlines()]


def test_topics_redis_and_the_archive_outlive_down_and_up(tmp_path: Path) -> None:
    kafka_port, controller_port, redis_port = free_ports(3)
    run_dir = tmp_path / "run"
    env = {
        **os.environ,
        "MODSTREAM_RUN_DIR": str(run_dir),
        "MODSTREAM_KAFKA_PORT": str(kafka_port),
        "MODSTREAM_KAFKA_CONTROLLER_PORT": str(controller_port),
        "MODSTREAM_REDIS_PORT": str(redis_port),
        "MODSTREAM_CONFIG": "none",
    }
    settings = Settings.from_env(env)
    prefix = f"it{uuid.uuid4().hex[:8]}"
    names = deployments.topic_names(prefix)
    decisions = archive_data.records()["moderation.decisions"][:25]
    try:
        _ok(modstream(env, "up"))
        spec = next(s for s in topics.TOPICS if s.name == "moderation.decisions")
        topics.create_topics(
            settings.bootstrap_servers,
            [dataclasses.replace(spec, name=names[spec.name])],
            say=lambda _: None,
        )
        kafkaio.produce(
            settings.bootstrap_servers,
            names["moderation.decisions"],
            [(d["content_id"], json.dumps(d).encode()) for d in decisions],  # type: ignore[misc]
        )
        redis.Redis.from_url(settings.redis_url).set("modstream-it:kept", "yes")
        archived = _ok(modstream(env, "archive", "--prefix", prefix))
        assert "25 rows into" in archived

        _ok(modstream(env, "down"))
        _ok(modstream(env, "up"))

        kept = read_values(settings.bootstrap_servers, names["moderation.decisions"])
        assert sorted(d["decision_id"] for d in kept) == sorted(
            str(d["decision_id"]) for d in decisions
        )
        assert redis.Redis.from_url(settings.redis_url).get("modstream-it:kept") == b"yes"
        count = "SELECT count(*) AS n, count(DISTINCT decision_id) AS ids FROM decisions"
        assert _query(env, prefix, count) == [{"n": 25, "ids": 25}]
        again = _ok(modstream(env, "archive", "--prefix", prefix))
        assert "0 rows into" in again  # the manifest knew how far it had archived
        assert _query(env, prefix, count) == [{"n": 25, "ids": 25}]

        cleaned = _ok(modstream(env, "clean"))
        assert f"removed {run_dir / 'archive'}" in cleaned
        assert not (run_dir / "kafka").exists() and not (run_dir / "redis").exists()
    finally:
        modstream(env, "down")
