"""Layers point down and nothing shipped imports tests (issue 31, item 2), on the import graph
import-linter reads (grimp): every import counts, inside functions and under TYPE_CHECKING too.

`make lint` holds the layers themselves (pyproject.toml, `[tool.importlinter]`); this test holds
what a layers contract does not see: a ring of imports between modules of one layer, or of one
package. No JVM, no stack.
"""

from __future__ import annotations

import re
import textwrap
from collections import deque
from collections.abc import Mapping, Set
from pathlib import Path

import grimp
import pytest

PACKAGE = "modstream"


def import_graph(package: str) -> grimp.ImportGraph:
    """Every module of `package` and what it imports, other packages squashed to their name."""
    return grimp.build_graph(package, include_external_packages=True, cache_dir=None)


def imports_within(graph: grimp.ImportGraph, package: str) -> dict[str, set[str]]:
    """module -> the modules of `package` it imports directly."""
    inside = {m for m in graph.modules if m == package or m.startswith(package + ".")}
    return {m: graph.find_modules_directly_imported_by(m) & inside for m in inside}


def import_cycles(imports: Mapping[str, Set[str]]) -> list[list[str]]:
    """One shortest ring of imports through each group of modules that import one another
    (a strongly connected component), shortest first: [a, b, a] for a -> b -> a."""
    reach = {module: _reached(module, imports) for module in imports}
    rings: list[list[str]] = []
    placed: set[str] = set()
    for module in sorted(imports):
        if module in placed or module not in reach[module]:
            continue  # already in a ring, or on none
        group = {other for other in reach[module] if module in reach[other]}
        placed |= group
        rings.append(min((_ring_through(m, group, imports) for m in sorted(group)), key=len))
    return sorted(rings, key=lambda ring: (len(ring), ring))


def importers_of_tests(graph: grimp.ImportGraph, package: str) -> set[str]:
    """The modules of `package` that import `tests` or a module under it."""
    if "tests" not in graph.modules:
        return set()
    return {m for m in graph.find_modules_that_directly_import("tests") if m.startswith(package)}


def _reached(start: str, imports: Mapping[str, Set[str]]) -> set[str]:
    """Every module `start` imports, directly or not (itself only through a ring)."""
    reached: set[str] = set()
    queue = deque(imports.get(start, ()))
    while queue:
        module = queue.popleft()
        if module not in reached:
            reached.add(module)
            queue.extend(imports.get(module, ()))
    return reached


def _ring_through(start: str, group: Set[str], imports: Mapping[str, Set[str]]) -> list[str]:
    """The shortest start -> ... -> start within `group` (breadth first)."""
    came_from: dict[str, str] = {}
    queue = deque([start])
    while queue:
        module = queue.popleft()
        if start in imports.get(module, ()):
            ring = [module, start]
            while module != start:
                module = came_from[module]
                ring.insert(0, module)
            return ring
        for imported in sorted(imports.get(module, set()) & group - came_from.keys() - {start}):
            came_from[imported] = module
            queue.append(imported)
    raise AssertionError(f"{start} is on no ring of {sorted(group)}")


@pytest.fixture(scope="module")
def graph() -> grimp.ImportGraph:
    return import_graph(PACKAGE)


def test_no_module_of_the_package_imports_another_in_a_ring(graph: grimp.ImportGraph) -> None:
    rings = import_cycles(imports_within(graph, PACKAGE))
    assert rings == [], "import cycles, shortest first:\n" + "\n".join(
        " -> ".join(ring) for ring in rings
    )


def test_nothing_shipped_imports_tests(graph: grimp.ImportGraph) -> None:
    importers = importers_of_tests(graph, PACKAGE)
    assert importers == set(), f"modules importing tests: {sorted(importers)}"


# The checks above on small packages made for them: they can fail.
RINGS = {
    "no ring": ({"a.py": "from {p} import b\n", "b.py": "X = 1\n"}, []),
    "two modules": (
        {"a.py": "from {p} import b\n", "b.py": "def f():\n    from {p} import a\n"},
        [["{p}.a", "{p}.b", "{p}.a"]],
    ),
    "a type-only import closes it": (
        {
            "a.py": "from {p}.b import B\n",
            "b.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from {p}.a import A\n"
            "B = 1\n",
        },
        [["{p}.a", "{p}.b", "{p}.a"]],
    ),
    "two rings, shortest first": (
        {
            "a.py": "from {p} import b\n",
            "b.py": "from {p} import c\n",
            "c.py": "from {p} import a\n",
            "d.py": "from {p} import e\n",
            "e.py": "from {p} import d\n",
        },
        [["{p}.d", "{p}.e", "{p}.d"], ["{p}.a", "{p}.b", "{p}.c", "{p}.a"]],
    ),
}


def make_package(root: Path, name: str, modules: dict[str, str]) -> None:
    (root / name).mkdir()
    (root / name / "__init__.py").write_text("")
    for file, text in modules.items():
        (root / name / file).write_text(textwrap.dedent(text.format(p=name)))


@pytest.mark.parametrize("case", sorted(RINGS))
def test_cycles_found_in_a_made_package(
    case: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    modules, expected = RINGS[case]
    name = "ring_" + re.sub(r"\W+", "_", case)
    make_package(tmp_path, name, modules)
    monkeypatch.syspath_prepend(str(tmp_path))
    made = import_graph(name)
    expected_rings = [[m.format(p=name) for m in ring] for ring in expected]
    assert import_cycles(imports_within(made, name)) == expected_rings


def test_an_import_of_tests_is_found_in_a_made_package(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_package(
        tmp_path,
        "imports_tests",
        {"clean.py": "import json\n", "leaky.py": "def f():\n    from tests.conftest import T0\n"},
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    assert importers_of_tests(import_graph("imports_tests"), "imports_tests") == {
        "imports_tests.leaky"
    }
