"""Exactly once into the archive: files first, then the manifest; whatever a stopped run wrote
past its manifest is removed at the next start, which reads those offsets again."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from modstream.analytics import archive_store
from modstream.analytics import streams as analytics
from modstream.analytics.archive_schema import TABLES
from modstream.analytics.archive_store import (
    MANIFEST,
    ArchiveError,
    Archiver,
    file_name,
    load_manifest,
    locked,
    recover,
)
from modstream.testing import archive as archive_data


def _decisions() -> list[dict[str, object]]:
    return archive_data.records()["moderation.decisions"]


def _keys(root: Path) -> list[tuple[int, int]]:
    table = analytics.read_table("decisions", root=root)
    return sorted(zip(table["_partition"].to_pylist(), table["_offset"].to_pylist(), strict=True))


def _archive(root: Path, values: list[dict[str, object]], start: int) -> Archiver:
    """`values` as offsets start.. of partition 0 of moderation.decisions, then a flush."""
    archiver = Archiver(root, load_manifest(root))
    for offset, value in enumerate(values, start=start):
        archiver.add(TABLES["decisions"], 0, offset, 1, archive_data.raw(value))
    archiver.flush({("decisions", 0): start + len(values)})
    return archiver


def test_the_manifest_says_how_far_each_partition_is_archived_and_what_was_written(
    tmp_path: Path,
) -> None:
    archiver = archive_data.build(tmp_path)
    manifest = json.loads((tmp_path / MANIFEST).read_text())
    decisions = len(archive_data.records()["moderation.decisions"])
    assert sum(manifest["offsets"]["decisions"].values()) == decisions
    assert manifest["rows"]["decisions"] == decisions == archiver.written["decisions"]
    # the workload's malformed uploads: two on content.versions, one on detector.results
    assert manifest["skipped"] == {"contents": 2, "detector_results": 1}
    assert load_manifest(tmp_path).rows == manifest["rows"]


def test_files_are_named_by_topic_partition_and_offsets(tmp_path: Path) -> None:
    _archive(tmp_path, _decisions()[:5], start=10)
    files = sorted(p.name for p in (tmp_path / "decisions").rglob("*.parquet"))
    assert files == [file_name("moderation.decisions", 0, 10, 14)]
    assert files == ["moderation.decisions-p0-000000000010-000000000014.parquet"]


def test_a_crash_between_the_files_and_the_manifest_leaves_no_duplicate(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    values = _decisions()[:30]
    _archive(tmp_path, values[:10], start=0)
    crashing = Archiver(tmp_path, load_manifest(tmp_path))
    for offset, value in enumerate(values[10:20], start=10):
        crashing.add(TABLES["decisions"], 0, offset, 1, archive_data.raw(value))

    def crash(root: Path, manifest: object) -> None:
        raise OSError("the process died here")

    monkeypatch.setattr(archive_store, "save_manifest", crash)
    with pytest.raises(OSError, match="died"):
        crashing.flush({("decisions", 0): 20})
    monkeypatch.undo()
    assert len(_keys(tmp_path)) == 20  # the orphan file is on disk...
    manifest = load_manifest(tmp_path)
    assert manifest.offset("decisions", 0) == 10  # ...past what the manifest covers

    removed = recover(tmp_path, manifest)
    assert [p.name for p in removed] == [file_name("moderation.decisions", 0, 10, 19)]
    # The next run reads from the manifest's offset again, in a different batch.
    _archive(tmp_path, values[10:30], start=manifest.offset("decisions", 0))
    assert _keys(tmp_path) == [(0, offset) for offset in range(30)]
    assert load_manifest(tmp_path).rows["decisions"] == 30


def test_a_file_cut_off_while_written_is_a_hidden_temporary_one_and_is_removed(
    tmp_path: Path,
) -> None:
    _archive(tmp_path, _decisions()[:3], start=0)
    folder = next((tmp_path / "decisions").rglob("*.parquet")).parent
    partial = folder / f".{file_name('moderation.decisions', 0, 3, 9)}.tmp"
    partial.write_bytes(b"PAR1 cut off")
    assert analytics.read_table("decisions", root=tmp_path).num_rows == 3  # readers skip it
    assert recover(tmp_path, load_manifest(tmp_path)) == [partial]
    assert not partial.exists()


def test_recovery_leaves_covered_files_and_other_peoples_files(tmp_path: Path) -> None:
    _archive(tmp_path, _decisions()[:4], start=0)
    _archive(tmp_path, _decisions()[4:8], start=4)
    notes = tmp_path / "decisions" / "README.txt"
    notes.write_text("mine")
    assert recover(tmp_path, load_manifest(tmp_path)) == []
    assert notes.exists()
    assert len(list((tmp_path / "decisions").rglob("*.parquet"))) == 2


def test_each_file_holds_one_hive_partition_without_the_partition_columns(tmp_path: Path) -> None:
    archive_data.build(tmp_path)
    for path in (tmp_path / "decisions").rglob("*.parquet"):
        day, version = path.parent.parent.name, path.parent.name
        assert day.startswith("date=") and version.startswith("policy_version=")
        names = pq.read_schema(path).names
        assert "policy_version" not in names and "date" not in names
        assert names[-3:] == ["_partition", "_offset", "_timestamp"]


def test_a_tombstone_is_neither_a_row_nor_skipped(tmp_path: Path) -> None:
    archiver = Archiver(tmp_path, load_manifest(tmp_path))
    archiver.add(TABLES["visibility"], 0, 0, 1, None)
    archiver.add(TABLES["visibility"], 0, 1, 1, b'{"not": "a visibility record"}')
    archiver.flush({("visibility", 0): 2})
    assert (archiver.written["visibility"], archiver.skipped["visibility"]) == (0, 1)
    assert load_manifest(tmp_path).offset("visibility", 0) == 2


def test_one_archiver_at_a_time(tmp_path: Path) -> None:
    with (
        locked(tmp_path),
        pytest.raises(ArchiveError, match="another `modstream archive`"),
        locked(tmp_path),
    ):
        pass
    with locked(tmp_path):  # released
        pass


def test_an_unreadable_manifest_is_an_error_naming_the_file(tmp_path: Path) -> None:
    (tmp_path / MANIFEST).write_text("{not json")
    with pytest.raises(ArchiveError, match=f"{MANIFEST}: not a readable archive manifest"):
        load_manifest(tmp_path)
    (tmp_path / MANIFEST).write_text(json.dumps({"format": 99, "offsets": {}}))
    with pytest.raises(ArchiveError, match="format 99"):
        load_manifest(tmp_path)
