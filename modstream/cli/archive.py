"""The analysts' archive commands: `archive`, `query`, `report`. They parse and print; the work
is in modstream/analytics/archive.py, modstream/analytics/streams.py and
modstream/analytics/report.py."""

from __future__ import annotations

import argparse
import csv
import datetime
import io
import json
import signal
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa

from modstream.core.config import Settings
from modstream.stack import deployments

Add = Callable[[str, Callable[..., int], str], argparse.ArgumentParser]
FORMATS = ("table", "csv", "json")


def add_parsers(add: Add) -> None:
    """archive, query, report: the Parquet archive of a deployment and what reads it."""
    sub = add(
        "archive",
        cmd_archive,
        "copy a deployment's decisions, shadow decisions, actions, reviews, appeals, DLQ, "
        "upload facts, visibility and the review console's access log into its Parquet archive "
        "(RUN_DIR/archive/<prefix>), "
        "exactly once",
    )
    deployments.add_options(sub)
    sub.add_argument(
        "--follow", action="store_true", help="keep archiving as records arrive (Ctrl-C stops)"
    )
    sub = add("query", cmd_query, "run DuckDB SQL over a deployment's Parquet archive")
    what = sub.add_mutually_exclusive_group(required=True)
    what.add_argument(
        "sql", nargs="?", help='e.g. "SELECT outcome, count(*) FROM decisions GROUP BY 1"'
    )
    what.add_argument("--file", type=Path, help="a file holding the SQL")
    sub.add_argument("--format", choices=FORMATS, default="table", help="json: one object a line")
    deployments.add_options(sub)
    sub = add(
        "report", cmd_report, "write a self-contained HTML report with plots from the archive"
    )
    sub.add_argument("--out", type=Path, default=Path("report.html"))
    deployments.add_options(sub)


def cmd_archive(args: argparse.Namespace, settings: Settings) -> int:
    from kafka.errors import KafkaError

    from modstream.analytics import archive
    from modstream.analytics.archive_store import ArchiveError

    try:
        prefix = deployments.prefix_of(args, settings)
        if not args.follow:
            archive.run(settings, prefix)
            return 0
        stop = threading.Event()
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, lambda *_: stop.set())
        summary = archive.archive(settings, prefix, follow=True, stop=stop)
    except (deployments.DeploymentError, ArchiveError, TimeoutError) as error:
        print(f"modstream archive: {error}", file=sys.stderr)
        return 1
    except KafkaError as error:
        print(
            f"modstream archive: Kafka at {settings.bootstrap_servers}: {type(error).__name__}: "
            f"{error}",
            file=sys.stderr,
        )
        return 1
    print(f"archive: stopped; {sum(summary.rows.values())} rows archived")
    for line in summary.lines():
        print(line)
    return 0


def cmd_query(args: argparse.Namespace, settings: Settings) -> int:
    import duckdb

    from modstream.analytics import streams as analytics

    try:
        prefix = deployments.prefix_of(args, settings)
        sql = args.sql if args.file is None else args.file.read_text()
        result = analytics.query(sql, settings, prefix)
    except (deployments.DeploymentError, OSError) as error:
        print(f"modstream query: {error}", file=sys.stderr)
        return 1
    except duckdb.Error as error:
        print(f"modstream query: {error}", file=sys.stderr)
        return 2
    if result is not None:
        sys.stdout.write(formatted(result, args.format))
    return 0


def cmd_report(args: argparse.Namespace, settings: Settings) -> int:
    from modstream.analytics import report

    try:
        prefix = deployments.prefix_of(args, settings)
        path = report.write(settings, prefix, args.out)
    except (deployments.DeploymentError, OSError) as error:
        print(f"modstream report: {error}", file=sys.stderr)
        return 1
    print(f"report: wrote {path}")
    return 0


def _cell(value: Any) -> str:
    """One value as text: nested values as JSON, null as an empty cell."""
    if value is None:
        return ""
    if isinstance(value, list | dict):
        return json.dumps(value, default=str, separators=(",", ":"))
    return str(value)


def formatted(result: pa.Table, fmt: str) -> str:
    """A query's rows as an aligned text table, CSV with a header, or one JSON object a line."""
    rows = result.to_pylist()
    names = result.column_names
    if fmt == "json":
        return "".join(json.dumps(row, default=_json_default) + "\n" for row in rows)
    cells = [[_cell(row[name]) for name in names] for row in rows]
    if fmt == "csv":
        buffer = io.StringIO()
        writer = csv.writer(buffer, lineterminator="\n")
        writer.writerow(names)
        writer.writerows(cells)
        return buffer.getvalue()
    widths = [max([len(name), *(len(row[i]) for row in cells)]) for i, name in enumerate(names)]
    lines = ["  ".join(name.ljust(width) for name, width in zip(names, widths, strict=True))]
    lines.append("  ".join("-" * width for width in widths))
    lines += ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) for row in cells]
    lines.append(f"({len(rows)} row{'s' if len(rows) != 1 else ''})")
    return "\n".join(line.rstrip() for line in lines) + "\n"


def _json_default(value: Any) -> Any:
    if isinstance(value, datetime.date | datetime.datetime):
        return value.isoformat()
    return str(value)
