"""The code's shape limits (issue 14): functions at most 60 lines, modules at most 450, in every
package the project ships and in benchmarks/. Ruff holds complexity and statement counts
(C901, PLR0915 in pyproject.toml); it has no rule for lines, so this test does."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("modstream", "jobs", "operators", "udfs", "schemas", "benchmarks")
MAX_FUNCTION_LINES = 60
MAX_MODULE_LINES = 450


def _modules() -> list[Path]:
    return sorted(path for package in PACKAGES for path in (ROOT / package).rglob("*.py"))


def _long_functions(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [
        f"{path.relative_to(ROOT)}:{node.lineno} {node.name} ({length} lines)"
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and (length := (node.end_lineno or node.lineno) - node.lineno + 1) > MAX_FUNCTION_LINES
    ]


def test_the_packages_are_found() -> None:
    assert len(_modules()) > 50


@pytest.mark.parametrize("path", _modules(), ids=lambda path: str(path.relative_to(ROOT)))
def test_module_shape(path: Path) -> None:
    lines = len(path.read_text(encoding="utf-8").splitlines())
    assert lines <= MAX_MODULE_LINES, f"{path.relative_to(ROOT)}: {lines} lines"
    assert _long_functions(path) == []
