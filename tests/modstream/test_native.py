"""The per-version code compiled with mypyc (modstream/core/native.py): served only when built
from the sources on disk, and deciding exactly as the same code run as Python."""

from __future__ import annotations

import ast
import importlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from modstream.core import native

# One pass of `make bench-step`'s workload through the per-version code: every output in order
# and every version's stored state, hashed; and how the step ran.
_PASS = """
import hashlib, json
from modstream.bench.compare import step_engine
from modstream.bench.fire import NOW_MS
from modstream.bench.step import workload
from modstream.core import native

records, until = workload()
engine = step_engine(now_ms=NOW_MS)
for topic, raw in records:
    engine.admit(topic, raw, topic, 0)
outputs = hashlib.sha256()
count = 0
for output in engine.drain(until):
    outputs.update(repr(output).encode())
    count += 1
states = hashlib.sha256()
for key in sorted(engine.states):
    value = engine.states[key]
    states.update(key.encode() + (value if isinstance(value, bytes) else value.encode()))
# The same workload as the job's keyed operator runs it (BatchedModerate, compiled too).
from modstream.bench.fire import FIRE_STEP_MS, Driver, keyed_rows
driver = Driver(engine.config)
driver.run(keyed_rows(engine.config, records), until, FIRE_STEP_MS)
fired = hashlib.sha256()
for key in sorted(driver.values):
    fired.update(key.encode() + driver.values[key])
print(json.dumps({"runs": native.in_use(), "outputs": outputs.hexdigest(), "count": count,
                  "states": states.hexdigest(), "versions": len(engine.states),
                  "fired": fired.hexdigest(), "fired_outputs": driver.outputs}))
"""


def _one_pass(switch: str) -> dict[str, object]:
    env = {**os.environ, native.ENV_SWITCH: switch}
    done = subprocess.run(
        [sys.executable, "-c", _PASS], env=env, capture_output=True, text=True, check=True
    )
    result: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def test_the_compiled_step_decides_byte_for_byte_as_the_python_one() -> None:
    files, why = native.built_files()
    assert files, f"{why}: `make setup` (or `make native`) builds the compiled modules"
    python, compiled = _one_pass("0"), _one_pass("1")
    assert (python["runs"], compiled["runs"]) == ("python", "compiled")
    assert compiled["count"] == python["count"] and int(str(python["count"])) > 5_000
    assert compiled["outputs"] == python["outputs"]
    assert compiled["states"] == python["states"] and python["versions"] == 1_500
    assert compiled["fired"] == python["fired"]
    assert compiled["fired_outputs"] == python["fired_outputs"] > 5_000


def test_every_compiled_class_keeps_the_bases_its_source_names() -> None:
    """mypyc makes a class whose base it cannot type (PyFlink's, untyped) a native class of
    `object`: `Sanctions(KeyedProcessFunction)` compiled was no KeyedProcessFunction, and
    PyFlink refused it ("KeyedProcessFunction is required"). Such a module stays Python."""
    for name in native.COMPILED:
        module = importlib.import_module(name)
        tree = ast.parse(native.source(name).read_text(encoding="utf-8"))
        for node in tree.body:
            if not isinstance(node, ast.ClassDef):
                continue
            cls = getattr(module, node.name)
            for base in node.bases:
                named = eval(compile(ast.Expression(base), name, "eval"), vars(module))
                origin = getattr(named, "__origin__", named)  # dict[str, str] -> dict
                assert issubclass(cls, origin), f"{name}.{node.name} is no {ast.unparse(base)}"


def test_a_process_runs_the_compiled_modules_when_the_build_fits() -> None:
    assert native.built_files()[1] == "", "`make native` builds them"
    for name in native.COMPILED:
        module = importlib.import_module(name)
        assert module.__file__ is not None and module.__file__.startswith(str(native.NATIVE_DIR))
    assert native.in_use() == "compiled"
    assert importlib.import_module("modstream.moderation.state").__file__.endswith("state.py")


@pytest.fixture
def copied_build(tmp_path: Path) -> Path:
    if not native.MANIFEST.is_file():
        pytest.fail("no build to copy: `make native`")
    return Path(shutil.copytree(native.NATIVE_DIR, tmp_path / "_native"))


def test_a_build_from_other_sources_is_refused_and_names_the_change(copied_build: Path) -> None:
    manifest = copied_build / "manifest.json"
    built = json.loads(manifest.read_text(encoding="utf-8"))
    assert native.built_files(copied_build)[1] == ""
    built["digests"]["modstream.moderation.verdict"] = "0" * 64
    manifest.write_text(json.dumps(built), encoding="utf-8")
    files, why = native.built_files(copied_build)
    assert files == {}
    assert "modstream.moderation.verdict changed" in why


def test_a_build_missing_a_module_is_refused(copied_build: Path) -> None:
    extension = next(copied_build.glob("modstream/moderation/step.*"))
    extension.unlink()
    files, why = native.built_files(copied_build)
    assert files == {}
    assert "lacks modstream.moderation.step" in why


@pytest.mark.parametrize("manifest", ["", "{", "[]", '{"digests": 5}', '{"digests": {}}'])
def test_an_unreadable_manifest_is_refused_not_raised(copied_build: Path, manifest: str) -> None:
    (copied_build / "manifest.json").write_text(manifest, encoding="utf-8")
    files, why = native.built_files(copied_build)
    assert files == {}
    assert "is unreadable" in why and "`make native`" in why


def test_no_build_says_how_to_make_one(tmp_path: Path) -> None:
    files, why = native.built_files(tmp_path)
    assert files == {}
    assert "`make native`" in why


def test_every_compiled_module_has_its_source_and_is_strictly_typed() -> None:
    pyproject = (native.PACKAGE_ROOT.parent / "pyproject.toml").read_text(encoding="utf-8")
    strict = pyproject.split("[[tool.mypy.overrides]]", 1)[1].split("]", 1)[0]
    for module in native.COMPILED:
        assert native.source(module).is_file(), module
        package = module.rsplit(".", 2)[0] if ".rules." in module else module.rsplit(".", 1)[0]
        assert f'"{package}.*"' in strict, f"{module}: mypy checks it strictly before mypyc"
