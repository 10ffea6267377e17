"""The per-version code compiled ahead of time with mypyc (issue 26, point 1): the same modules,
the same source, as C extensions that Python runs 25-30% faster (docs/BENCHMARKS.md, "The
per-version code compiled").

The modules of `COMPILED` are strictly typed (pyproject's mypy overrides); mypyc turns them into
extension modules under `modstream/_native/` (`make native`, part of `make setup`), with a
manifest that holds the SHA-256 of the sources they were built from. `install()`, run when
`modstream` is imported, puts a finder in front of Python's own that serves those extensions,
and only when every source still has the digest it was built from: a module edited since the
build runs as Python (one warning says so and names it) until the next `make native`, so a stale
build never runs in place of the code on disk. `MODSTREAM_NATIVE=0` turns the extensions off
(profilers such as py-spy and cProfile see into Python code only).

Where mypyc's build is absent (no C compiler, no mypy: a production image built without it),
the same modules run as Python; `make native-status` says which is in use.
"""

from __future__ import annotations

import hashlib
import importlib.abc
import importlib.machinery
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path
from types import ModuleType
from typing import Final

PACKAGE_ROOT: Final = Path(__file__).resolve().parents[1]
NATIVE_DIR: Final = PACKAGE_ROOT / "_native"
MANIFEST: Final = NATIVE_DIR / "manifest.json"
ENV_SWITCH: Final = "MODSTREAM_NATIVE"

# The per-version code of the bench's profile (admission's rules, the step, its rules, the
# verdict and the evidence read, the policy's evaluation, the scan plan), each strictly typed.
# Left out: modstream.moderation.state (msgspec Structs: mypyc compiles a class body into a
# native class, which msgspec's Struct metaclass refuses) and the packages' __init__ modules
# (the rule table reads its modules' files), and modstream.jobs.moderation.python_calls (its
# decorator puts closures on a class, which mypyc makes into objects cloudpickle refuses: a
# counted class PyFlink ships by value, as the PyFlink floor's, then never starts; its cost is
# per Python call, not per event). A module added here must pass the unit tests
# compiled: mypyc checks at run time the types that mypy only trusts (`Any` meets `str`).
COMPILED: Final = (
    "modstream.core.ids",
    "modstream.core.values",
    "modstream.contract.registry",
    "modstream.trust.signing",
    "modstream.moderation.admission",
    "modstream.moderation.decide",
    "modstream.moderation.evidence_view",
    "modstream.moderation.exposure",
    "modstream.moderation.ingest",
    "modstream.moderation.language",
    "modstream.moderation.records",
    "modstream.moderation.state_schema",
    "modstream.moderation.step",
    "modstream.moderation.tally",
    "modstream.moderation.verdict",
    "modstream.moderation.rules.appeals",
    "modstream.moderation.rules.deadline",
    "modstream.moderation.rules.deletion",
    "modstream.moderation.rules.evidence",
    "modstream.moderation.rules.fast_gate",
    "modstream.moderation.rules.human_input",
    "modstream.moderation.rules.provisional",
    "modstream.moderation.rules.reevaluation",
    "modstream.moderation.rules.reports",
    "modstream.moderation.rules.retention",
    "modstream.moderation.rules.retro",
    "modstream.moderation.rules.reviews",
    "modstream.policy.evaluate",
    "modstream.policy.expr",
    "modstream.policy.store",
    "modstream.scanning.plan",
    "modstream.jobs.moderation.batch",
    "modstream.jobs.moderation.keyed_batch",
    "modstream.jobs.moderation.letters",
    "modstream.jobs.moderation.metrics",
    "modstream.jobs.moderation.moderate",
    "modstream.jobs.moderation.retro_batch",
    "modstream.jobs.moderation.sanctions_batch",
)


def source(module: str) -> Path:
    """The Python source of `module`, found from its name alone (nothing imported)."""
    return PACKAGE_ROOT.parent.joinpath(*module.split(".")).with_suffix(".py")


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def sources_digest(modules: tuple[str, ...] = COMPILED) -> dict[str, str]:
    """Each module's source SHA-256, with the interpreter's version: what a build is valid for."""
    digests = {module: _sha256(source(module)) for module in modules}
    digests["python"] = sys.version.split()[0]
    digests[__name__] = _sha256(Path(__file__))  # how they are built
    return digests


class _ExtensionFinder(importlib.abc.MetaPathFinder):
    """Serves the compiled modules (and mypyc's shared library) from their files."""

    def __init__(self, files: dict[str, Path]) -> None:
        self.files = files

    def find_spec(
        self, fullname: str, path: object = None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        file = self.files.get(fullname)
        if file is None:
            return None
        loader = importlib.machinery.ExtensionFileLoader(fullname, str(file))
        return importlib.util.spec_from_file_location(fullname, file, loader=loader)


def _extension(directory: Path, module: str) -> Path:
    suffix = importlib.machinery.EXTENSION_SUFFIXES[0]
    return directory.joinpath(*module.split(".")).with_name(module.rsplit(".", 1)[-1] + suffix)


def built_files(directory: Path = NATIVE_DIR) -> tuple[dict[str, Path], str]:
    """The extensions a build left in `directory`, by module name, and why there are none
    usable ("" when they are): absent, stale (which source changed) or incomplete."""
    manifest = directory / "manifest.json"
    if not manifest.is_file():
        return {}, f"no build in {directory} (`make native` builds it)"
    try:  # a manifest cut short or edited by hand must not stop `import modstream`
        built = json.loads(manifest.read_text(encoding="utf-8"))
        digests, shared, shared_file = dict(built["digests"]), built["shared"], built["shared_file"]
    except (OSError, ValueError, KeyError, TypeError) as error:
        return {}, f"{manifest} is unreadable ({type(error).__name__}; `make native` rebuilds it)"
    current = sources_digest()
    changed = sorted(name for name, value in current.items() if digests.get(name) != value)
    if changed:
        return {}, f"built from other sources than these ({', '.join(changed[:3])} changed)"
    files = {module: _extension(directory, module) for module in COMPILED}
    files[str(shared)] = directory / str(shared_file)
    missing = sorted(name for name, file in files.items() if not file.is_file())
    if missing:
        return {}, f"the build in {directory} lacks {', '.join(missing[:3])}"
    return files, ""


_installed: list[_ExtensionFinder] = []


def install(directory: Path = NATIVE_DIR) -> str:
    """Serve the compiled modules when their build matches the sources: "compiled", or "python:
    <why>". Once per process; a module already imported as Python stays Python."""
    if _installed:
        return "compiled"
    if os.environ.get(ENV_SWITCH, "1") == "0":
        return f"python: {ENV_SWITCH}=0"
    files, why = built_files(directory)
    if why:
        if directory.exists():  # a build that no longer fits: say so, once per process
            warnings.warn(f"modstream's compiled modules are not used: {why}", stacklevel=2)
        return f"python: {why}"
    _installed.append(_ExtensionFinder(files))
    sys.meta_path.insert(0, _installed[0])
    return "compiled"


def in_use() -> str:
    """How `modstream.moderation.step` runs in this process: "compiled" or "python"."""
    spec = importlib.util.find_spec("modstream.moderation.step")
    origin = spec.origin if spec is not None else None
    return "compiled" if origin is not None and not origin.endswith(".py") else "python"


_SETUP = """
import sys
from setuptools import setup
from mypyc.build import mypycify

config, target, build_lib, *files = sys.argv[1:]
setup(
    name="modstream_native",
    ext_modules=mypycify(["--config-file", config, *files], target_dir=target, opt_level="3"),
    script_args=["-q", "build_ext", "--build-lib", build_lib, "--build-temp", target + "/obj"],
)
"""


def build(directory: Path = NATIVE_DIR) -> Path:
    """Compile `COMPILED` with mypyc into `directory` (replaced whole when the build succeeds)."""
    digests = sources_digest()
    project = PACKAGE_ROOT.parent
    with tempfile.TemporaryDirectory(prefix="modstream-native-") as scratch:
        work, out = Path(scratch) / "c", Path(scratch) / "lib"
        files = [str(source(module)) for module in COMPILED]
        # Run where no pyproject.toml is read by setuptools (the project's is read by mypy).
        command = [sys.executable, "-c", _SETUP, str(project / "pyproject.toml"), str(work)]
        subprocess.run([*command, str(out), *files], cwd=scratch, check=True)
        shared = [path.name for path in out.glob("*__mypyc*")]
        if len(shared) != 1:
            raise RuntimeError(f"mypyc left {len(shared)} shared libraries in {out}: {shared}")
        manifest = {
            "digests": digests,
            "shared": shared[0].split(".", 1)[0],
            "shared_file": shared[0],
        }
        (out / "manifest.json").write_text(json.dumps(manifest, indent=1), encoding="utf-8")
        staged = directory.with_name(directory.name + ".new")
        shutil.rmtree(staged, ignore_errors=True)
        shutil.copytree(out, staged)
        shutil.rmtree(directory, ignore_errors=True)
        staged.rename(directory)
    return directory


def main(args: list[str]) -> int:
    """`make native` (["build"]) builds; [] says what runs and why (`make native-status`)."""
    if args == ["build"]:
        if built_files()[0]:  # built from these very sources: nothing to compile
            print(f"native: {NATIVE_DIR} is built from these sources")
            return 0
        print(f"native: compiling {len(COMPILED)} modules with mypyc into {NATIVE_DIR}", flush=True)
        print(f"native: built {build()}")
        return 0
    files, why = built_files()
    print(f"native: {'compiled' if files else 'python'}: {why or f'{len(COMPILED)} modules'}")
    print(f"native: in this process: {in_use()} ({ENV_SWITCH}={os.environ.get(ENV_SWITCH, '1')})")
    return 0
