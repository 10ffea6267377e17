"""`modstream up` / `down` on their own ports and run directory: nothing left behind."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from modstream.stack.local import port_open
from modstream.testing.stack import free_ports, modstream, running_processes_mentioning

pytestmark = pytest.mark.integration


def test_up_then_down_leaves_no_process_and_no_port(tmp_path: Path) -> None:
    kafka_port, controller_port, redis_port = free_ports(3)
    run_dir = tmp_path / "run"
    env = {
        **os.environ,
        "MODSTREAM_RUN_DIR": str(run_dir),
        "MODSTREAM_KAFKA_PORT": str(kafka_port),
        "MODSTREAM_KAFKA_CONTROLLER_PORT": str(controller_port),
        "MODSTREAM_REDIS_PORT": str(redis_port),
    }

    up = modstream(env, "up")
    assert up.returncode == 0, up.stdout + up.stderr
    assert f"kafka: up at 127.0.0.1:{kafka_port}" in up.stdout
    assert f"redis: up at 127.0.0.1:{redis_port}" in up.stdout
    assert all(port_open(port) for port in (kafka_port, controller_port, redis_port))

    again = modstream(env, "up")
    assert again.returncode == 0
    assert "kafka: already up" in again.stdout and "redis: already up" in again.stdout
    status = modstream(env, "status")
    assert status.returncode == 0
    assert status.stdout.count("healthy") == 2

    down = modstream(env, "down")
    assert down.returncode == 0, down.stdout + down.stderr
    assert not any(port_open(port) for port in (kafka_port, controller_port, redis_port))
    assert running_processes_mentioning(str(run_dir)) == []
    assert running_processes_mentioning(f"127.0.0.1:{redis_port}") == []
    assert not list(run_dir.glob("*/*.pid"))
    stopped = modstream(env, "status")
    assert stopped.returncode == 3
    assert stopped.stdout.count("stopped") == 2
