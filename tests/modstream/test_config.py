"""Settings come from environment variables with safe local defaults."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from modstream.core.config import Settings


def test_defaults_are_the_documented_local_ports(tmp_path: Path) -> None:
    settings = Settings.from_env({"MODSTREAM_HOME": str(tmp_path)})
    assert (settings.kafka_port, settings.controller_port, settings.redis_port) == (
        9092,
        9093,
        6379,
    )
    assert settings.run_dir == tmp_path / ".run"
    assert settings.bootstrap_servers == "127.0.0.1:9092"
    assert settings.redis_url == "redis://127.0.0.1:6379/0"


def test_ports_and_run_dir_are_configurable(tmp_path: Path) -> None:
    settings = Settings.from_env(
        {
            "MODSTREAM_RUN_DIR": str(tmp_path / "r"),
            "MODSTREAM_KAFKA_PORT": "29092",
            "MODSTREAM_KAFKA_CONTROLLER_PORT": "29093",
            "MODSTREAM_REDIS_PORT": "26379",
        }
    )
    assert settings.run_dir == tmp_path / "r"
    assert settings.bootstrap_servers == "127.0.0.1:29092"


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"MODSTREAM_KAFKA_PORT": "kafka"}, "MODSTREAM_KAFKA_PORT: must be a port number"),
        ({"MODSTREAM_REDIS_PORT": "70000"}, "between 1 and 65535"),
        ({"MODSTREAM_REDIS_PORT": "9092"}, "must differ"),
    ],
)
def test_bad_settings_are_refused_with_the_variable_named(
    env: dict[str, str], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        Settings.from_env(env)


def test_empty_variables_count_as_unset(tmp_path: Path) -> None:
    settings = Settings.from_env(
        {"MODSTREAM_HOME": str(tmp_path), "MODSTREAM_RUN_DIR": "", "MODSTREAM_KAFKA_PORT": ""}
    )
    assert settings.run_dir == tmp_path / ".run"
    assert settings.kafka_port == 9092


SCRAM = {
    "MODSTREAM_KAFKA__SECURITY_PROTOCOL": "SASL_SSL",
    "MODSTREAM_KAFKA__SASL_MECHANISM": "SCRAM-SHA-512",
    "MODSTREAM_KAFKA__SASL_USERNAME": "modstream",
    "MODSTREAM_KAFKA__SASL_PASSWORD": 'pa"ss\\word',
}


def test_a_toml_file_configures_and_the_environment_overrides_it(tmp_path: Path) -> None:
    config = tmp_path / "prod.toml"
    config.write_text(
        'run_dir = "/srv/modstream"\n'
        "[kafka]\n"
        'bootstrap_servers = "b1:9096,b2:9096"\n'
        'security_protocol = "SASL_SSL"\n'
        'sasl_mechanism = "SCRAM-SHA-256"\n'
        'sasl_username = "from-file"\n'
        'sasl_password = "file-secret"\n'
        'ssl_cafile = "/etc/ssl/ca.pem"\n'
        '[kafka.properties]\n"ssl.endpoint.identification.algorithm" = "https"\n'
        '[redis]\nurl = "rediss://:pw@redis.internal:6380/2"\n'
        "[topics]\nreplication_factor = 3\n"
    )
    settings = Settings.from_env(
        {"MODSTREAM_CONFIG": str(config), "MODSTREAM_KAFKA__SASL_USERNAME": "from-env"}
    )
    assert settings.config_file == config
    assert settings.run_dir == Path("/srv/modstream")
    assert settings.bootstrap_servers == "b1:9096,b2:9096" and not settings.local_kafka
    assert settings.kafka.sasl_username == "from-env"  # the environment wins
    assert settings.redis_url == "rediss://:pw@redis.internal:6380/2" and not settings.local_redis
    assert settings.topics.replication_factor == 3
    java = settings.kafka.java_properties()
    assert java["security.protocol"] == "SASL_SSL"
    assert java["sasl.mechanism"] == "SCRAM-SHA-256"
    assert 'username="from-env" password="file-secret";' in java["sasl.jaas.config"]
    assert java["ssl.truststore.location"] == "/etc/ssl/ca.pem"
    assert java["ssl.endpoint.identification.algorithm"] == "https"
    assert settings.kafka.python_options() == {
        "security_protocol": "SASL_SSL",
        "sasl_mechanism": "SCRAM-SHA-256",
        "sasl_plain_username": "from-env",
        "sasl_plain_password": "file-secret",
        "ssl_cafile": "/etc/ssl/ca.pem",
    }


def test_the_jaas_line_quotes_what_a_password_holds() -> None:
    jaas = Settings.from_env(SCRAM).kafka.java_properties()["sasl.jaas.config"]
    assert jaas == (
        "org.apache.flink.kafka.shaded.org.apache.kafka.common.security.scram.ScramLoginModule"
        " required "
        'username="modstream" password="pa\\"ss\\\\word";'
    )


def test_secrets_are_not_printed_with_the_settings(tmp_path: Path) -> None:
    settings = Settings.from_env({**SCRAM, "MODSTREAM_REDIS__URL": "redis://:topsecret@h:1/0"})
    assert 'pa"ss' not in repr(settings) and "topsecret" not in repr(settings)


def test_a_default_toml_in_the_project_home_is_read(tmp_path: Path) -> None:
    (tmp_path / "modstream.toml").write_text("kafka_port = 19092\n")
    assert Settings.from_env({"MODSTREAM_HOME": str(tmp_path)}).bootstrap_servers.endswith(":19092")


@pytest.mark.parametrize(
    ("env", "message"),
    [
        (
            {"MODSTREAM_KAFKA__SECURITY_PROTOCOL": "SASL_PLAINTEXT"},
            "MODSTREAM_KAFKA: security_protocol SASL_PLAINTEXT needs sasl_mechanism",
        ),
        ({"MODSTREAM_KAFKA__SECURITY_PROTOCOL": "TLS"}, "MODSTREAM_KAFKA__SECURITY_PROTOCOL"),
        (
            {"MODSTREAM_KAFKA__PROPERTIES": '{"transactional.id": "x"}'},
            "set by modstream",
        ),
        ({"MODSTREAM_REDIS__URL": "http://h:1"}, "redis:// or rediss://"),
        ({"MODSTREAM_CONFIG": "/nonexistent/modstream.toml"}, "no such file"),
        ({"MODSTREAM_TOPICS__REPLICATION_FACTOR": "0"}, "MODSTREAM_TOPICS__REPLICATION_FACTOR"),
    ],
)
def test_bad_security_settings_are_refused_with_where_they_came_from(
    env: dict[str, str], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        Settings.from_env(env)


def test_a_bad_key_in_the_toml_file_names_the_file(tmp_path: Path) -> None:
    config = tmp_path / "bad.toml"
    config.write_text('[kafka]\nsecurity_protocol = "SASL_SSL"\n')
    with pytest.raises(ValueError, match=r"`kafka` in .*bad.toml"):
        Settings.from_env({"MODSTREAM_CONFIG": str(config)})


def test_the_topic_layout_sets_partitions_of_the_partitioned_topics_only() -> None:
    from modstream.core.topics import TOPICS, laid_out

    layout = Settings.from_env({"MODSTREAM_TOPICS__PARTITIONS": "12"}).topics
    counts = {spec.name: spec.partitions for spec in laid_out(TOPICS, layout)}
    assert counts["content.versions"] == 12 and counts["moderation.dlq"] == 12
    assert counts["policy.rules"] == 1 and counts["hash.bank"] == 1
    assert laid_out(TOPICS, Settings.from_env({}).topics) == list(TOPICS)


def test_the_state_backend_settings_become_flink_configuration() -> None:
    assert Settings.from_env({}).flink.conf() == {
        "state.backend.type": "hashmap",
        "execution.checkpointing.incremental": "false",
    }
    rocks = Settings.from_env(
        {"MODSTREAM_FLINK__STATE_BACKEND": "rocksdb", "MODSTREAM_FLINK__SAVEPOINT_DIR": "s3://b/sp"}
    )
    assert rocks.flink.conf() == {
        "state.backend.type": "rocksdb",
        "execution.checkpointing.incremental": "true",
        "state.backend.rocksdb.compaction.style": "UNIVERSAL",
        "state.backend.rocksdb.use-bloom-filter": "true",
        "execution.checkpointing.savepoint-dir": "s3://b/sp",
    }
    with pytest.raises(ValueError, match="MODSTREAM_FLINK__STATE_BACKEND"):
        Settings.from_env({"MODSTREAM_FLINK__STATE_BACKEND": "forst"})


def test_config_show_prints_what_resolves_without_a_secret(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from modstream.cli import main as cli

    monkeypatch.setenv("MODSTREAM_KAFKA__SECURITY_PROTOCOL", "SASL_SSL")
    monkeypatch.setenv("MODSTREAM_KAFKA__SASL_MECHANISM", "PLAIN")
    monkeypatch.setenv("MODSTREAM_KAFKA__SASL_USERNAME", "svc")
    monkeypatch.setenv("MODSTREAM_KAFKA__SASL_PASSWORD", "kafka-secret")
    monkeypatch.setenv("MODSTREAM_KAFKA__PROPERTIES", '{"ssl.key.password": "key-secret"}')
    monkeypatch.setenv("MODSTREAM_KAFKA__BOOTSTRAP_SERVERS", "k1:9096")
    monkeypatch.setenv("MODSTREAM_REDIS__URL", "rediss://:redis-secret@r:6380/1")
    assert cli.main(["config", "show"]) == 0
    shown = capsys.readouterr().out
    described = json.loads(shown)
    assert described["kafka"]["bootstrap_servers"] == "k1:9096"
    assert described["kafka"]["sasl_username"] == "svc" and not described["kafka"]["local"]
    assert described["redis"]["url"] == "rediss://:**********@r:6380/1"
    assert "secret" not in shown


def test_the_example_config_file_is_valid(tmp_path: Path) -> None:
    from modstream.core.config import PROJECT_ROOT

    example = PROJECT_ROOT / "deploy" / "modstream.example.toml"
    settings = Settings.from_env(
        {"MODSTREAM_CONFIG": str(example), "MODSTREAM_KAFKA__SASL_PASSWORD": "from-env"}
    )
    assert (
        settings.kafka.security_protocol == "SASL_SSL" and settings.topics.replication_factor == 3
    )
    assert settings.flink.state_backend == "rocksdb"


def test_a_typo_or_bad_toml_in_the_file_is_refused_not_ignored(tmp_path: Path) -> None:
    config = tmp_path / "typo.toml"
    config.write_text('run_dri = "/srv"\n')
    with pytest.raises(ValueError, match=r"unknown key.*run_dri"):
        Settings.from_env({"MODSTREAM_CONFIG": str(config)})
    config.write_text("[kafka\n")
    with pytest.raises(ValueError, match=r"typo\.toml"):
        Settings.from_env({"MODSTREAM_CONFIG": str(config)})
    config.write_text('[kafka]\nbootstrap = "k:9092"\n')
    with pytest.raises(ValueError, match="MODSTREAM_KAFKA__BOOTSTRAP"):
        Settings.from_env({"MODSTREAM_CONFIG": str(config)})
