"""`modstream archive`: a deployment's decision streams into the Parquet archive that DuckDB,
pyarrow and pandas read (modstream/analytics/streams.py), so analysts query history without a
broker.

It reads the topics of every archive table (modstream/analytics/archive_schema.py) with
read_committed and no consumer group: how far each topic partition is archived lives in the
archive's own manifest, written after the files it covers (modstream/analytics/archive_store.py), so
a rerun after a crash neither duplicates nor loses a row. Without `follow` it archives up to the end
offsets it finds at start and returns (what the demo calls); with `follow` it keeps archiving, a
flush every few seconds, until `stop` is set (SIGTERM or Ctrl-C in the command).
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable
from typing import Any

from modstream.analytics.archive_schema import TABLES, Table
from modstream.analytics.archive_store import Archiver, Manifest, load_manifest, locked, recover
from modstream.core import topics
from modstream.core.config import Settings
from modstream.core.progress import Progress
from modstream.stack import deployments

Say = Callable[[str], None]
FLUSH_ROWS = 50_000  # buffered rows that make a flush (one file per topic partition and day)
FLUSH_EVERY_S = 5.0  # with `follow`: a flush at least this often while records arrive
DISCOVER_EVERY_S = 30.0  # with `follow`: look for topics and partitions created since


@dataclasses.dataclass(frozen=True)
class Summary:
    """What one run archived: rows written and records skipped (not their topic's schema)
    per table, topics not found, files a stopped run had left and that were removed, and the
    archive's totals per table."""

    rows: dict[str, int]
    skipped: dict[str, int]
    missing: list[str]
    removed: int
    totals: dict[str, int]

    def lines(self) -> list[str]:
        width = max(len(name) for name in TABLES)
        out = [
            f"  {name:<{width}} {self.rows.get(name, 0):>8} rows"
            + (f", {self.skipped[name]} skipped" if self.skipped.get(name) else "")
            + f"  (archive: {self.totals.get(name, 0)})"
            for name in TABLES
        ]
        if self.missing:
            out.append(f"  no topic yet (its table stays empty): {', '.join(self.missing)}")
        if self.removed:
            out.append(f"  removed {self.removed} file(s) a stopped run wrote past its manifest")
        return out


def run(
    settings: Settings,
    prefix: str | None,
    say: Say = print,
    *,
    progress: Progress | None = None,
) -> dict[str, int]:
    """Archive the deployment `prefix` up to the topics' ends now; rows written per table.
    `progress`: a caller's own (the demo's), else one of its own on stderr."""
    summary = archive(settings, prefix, say=say, progress=progress)
    where = deployments.archive_root(settings, prefix)
    say(f"archive: {sum(summary.rows.values())} rows into {where}")
    for line in summary.lines():
        say(line)
    return summary.rows


def archive(
    settings: Settings,
    prefix: str | None,
    *,
    follow: bool = False,
    say: Say = print,
    progress: Progress | None = None,
    stop: threading.Event | None = None,
    stall_timeout_s: float = 120.0,
) -> Summary:
    """Archive the deployment `prefix` (see the module's docstring); ArchiveError when another
    archiver holds the archive, TimeoutError when the topics' ends are not reached because
    nothing arrives for `stall_timeout_s`."""
    root = deployments.archive_root(settings, prefix)
    with locked(root):
        manifest = load_manifest(root)
        removed = recover(root, manifest)
        archiver = Archiver(root, manifest)
        reader = _Reader(settings, prefix, manifest, say)
        try:
            if progress is None:
                with Progress("archive") as own:
                    _loop(reader, archiver, own, follow, stop, stall_timeout_s)
            else:
                _loop(reader, archiver, progress, follow, stop, stall_timeout_s)
        finally:
            reader.close()
        return Summary(
            rows={name: archiver.written.get(name, 0) for name in TABLES},
            skipped={name: count for name, count in archiver.skipped.items() if count},
            missing=reader.missing,
            removed=len(removed),
            totals=dict(manifest.rows),
        )


def _loop(
    reader: _Reader,
    archiver: Archiver,
    shown: Progress,
    follow: bool,
    stop: threading.Event | None,
    stall_timeout_s: float,
) -> None:
    reader.discover()
    if not follow:
        ends = reader.ends()
        shown.phase(
            f"archiving {len(reader.assigned)} topic partitions",
            total=reader.left(ends),
            unit="records",
        )
        _to_ends(reader, archiver, shown, ends, stall_timeout_s)
        return
    shown.phase("archiving (following; Ctrl-C to stop)", unit="records")
    _follow(reader, archiver, shown, stop or threading.Event())


def _to_ends(
    reader: _Reader,
    archiver: Archiver,
    shown: Progress,
    ends: dict[Any, int],
    stall_timeout_s: float,
) -> None:
    total = reader.left(ends)
    last_change, before = time.monotonic(), reader.positions()
    while not reader.reached(ends):
        reader.poll_into(archiver)
        now_at = reader.positions()
        shown.update(total - reader.left(ends))
        if now_at != before:
            last_change, before = time.monotonic(), now_at
        elif time.monotonic() - last_change > stall_timeout_s:
            behind = ", ".join(f"{tp.topic}[{tp.partition}]" for tp in reader.behind(ends))
            raise TimeoutError(f"archive: no progress for {stall_timeout_s:.0f}s on {behind}")
        if archiver.buffered >= FLUSH_ROWS:
            archiver.flush(reader.positions())
    archiver.flush(reader.positions())


def _follow(reader: _Reader, archiver: Archiver, shown: Progress, stop: threading.Event) -> None:
    flushed = discovered = time.monotonic()
    saved = reader.positions()
    try:
        while not stop.is_set():
            reader.poll_into(archiver)
            shown.update(sum(archiver.written.values()))
            now = time.monotonic()
            if archiver.buffered >= FLUSH_ROWS or (
                now - flushed >= FLUSH_EVERY_S and reader.positions() != saved
            ):
                saved = reader.positions()
                archiver.flush(saved)
                flushed = now
            if now - discovered >= DISCOVER_EVERY_S:
                reader.discover()
                discovered = now
    finally:
        archiver.flush(reader.positions())


class _Reader:
    """One consumer assigned to every partition of the archive tables' topics, each started
    where the manifest says it was archived to."""

    def __init__(
        self, settings: Settings, prefix: str | None, manifest: Manifest, say: Say
    ) -> None:
        from kafka import KafkaConsumer

        from modstream.core.limits import BROKER_MESSAGE_MAX_BYTES

        self.say, self.manifest = say, manifest
        self.tables = {topics.physical(t.topic, prefix): t for t in TABLES.values()}
        self.assigned: dict[Any, Table] = {}
        self.missing: list[str] = []
        self.consumer = KafkaConsumer(
            bootstrap_servers=settings.bootstrap_servers,
            group_id=None,
            enable_auto_commit=False,
            isolation_level="read_committed",
            auto_offset_reset="earliest",
            max_partition_fetch_bytes=BROKER_MESSAGE_MAX_BYTES,
            request_timeout_ms=15_000,
            **settings.kafka.python_options(),
        )

    def close(self) -> None:
        self.consumer.close()

    def discover(self) -> None:
        """Assign the partitions not assigned yet, each at its archived offset."""
        from kafka import TopicPartition

        self.consumer.topics()  # refreshes the metadata: topics created since are seen
        new, missing = [], []
        for physical in self.tables:
            partitions = self.consumer.partitions_for_topic(physical)
            if not partitions:
                missing.append(physical)
                continue
            new += [
                tp
                for tp in (TopicPartition(physical, p) for p in sorted(partitions))
                if tp not in self.assigned
            ]
        self.missing = missing
        if new:
            self._assign(new)

    def _assign(self, new: list[Any]) -> None:
        ends = self.consumer.end_offsets(new)
        starts = self.consumer.beginning_offsets(new)
        for tp in new:
            table = self.tables[tp.topic]
            archived = self.manifest.offset(table.name, tp.partition)
            if archived > ends[tp]:
                self.say(
                    f"archive: {tp.topic}[{tp.partition}] ends at {ends[tp]}, before the "
                    f"{archived} already archived (a recreated topic?): skipped; remove "
                    "the archive folder to start it again"
                )
                continue
            if archived < starts[tp]:
                self.say(
                    f"archive: {tp.topic}[{tp.partition}] offsets {archived}..{starts[tp] - 1} "
                    "were deleted (retention) before they were archived"
                )
            self.assigned[tp] = table
        self.consumer.assign(list(self.assigned))
        for tp in new:
            if tp in self.assigned:
                self.consumer.seek(tp, self.manifest.offset(self.assigned[tp].name, tp.partition))

    def ends(self) -> dict[Any, int]:
        """The end (last stable) offset of every assigned partition now."""
        return dict(self.consumer.end_offsets(list(self.assigned))) if self.assigned else {}

    def positions(self) -> dict[tuple[str, int], int]:
        """(table, partition) -> the next offset to read."""
        return {
            (table.name, tp.partition): self.consumer.position(tp)
            for tp, table in self.assigned.items()
        }

    def left(self, ends: dict[Any, int]) -> int:
        return sum(max(0, end - self.consumer.position(tp)) for tp, end in ends.items())

    def reached(self, ends: dict[Any, int]) -> bool:
        return not self.behind(ends)

    def behind(self, ends: dict[Any, int]) -> list[Any]:
        return [tp for tp, end in ends.items() if self.consumer.position(tp) < end]

    def poll_into(self, archiver: Archiver) -> None:
        for tp, records in self.consumer.poll(timeout_ms=500).items():
            table = self.assigned[tp]
            for record in records:
                archiver.add(table, tp.partition, record.offset, record.timestamp, record.value)
