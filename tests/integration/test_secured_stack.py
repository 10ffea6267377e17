"""The stack with Kafka SASL/SCRAM and Redis AUTH (issue 15): every client modstream makes (the
Flink jobs' source, sink and end-offset checks, the restore's admin client, the commands'
producers and consumers, the Content Service's Redis) reaches them with the credentials of
the settings, and the demo still ends with every action enforced."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import redis

from modstream.core.config import Settings
from modstream.stack.local import broker_reachable
from modstream.testing.stack import free_ports, modstream

pytestmark = pytest.mark.integration

SCRAM_USER = "modstream-demo"
SCRAM_PASSWORD = "scram-pw-7f3a"
REDIS_PASSWORD = "redis-pw-91c2"


def secured_env(tmp_path: Path) -> dict[str, str]:
    kafka_port, controller_port, redis_port = free_ports(3)
    return {
        **os.environ,
        "MODSTREAM_RUN_DIR": str(tmp_path / "run"),
        "MODSTREAM_KAFKA_PORT": str(kafka_port),
        "MODSTREAM_KAFKA_CONTROLLER_PORT": str(controller_port),
        "MODSTREAM_REDIS_PORT": str(redis_port),
        "MODSTREAM_KAFKA__SECURITY_PROTOCOL": "SASL_PLAINTEXT",
        "MODSTREAM_KAFKA__SASL_MECHANISM": "SCRAM-SHA-512",
        "MODSTREAM_KAFKA__SASL_USERNAME": SCRAM_USER,
        "MODSTREAM_KAFKA__SASL_PASSWORD": SCRAM_PASSWORD,
        "MODSTREAM_REDIS__URL": f"redis://:{REDIS_PASSWORD}@127.0.0.1:{redis_port}/0",
    }


def test_the_demo_ends_enforced_on_kafka_with_sasl_scram_and_redis_with_auth(
    tmp_path: Path,
) -> None:
    env = secured_env(tmp_path)
    settings = Settings.from_env(env)
    up = modstream(env, "up")
    assert up.returncode == 0, up.stdout + up.stderr
    try:
        # Really secured: a client without credentials is turned away by both.
        assert broker_reachable(settings.bootstrap_servers, 5.0) is not None
        assert (
            broker_reachable(settings.bootstrap_servers, 5.0, settings.kafka.python_options())
            is None
        )
        with pytest.raises(redis.AuthenticationError):
            redis.Redis(port=settings.redis_port, socket_timeout=3).ping()
        wrong = settings.redis_url.replace(REDIS_PASSWORD, "not-the-password")
        with pytest.raises(redis.AuthenticationError):
            redis.Redis.from_url(wrong, socket_timeout=3).ping()

        demo = modstream(env, "demo", "--events", "60", "--json", timeout_s=600)
        assert demo.returncode == 0, demo.stdout[-2000:] + demo.stderr[-3000:]
        summary = json.loads(demo.stdout.strip().splitlines()[-1])
        assert summary["content_versions"] >= 60 and summary["actions"] > 0
        assert summary["applied"] == summary["actions"]
        assert summary["visibility_mismatches"] == 0
        assert summary["discrepancies_open"] == 0
        assert summary["review_tasks"] > 0 and summary["dlq"] > 0
        # The Content Service's store is the secured Redis: it holds what was applied.
        store = redis.Redis.from_url(settings.redis_url, socket_timeout=3)
        assert store.dbsize() > 0
    finally:
        down = modstream(env, "down")
        assert down.returncode == 0, down.stdout + down.stderr
