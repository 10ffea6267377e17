"""Settings come from environment variables with safe local defaults."""

from __future__ import annotations

from pathlib import Path

import pytest

from modstream.config import Settings


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
        ({"MODSTREAM_KAFKA_PORT": "kafka"}, "MODSTREAM_KAFKA_PORT must be a port number"),
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
