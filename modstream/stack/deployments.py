"""Which deployment an analyst's command reads: its topic prefix and its archive folder.

A deployment's topics are the contract's names, or `<prefix>.<name>` (modstream/core/topics.py).
Every demo run is its own deployment (prefix `demo1a2b3c`); the demo records the last one in
RUN_DIR/demo/last-run.json, which outlives `modstream down` and `up` until `modstream clean`,
so `--last-demo` finds yesterday's demo. The Parquet archive of a deployment lives in
RUN_DIR/archive/<prefix> (`default` for unprefixed topics), docs/ANALYSTS.md.
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

from modstream.core import topics
from modstream.core.config import Settings

LAST_RUN = "last-run.json"
DEFAULT = "default"  # the archive folder of a deployment whose topics carry no prefix
_PREFIX = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")


class DeploymentError(ValueError):
    """A prefix that cannot name a deployment, or `--last-demo` with no demo run yet."""


def record_demo(settings: Settings, run_id: str) -> Path:
    """Remember the demo run `run_id` ("demo1a2b3c-") as the last one; returns the file."""
    path = settings.run_dir / "demo" / LAST_RUN
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"run_id": run_id, "prefix": run_id.rstrip("-")}) + "\n")
    return path


def last_demo(settings: Settings) -> str:
    """The topic prefix of the last demo run."""
    path = settings.run_dir / "demo" / LAST_RUN
    try:
        prefix = json.loads(path.read_text())["prefix"]
    except (OSError, ValueError, KeyError, TypeError):
        raise DeploymentError(f"no demo run recorded in {path}: run `make demo` first") from None
    return checked(str(prefix))


def checked(prefix: str) -> str:
    if not _PREFIX.match(prefix):
        raise DeploymentError(
            f"{prefix!r} is not a topic prefix (letters, digits, '-' and '_', at most 64)"
        )
    return prefix


def add_options(parser: argparse.ArgumentParser) -> None:
    """--prefix / --last-demo: which deployment's topics (and archive) a command reads."""
    group = parser.add_mutually_exclusive_group()
    group.add_argument(
        "--prefix",
        help="the deployment's topic prefix (topics `<prefix>.<name>`); default: none",
    )
    group.add_argument(
        "--last-demo",
        action="store_true",
        help="the topics of the last `modstream demo` run (RUN_DIR/demo/last-run.json)",
    )


def prefix_of(args: argparse.Namespace, settings: Settings) -> str | None:
    """The prefix chosen by add_options' flags (None: the contract's own names)."""
    if getattr(args, "last_demo", False):
        return last_demo(settings)
    prefix = getattr(args, "prefix", None)
    return checked(prefix) if prefix else None


def topic_names(prefix: str | None) -> dict[str, str]:
    """Contract topic name -> this deployment's topic."""
    return topics.physical_names(prefix)


def archive_root(settings: Settings, prefix: str | None) -> Path:
    """Where this deployment's Parquet archive lives."""
    return settings.run_dir / "archive" / (prefix or DEFAULT)
