"""modstream.stack.cluster.script_env: Flink's scripts see this cluster's home, never the FLINK_*
variables a py4j gateway in the same process set to the wheel (its lib/ lacks flink-python)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from modstream.core.config import Settings
from modstream.stack import cluster
from modstream.stack.local import StackError


def test_the_cluster_scripts_ignore_flink_variables_a_gateway_left(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    for name in ("FLINK_HOME", "FLINK_LIB_DIR", "FLINK_OPT_DIR", "FLINK_LOG_DIR"):
        monkeypatch.setenv(name, "/the/wheel")
    monkeypatch.setenv("KEEP_ME", "1")
    env = cluster.script_env(tmp_path)
    assert sorted(key for key in env if key.startswith("FLINK_")) == ["FLINK_CONF_DIR"]
    assert env["FLINK_CONF_DIR"] == str(tmp_path / "conf")
    assert env["KEEP_ME"] == "1"


def test_the_cluster_gets_no_python_of_ours(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Its TaskManagers run only what a job ships (modstream/stack/package.py)."""
    monkeypatch.setenv("PYTHONPATH", "/the/project")
    monkeypatch.setenv("VIRTUAL_ENV", sys.prefix)
    monkeypatch.setenv("PATH", os.pathsep.join([str(Path(sys.prefix) / "bin"), "/usr/bin"]))
    env = cluster.script_env(tmp_path)
    assert not {"PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV"} & set(env)
    assert env["PATH"] == "/usr/bin"
    configuration = cluster._configuration(Settings.from_env({}), 8081, 6123, 4)
    assert "python.executable" not in configuration
    assert "python.execution-mode: thread" in configuration


def test_submit_refuses_an_unknown_job_and_a_missing_cluster() -> None:
    with pytest.raises(StackError, match="unknown job 'ingest'"):
        cluster.submit("ingest", "127.0.0.1:1", [])
    with pytest.raises(StackError, match=r"no Flink cluster answers at 127\.0\.0\.1:1"):
        cluster.submit("moderation", "127.0.0.1:1", [])
