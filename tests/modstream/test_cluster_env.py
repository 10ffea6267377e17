"""modstream.cluster.script_env: Flink's scripts see this cluster's home, never the FLINK_*
variables a py4j gateway in the same process set to the wheel (its lib/ lacks flink-python)."""

from __future__ import annotations

from pathlib import Path

import pytest

from modstream import cluster


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
    assert env["PYTHONPATH"]
