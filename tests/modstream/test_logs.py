"""One logging setup for commands and jobs (modstream/core/logs.py): JSON lines or readable text on
stderr, the jobs' existing stdlib `LOG` calls included, stdout left alone."""

from __future__ import annotations

import json
import logging
import os

import pytest

from modstream.cli.main import main
from modstream.core import logs


def json_lines(text: str) -> list[dict[str, object]]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def test_json_lines_carry_timestamp_level_logger_event_and_the_command(
    capsys: pytest.CaptureFixture[str],
) -> None:
    logs.configure(True, "INFO", command="replay")
    logging.getLogger("modstream.ops.replay").warning("%d records skipped", 3)
    logs.get("modstream.ops.replay").info("sent", records=12)
    logging.getLogger("modstream.ops.replay").debug("below the level: not shown")
    logging.getLogger("kafka.conn").info("a library's INFO: not shown")
    logging.getLogger("kafka.conn").warning("a library's warning")
    out, err = capsys.readouterr()
    assert out == ""
    first, second, third = json_lines(err)
    assert third["event"] == "a library's warning"
    assert {"timestamp", "level", "logger", "event", "command"} <= first.keys()
    assert (first["event"], first["level"], first["logger"], first["command"]) == (
        "3 records skipped",
        "warning",
        "modstream.ops.replay",
        "replay",
    )
    assert str(first["timestamp"]).endswith("Z")
    assert (second["event"], second["records"], second["level"]) == ("sent", 12, "info")


def test_an_exception_is_one_json_line_with_its_traceback(
    capsys: pytest.CaptureFixture[str],
) -> None:
    logs.configure(True, "INFO", command="dlq")
    try:
        raise ValueError("bad field")
    except ValueError:
        logging.getLogger("modstream.ops.dlq").exception("replay failed")
    (line,) = json_lines(capsys.readouterr().err)
    assert line["event"] == "replay failed"
    assert "ValueError: bad field" in str(line["exception"])


def test_the_text_format_is_one_readable_line_not_json(
    capsys: pytest.CaptureFixture[str],
) -> None:
    logs.configure(False, "INFO", command="replay")
    logging.getLogger("modstream.ops.replay").warning("%d records skipped", 3)
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1
    assert "3 records skipped" in err and "warning" in err and "command=replay" in err
    with pytest.raises(json.JSONDecodeError):
        json.loads(err)


def test_a_job_modules_stdlib_log_calls_come_out_as_json_with_the_job(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from modstream.jobs import reconciler

    logs.configure_job("reconciler", settings(log_format="json"))
    reconciler.LOG.warning("reconciler: audit read failed (%s)", "TimeoutError")
    (line,) = json_lines(capsys.readouterr().err)
    assert line["event"] == "reconciler: audit read failed (TimeoutError)"
    assert (line["logger"], line["job"], line["level"]) == (
        "modstream.reconciler",
        "reconciler",
        "warning",
    )
    assert os.environ["MODSTREAM_LOG_FORMAT"] == "json"  # what the processes it starts inherit


def test_modstream_log_format_json_config_show(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The global option, before the command: stdout stays the command's (one JSON document
    here), and logs are JSON lines on stderr."""
    monkeypatch.setenv("MODSTREAM_LOG_LEVEL", "WARNING")  # the option wins over neither
    assert main(["--log-format", "json", "config", "show"]) == 0
    out, err = capsys.readouterr()
    shown = json.loads(out)
    assert (shown["log_format"], shown["log_level"]) == ("text", "WARNING")  # the settings'
    assert err == ""
    logging.getLogger("modstream.test").warning("after the command")
    (line,) = json_lines(capsys.readouterr().err)
    assert (line["event"], line["command"]) == ("after the command", "config")


def test_the_environment_and_the_option_choose_the_format(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MODSTREAM_LOG_FORMAT", "json")
    assert main(["schemas", "check"]) == 0
    capsys.readouterr()
    logging.getLogger("modstream.test").warning("from the environment")
    assert json_lines(capsys.readouterr().err)[0]["event"] == "from the environment"
    assert main(["--log-format", "text", "schemas", "check"]) == 0
    capsys.readouterr()
    logging.getLogger("modstream.test").warning("from the option")
    assert "from the option" in capsys.readouterr().err


def test_a_log_format_the_settings_do_not_know_is_refused(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MODSTREAM_LOG_FORMAT", "xml")
    assert main(["config", "show"]) == 2
    assert "MODSTREAM_LOG_FORMAT" in capsys.readouterr().err


def settings(**overrides: str) -> object:
    from modstream.core.config import Settings

    return Settings.from_env(
        {
            "MODSTREAM_CONFIG": "none",
            **{f"MODSTREAM_{key.upper()}": value for key, value in overrides.items()},
        }
    )
