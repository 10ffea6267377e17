"""The archive on disk, exactly once without consumer groups: Parquet files named by topic
partition and offsets, and a manifest of how far each topic partition is archived.

A flush writes its files first (each to a hidden temporary name, fsynced, then renamed), and
only then the manifest (the same way, atomically). The manifest is the truth: a file whose last
offset is at or past its partition's archived offset was written by a run that stopped before
its manifest, and is removed when the next run starts (`recover`); that run reads those offsets
again. So a crash anywhere leaves neither a duplicated nor a missing row. One archiver at a
time holds the archive's lock file.

This module knows no Kafka: `Archiver.add` takes a record's coordinates and bytes, and `flush`
the positions the reader reached, so the recovery is tested without a broker.
"""

from __future__ import annotations

import dataclasses
import fcntl
import json
import os
import re
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from modstream.analytics.archive_schema import (
    TABLES,
    Table,
    Unfit,
    partition_of,
    partition_path,
    row_of,
)
from modstream.contract.registry import SchemaError, load_json

MANIFEST = "_manifest.json"
LOCK = ".lock"
FORMAT = 1
_FILE = re.compile(r"^(?P<topic>.+)-p(?P<partition>\d+)-(?P<first>\d+)-(?P<last>\d+)\.parquet$")


class ArchiveError(RuntimeError):
    """An archive that cannot be used as it is (unreadable manifest, another archiver)."""


@dataclasses.dataclass
class Manifest:
    """How far each table's topic partitions are archived (the next offset to read), and the
    rows written and records skipped so far."""

    offsets: dict[str, dict[int, int]] = dataclasses.field(default_factory=dict)
    rows: dict[str, int] = dataclasses.field(default_factory=dict)
    skipped: dict[str, int] = dataclasses.field(default_factory=dict)

    def offset(self, table: str, partition: int) -> int:
        return self.offsets.get(table, {}).get(partition, 0)

    def to_json(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "offsets": {
                table: {str(p): offset for p, offset in sorted(parts.items())}
                for table, parts in sorted(self.offsets.items())
            },
            "rows": dict(sorted(self.rows.items())),
            "skipped": dict(sorted(self.skipped.items())),
        }


def load_manifest(root: Path) -> Manifest:
    """The archive's manifest (an empty one when nothing was archived yet)."""
    path = root / MANIFEST
    if not path.exists():
        return Manifest()
    try:
        data = json.loads(path.read_text())
        if data.get("format") != FORMAT:
            raise ValueError(f"format {data.get('format')!r}, expected {FORMAT}")
        return Manifest(
            offsets={
                table: {int(p): int(offset) for p, offset in parts.items()}
                for table, parts in data["offsets"].items()
            },
            rows={table: int(n) for table, n in data.get("rows", {}).items()},
            skipped={table: int(n) for table, n in data.get("skipped", {}).items()},
        )
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as error:
        raise ArchiveError(f"{path}: not a readable archive manifest ({error})") from None


def _durable_write(path: Path, write: Any) -> None:
    """Write through `write(temporary_path)`, fsync, then rename over `path`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.tmp")
    write(temporary)
    with open(temporary, "rb+") as handle:
        os.fsync(handle.fileno())
    os.replace(temporary, path)
    directory = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)


def save_manifest(root: Path, manifest: Manifest) -> None:
    text = json.dumps(manifest.to_json(), indent=1) + "\n"
    _durable_write(root / MANIFEST, lambda path: path.write_text(text))


def file_name(topic: str, partition: int, first: int, last: int) -> str:
    """`<contract topic>-p<partition>-<first offset>-<last offset>.parquet`."""
    return f"{topic}-p{partition}-{first:012d}-{last:012d}.parquet"


def recover(root: Path, manifest: Manifest) -> list[Path]:
    """Remove what a stopped run left beyond the manifest: temporary files, and Parquet files
    whose offsets the manifest does not cover. Returns what was removed."""
    removed = []
    for table in TABLES.values():
        folder = root / table.name
        if not folder.exists():
            continue
        for path in sorted(folder.rglob("*")):
            if path.is_file() and not _covered(path, table, manifest):
                path.unlink()
                removed.append(path)
    return removed


def _covered(path: Path, table: Table, manifest: Manifest) -> bool:
    match = _FILE.match(path.name)
    if match is None:
        return not path.name.endswith(".tmp")  # someone else's file: left alone
    if match["topic"] != table.topic:
        return True  # not ours to judge
    return int(match["last"]) < manifest.offset(table.name, int(match["partition"]))


@contextmanager
def locked(root: Path) -> Iterator[None]:
    """Hold the archive's lock, or ArchiveError when another archiver holds it."""
    root.mkdir(parents=True, exist_ok=True)
    with open(root / LOCK, "a+") as handle:
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise ArchiveError(f"another `modstream archive` is writing {root}") from None
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


@dataclasses.dataclass
class _Pending:
    """The rows of one table's topic partition since the last flush."""

    rows: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    first: int | None = None
    last: int | None = None


class Archiver:
    """Buffers validated rows by table and topic partition; `flush` makes them durable."""

    def __init__(self, root: Path, manifest: Manifest) -> None:
        self.root = root
        self.manifest = manifest
        self.pending: dict[tuple[str, int], _Pending] = defaultdict(_Pending)
        self.buffered = 0
        self.written: dict[str, int] = defaultdict(int)  # rows this run
        self.skipped: dict[str, int] = defaultdict(int)  # records this run that fit no row
        self._unsaved: dict[str, dict[str, int]] = {"rows": {}, "skipped": {}}

    def add(
        self, table: Table, partition: int, offset: int, timestamp: int | None, raw: Any
    ) -> None:
        """One Kafka record of `table`'s topic; one that is not its topic's schema is counted
        as skipped (a tombstone, with no value, is neither)."""
        if raw is None:
            return
        try:
            row = row_of(table, load_json(table.topic, raw))
            partition_of(table, row)
        except (SchemaError, Unfit):
            self._count("skipped", table.name, 1)
            return
        row.update(_partition=partition, _offset=offset, _timestamp=timestamp)
        pending = self.pending[(table.name, partition)]
        pending.rows.append(row)
        pending.first = offset if pending.first is None else pending.first
        pending.last = offset
        self.buffered += 1

    def _count(self, kind: str, table: str, count: int) -> None:
        (self.written if kind == "rows" else self.skipped)[table] += count
        self._unsaved[kind][table] = self._unsaved[kind].get(table, 0) + count

    def flush(self, positions: dict[tuple[str, int], int]) -> int:
        """Write the buffered rows, then the manifest with `positions` ((table, partition) ->
        the next offset to read, which covers every record added before). Returns rows written."""
        written = 0
        for (name, partition), pending in sorted(self.pending.items()):
            written += self._write(TABLES[name], partition, pending)
        for (name, partition), position in positions.items():
            self.manifest.offsets.setdefault(name, {})[partition] = position
        for kind, counts in self._unsaved.items():
            totals = self.manifest.rows if kind == "rows" else self.manifest.skipped
            for name, count in counts.items():
                totals[name] = totals.get(name, 0) + count
        save_manifest(self.root, self.manifest)
        self._unsaved = {"rows": {}, "skipped": {}}
        self.pending.clear()
        self.buffered = 0
        return written

    def _write(self, table: Table, partition: int, pending: _Pending) -> int:
        """One file per hive partition for one topic partition's pending rows."""
        from modstream.analytics.archive_schema import to_arrow

        groups: dict[tuple[str, int | None], list[dict[str, Any]]] = defaultdict(list)
        for row in pending.rows:
            groups[partition_of(table, row)].append(row)
        written = 0
        for (day, version), rows in sorted(groups.items(), key=str):
            arrow, unfit = to_arrow(table, rows)
            if unfit:
                self._count("skipped", table.name, unfit)
            if arrow.num_rows == 0 or pending.first is None or pending.last is None:
                continue
            path = self.root / partition_path(table, day, version)
            path /= file_name(table.topic, partition, pending.first, pending.last)
            _durable_write(path, lambda target, data=arrow: pq.write_table(data, target))
            self._count("rows", table.name, arrow.num_rows)
            written += arrow.num_rows
        return written
