"""The contract-rule table (modstream/moderation/rules/__init__.py): the table in
docs/architecture.md is the one the rule modules' docstrings render, every test a header names
exists, and every rule module is listed."""

from __future__ import annotations

import ast
import pkgutil
from pathlib import Path

import pytest

from modstream.moderation import rules
from modstream.moderation.rules import (
    ARCHITECTURE,
    BEGIN,
    END,
    PROJECT_ROOT,
    RULE_MODULES,
    headers,
    render_table,
    splice,
)


def test_the_table_in_the_docs_is_the_one_the_rule_modules_render() -> None:
    document = ARCHITECTURE.read_text(encoding="utf-8")
    assert document.count(BEGIN) == 1 and document.count(END) == 1
    # `python -m modstream.moderation.rules` rewrites it after a header changes.
    assert splice(document, render_table()) == document


def test_every_test_a_rule_header_names_exists() -> None:
    missing = []
    for rule in headers():
        for test in rule.tests:
            path, _, name = test.partition("::")
            file = PROJECT_ROOT / path
            defined = (
                {
                    node.name
                    for node in ast.walk(ast.parse(file.read_text(encoding="utf-8")))
                    if isinstance(node, ast.FunctionDef)
                }
                if path.startswith("tests/") and file.is_file()
                else set()
            )
            if not name.startswith("test_") or name not in defined:
                missing.append(f"{rule.module}: {test}")
    assert missing == []


def test_every_rule_module_is_listed_once_with_a_header() -> None:
    package = Path(rules.__file__).parent
    own = {
        f"{rules.__name__}.{info.name}"
        for info in pkgutil.iter_modules([str(package)])
        if not info.name.startswith("_")
    }
    assert own <= set(RULE_MODULES)
    assert len(RULE_MODULES) == len(set(RULE_MODULES))
    listed = headers()
    assert [rule.module for rule in listed] == list(RULE_MODULES)
    assert all(rule.sections and rule.tests for rule in listed)


def test_a_module_without_a_header_is_refused() -> None:
    with pytest.raises(ValueError, match=r"modstream\.moderation\.step"):
        rules.header("modstream.moderation.step", rules.contract_sections("## Time\n"))
