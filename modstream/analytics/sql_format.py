"""How `modstream sql` prints a query's rows: an aligned table for people, CSV for a
spreadsheet, JSON (one object per query, one line each) for programs. Pure: no JVM.

Values are made plain first (`plain`): timestamps as ISO 8601 text, decimals as numbers, rows
as objects, so the three formats say the same thing.
"""

from __future__ import annotations

import csv
import datetime
import decimal
import io
import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

FORMATS = ("table", "csv", "json")
_HEADLINE = re.compile(r"[:.](?:\s|$)")
_NULL = "NULL"


@dataclass(frozen=True)
class Result:
    """One query's answer: where it came from, what it answers, its columns and rows."""

    source: str  # the file (or "query")
    title: str  # the file's header comment
    columns: tuple[str, ...]
    rows: tuple[tuple[Any, ...], ...]

    def records(self) -> list[dict[str, Any]]:
        return [dict(zip(self.columns, row, strict=True)) for row in self.rows]


def plain(value: Any) -> Any:
    """A JSON-ready value: None, bool, int, float, str, list or dict."""
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, decimal.Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, datetime.datetime | datetime.date | datetime.time):
        return value.isoformat(sep=" ") if isinstance(value, datetime.datetime) else str(value)
    if isinstance(value, dict):
        return {str(key): plain(item) for key, item in value.items()}
    as_dict = getattr(value, "as_dict", None)  # a Flink Row with field names
    if callable(as_dict):
        try:
            return plain(as_dict())
        except (TypeError, ValueError):
            return [plain(item) for item in value]
    if isinstance(value, Iterable) and not isinstance(value, bytes):
        return [plain(item) for item in value]
    return str(value)


def render(results: Sequence[Result], fmt: str) -> str:
    return "".join(
        render_one(result, fmt, first=index == 0) for index, result in enumerate(results)
    )


def render_one(result: Result, fmt: str, *, first: bool = True) -> str:
    """One result in `fmt`; several are printed one after another (a blank line between
    tables and between CSV blocks, each CSV block after a `# source` line when not first)."""
    if fmt == "json":
        return as_json(result)
    if fmt == "csv":
        return ("" if first else "\n") + as_csv(result, named=not first)
    if fmt == "table":
        return ("" if first else "\n") + as_table(result)
    raise ValueError(f"unknown format {fmt!r}: one of {', '.join(FORMATS)}")


def as_json(result: Result) -> str:
    document = {
        "source": result.source,
        "title": result.title,
        "columns": list(result.columns),
        "rows": [{key: plain(value) for key, value in row.items()} for row in result.records()],
    }
    return json.dumps(document, ensure_ascii=False) + "\n"


def as_csv(result: Result, *, named: bool = False) -> str:
    buffer = io.StringIO()
    if named:
        buffer.write(f"# {result.source}\n")
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(result.columns)
    for row in result.rows:
        writer.writerow(["" if value is None else _cell(value, precise=True) for value in row])
    return buffer.getvalue()


def as_table(result: Result) -> str:
    """A heading (source: title), the columns aligned (numbers right), and the row count."""
    cells = [[_NULL if value is None else _cell(value) for value in row] for row in result.rows]
    widths = [len(name) for name in result.columns]
    for row in cells:
        widths = [max(width, len(cell)) for width, cell in zip(widths, row, strict=True)]
    numeric = [
        all(
            isinstance(row[i], int | float | decimal.Decimal)
            for row in result.rows
            if row[i] is not None
        )
        for i in range(len(result.columns))
    ]

    def line(values: Sequence[str]) -> str:
        padded = [
            value.rjust(width) if right else value.ljust(width)
            for value, width, right in zip(values, widths, numeric, strict=True)
        ]
        return " | ".join(padded).rstrip() + "\n"

    headline = _HEADLINE.split(result.title, maxsplit=1)[0]  # the title's first clause
    heading = f"{result.source}: {headline}" if headline else result.source
    count = len(result.rows)
    return (
        f"{heading}\n"
        + line(result.columns)
        + "-+-".join("-" * width for width in widths)
        + "\n"
        + "".join(line(row) for row in cells)
        + f"({count} row{'' if count == 1 else 's'})\n"
    )


def _cell(value: Any, *, precise: bool = False) -> str:
    """One value as text: floats to 6 significant digits (all of them when `precise`),
    structures as JSON."""
    value = plain(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value) if precise else f"{value:.6g}"
    if isinstance(value, list | dict):
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return str(value)
