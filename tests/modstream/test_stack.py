"""Stack pieces that need no running service: configuration, pid ownership, reachability."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

from modstream.core.config import Settings
from modstream.stack.local import (
    Kafka,
    Redis,
    StackError,
    broker_reachable,
    external,
    port_open,
    services,
)


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
    from modstream.jobs.runtime import TRANSACTION_TIMEOUT_MS

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


def test_a_sasl_setting_makes_the_local_broker_listen_with_scram(tmp_path: Path) -> None:
    secured = Settings.from_env(
        {
            "MODSTREAM_RUN_DIR": str(tmp_path),
            "MODSTREAM_KAFKA_PORT": "29092",
            "MODSTREAM_KAFKA__SECURITY_PROTOCOL": "SASL_PLAINTEXT",
            "MODSTREAM_KAFKA__SASL_MECHANISM": "SCRAM-SHA-512",
            "MODSTREAM_KAFKA__SASL_USERNAME": "modstream",
            "MODSTREAM_KAFKA__SASL_PASSWORD": "secret",
        }
    )
    kafka = Kafka(secured)
    lines = set(kafka.properties().splitlines())
    assert "listeners=SASL_PLAINTEXT://127.0.0.1:29092,CONTROLLER://127.0.0.1:9093" in lines
    assert "sasl.enabled.mechanisms=SCRAM-SHA-512" in lines
    assert "inter.broker.listener.name=SASL_PLAINTEXT" in lines
    # The broker's own classes are not the Flink connector's shaded ones.
    assert (
        "listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config=org.apache.kafka.common."
        'security.scram.ScramLoginModule required username="modstream" password="secret";'
    ) in lines
    assert kafka._scram_user() == ["--add-scram", "SCRAM-SHA-512=[name=modstream,password=secret]"]


def test_the_local_broker_refuses_a_protocol_it_cannot_run(tmp_path: Path) -> None:
    tls = Settings.from_env(
        {"MODSTREAM_RUN_DIR": str(tmp_path), "MODSTREAM_KAFKA__SECURITY_PROTOCOL": "SSL"}
    )
    with pytest.raises(StackError, match="PLAINTEXT or SASL_PLAINTEXT with SCRAM"):
        Kafka(tls).properties()


def test_a_redis_password_goes_to_a_private_file_not_the_command_line(tmp_path: Path) -> None:
    secured = Settings.from_env(
        {
            "MODSTREAM_RUN_DIR": str(tmp_path),
            "MODSTREAM_REDIS_PORT": "26379",
            "MODSTREAM_REDIS__URL": "redis://:s%40cret@127.0.0.1:26379/0",
        }
    )
    assert secured.local_redis
    redis = Redis(secured)
    redis.prepare()
    assert redis.auth_file.read_text() == 'requirepass "s@cret"\n'
    assert redis.auth_file.stat().st_mode & 0o077 == 0
    assert not any("s@cret" in part for part in redis.command())


def test_services_elsewhere_are_not_started(tmp_path: Path) -> None:
    remote = Settings.from_env(
        {
            "MODSTREAM_RUN_DIR": str(tmp_path),
            "MODSTREAM_KAFKA__BOOTSTRAP_SERVERS": "kafka.internal:9092",
            "MODSTREAM_REDIS__URL": "redis://redis.internal:6379/0",
        }
    )
    assert services(remote) == []
    assert [line.split(":")[0] for line in external(remote)] == ["kafka", "redis"]
