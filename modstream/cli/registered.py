"""Commands of the layer above the CLI, run through the entry points pyproject.toml registers
(`[project.entry-points."modstream.commands"]`): `modstream bench` is modstream/bench/compare.py's
`main`. The CLI names them and never imports their layer: the benchmarks measure the CLI's layer
and everything under it, so they sit over it (pyproject.toml, `[tool.importlinter]`).
"""

from __future__ import annotations

from collections.abc import Callable
from importlib.metadata import entry_points

GROUP = "modstream.commands"
# The registered commands `modstream` runs, each with its own options (`--` or not).
NAMES = ("bench",)

Command = Callable[[list[str]], int]


def command(name: str) -> Command:
    """The registered command `name`; SystemExit when this installation does not register it
    (an install older than pyproject.toml's entry point: `make setup` again)."""
    for entry in entry_points(group=GROUP, name=name):
        loaded: Command = entry.load()
        return loaded
    raise SystemExit(f"modstream {name}: not registered in this installation; run `make setup`")
