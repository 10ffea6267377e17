"""`modstream sql`: the command (parse, print); the work is modstream/analytics/sql.py's.

Exit codes: 0 every statement ran; 2 a statement is wrong (syntax, unknown table or column:
one message naming the file and line, no Java stack trace) or the command line is; 1 a query
could not run (the broker, the connector jar).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path

from modstream.analytics.sql_format import FORMATS, render_one
from modstream.analytics.sql_script import Script, inline_script, read_script
from modstream.analytics.sql_tables import QUERIES_DIR
from modstream.core.config import Settings
from modstream.stack import deployments

EXAMPLE = "SELECT outcome, COUNT(*) AS decisions FROM moderation_decisions GROUP BY outcome"


def add_parser(add: Callable[..., argparse.ArgumentParser]) -> None:
    sub = add(
        "sql",
        handle,
        "Flink SQL (batch) over a deployment's topics: tables moderation_decisions, "
        "content_versions, … (deploy/sql/tables.sql), ready queries in deploy/sql/queries/",
    )
    sub.add_argument("query", nargs="?", help=f'one or more statements, e.g. "{EXAMPLE}"')
    sub.add_argument(
        "--file",
        dest="files",
        type=Path,
        nargs="+",
        action="extend",
        default=[],
        metavar="Q.sql",
        help=f"run the statements of these files, in order, in one JVM (e.g. {_queries()}/*.sql)",
    )
    sub.add_argument("--format", choices=FORMATS, default="table", help="default: table")
    sub.add_argument(
        "--parallelism", type=int, default=1, help="of each query's job (default 1: small topics)"
    )
    deployments.add_options(sub)


def _queries() -> str:
    try:
        return str(QUERIES_DIR.relative_to(Path.cwd()))
    except ValueError:
        return str(QUERIES_DIR)


def scripts_of(args: argparse.Namespace) -> list[Script]:
    """The command line's query and files as scripts; ValueError names what is wrong."""
    if args.query is None and not args.files:
        raise ValueError(f'give a query ("{EXAMPLE}") or --file Q.sql')
    scripts = []
    for path in args.files:
        try:
            script = read_script(path)
        except (OSError, UnicodeDecodeError) as error:
            reason = getattr(error, "strerror", None) or error
            if " " in str(path) and not path.exists():  # SQL taken for a file by --file's nargs
                reason = (
                    f'{reason} (a query goes before --file: modstream sql "SELECT …" --file Q.sql)'
                )
            raise ValueError(f"{path}: {reason}") from None
        if not script.statements:
            raise ValueError(f"{path}: no SQL statement in it")
        scripts.append(script)
    if args.query is not None:
        script = inline_script(args.query)
        if not script.statements:
            raise ValueError("the query is empty")
        scripts.append(script)
    return scripts


def handle(args: argparse.Namespace, settings: Settings) -> int:
    from modstream.analytics import sql

    try:
        scripts = scripts_of(args)
        prefix = deployments.prefix_of(args, settings)
    except ValueError as error:  # DeploymentError is one
        print(f"modstream sql: {error}", file=sys.stderr)
        return 2
    if args.parallelism < 1:
        print("modstream sql: --parallelism must be at least 1", file=sys.stderr)
        return 2
    started, count = time.monotonic(), 0
    try:
        for result in sql.execute(settings, prefix, scripts, parallelism=args.parallelism):
            sys.stdout.write(render_one(result, args.format, first=count == 0))
            sys.stdout.flush()
            count += 1
    except sql.SqlError as error:
        print(f"modstream sql: {error}", file=sys.stderr)
        return error.exit_code
    where = f"{prefix}'s topics" if prefix else "the contract's topics"
    print(
        f"sql: {count} result(s) over {where} in {time.monotonic() - started:.1f} s",
        file=sys.stderr,
    )
    return 0
