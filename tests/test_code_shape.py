"""The code's shape (issue 14, issue 31 item 5): functions at most 60 lines in everything the
project ships (the `modstream` package). Modules are sized by cohesion, not by a line cap
(issue 31 dropped the 450-line rule that had split concepts into prefix families). Ruff holds
complexity and statement counts (C901, PLR0915 in pyproject.toml); it has no rule for lines,
so this test does."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
MAX_FUNCTION_LINES = 60


def _modules() -> list[Path]:
    return sorted((ROOT / "modstream").rglob("*.py"))


def _long_functions(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [
        f"{path.relative_to(ROOT)}:{node.lineno} {node.name} ({length} lines)"
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and (length := (node.end_lineno or node.lineno) - node.lineno + 1) > MAX_FUNCTION_LINES
    ]


def test_the_package_is_found() -> None:
    assert len(_modules()) > 200


@pytest.mark.parametrize("path", _modules(), ids=lambda path: str(path.relative_to(ROOT)))
def test_functions_are_short(path: Path) -> None:
    assert _long_functions(path) == []
