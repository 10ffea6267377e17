"""With no broker, integration tests fail fast with a message that says what to do."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from modstream.core.config import PROJECT_ROOT
from modstream.testing.stack import free_ports

pytestmark = pytest.mark.integration


def test_a_stopped_broker_fails_tests_with_a_clear_message_in_bounded_time() -> None:
    kafka_port, controller_port, redis_port = free_ports(3)
    env = {
        **os.environ,
        "MODSTREAM_KAFKA_PORT": str(kafka_port),
        "MODSTREAM_KAFKA_CONTROLLER_PORT": str(controller_port),
        "MODSTREAM_REDIS_PORT": str(redis_port),
    }
    target = (
        "tests/integration/test_ingest_job.py::"
        "test_malformed_records_reach_the_dlq_and_the_job_keeps_running"
    )
    # The timeout turns a hang into a failure of this test; it is a bound, not a benchmark.
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", target],
        cwd=PROJECT_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 1, result.stdout[-2000:]
    assert f"Kafka broker at 127.0.0.1:{kafka_port} is not reachable" in result.stdout
    assert "make test" in result.stdout
