"""Stack pieces that need no running service: configuration, pid ownership, reachability."""

from __future__ import annotations

import os
import socket
from pathlib import Path

from modstream.config import Settings
from modstream.stack import Kafka, Redis, broker_reachable, port_open


def settings(tmp_path: Path) -> Settings:
    return Settings(
        project_root=Path(__file__).resolve().parents[2],
        run_dir=tmp_path,
        kafka_port=29092,
        controller_port=29093,
        redis_port=26379,
    )


def test_broker_properties_bind_loopback_and_allow_the_sinks_transactions(tmp_path: Path) -> None:
    text = Kafka(settings(tmp_path)).properties()
    lines = set(text.splitlines())
    assert "listeners=PLAINTEXT://127.0.0.1:29092,CONTROLLER://127.0.0.1:29093" in lines
    assert "transaction.state.log.replication.factor=1" in lines
    assert "transaction.state.log.min.isr=1" in lines
    from jobs.runtime import TRANSACTION_TIMEOUT_MS

    max_timeout = next(
        int(line.split("=")[1]) for line in lines if line.startswith("transaction.max.timeout.ms=")
    )
    assert max_timeout >= TRANSACTION_TIMEOUT_MS


def test_a_pid_file_naming_someone_elses_process_is_not_ours(tmp_path: Path) -> None:
    for service in (Kafka(settings(tmp_path)), Redis(settings(tmp_path))):
        service.pid_file.parent.mkdir(parents=True, exist_ok=True)
        service.pid_file.write_text(f"{os.getpid()}\n")  # pytest's pid: alive, not ours
        assert service.pid() is None
        service.pid_file.write_text("not a pid\n")
        assert service.pid() is None


def test_unreachable_broker_is_reported_not_hung() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        free_port = probe.getsockname()[1]
    assert not port_open(free_port)
    reason = broker_reachable(f"127.0.0.1:{free_port}", timeout_s=2.0)
    assert reason is not None and reason != ""
