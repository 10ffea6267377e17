"""The ingest_check adapter and its argument handling, without a JVM."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pyflink.common import Row

from modstream.core.config import Settings
from modstream.jobs import ingest_check, restore
from modstream.testing.records import T0, upload


def run_adapter(*rows: Row) -> list[tuple[str, Row]]:
    adapter = ingest_check.IngestCheck("out.valid", "out.dlq", {"t9.in": "content.versions"})
    emitted: list[tuple[str, Row]] = []
    for row in rows:
        for item in adapter.process_element(row, ctx=None):
            if isinstance(item, tuple):
                tag, value = item
                emitted.append((tag.tag_id, value))
            else:
                emitted.append(("main", item))
    return emitted


def test_adapter_sends_valid_rows_to_main_output_and_bad_rows_to_the_dlq_tag() -> None:
    emitted = run_adapter(
        Row("content.versions", "c-1", json.dumps(upload("c-1")), T0),
        Row("content.versions", None, "{oops", T0),
        Row("content.versions", "c-3", None, None),
        Row("t9.in", "c-4", json.dumps(upload("c-4")), T0),
    )
    assert [name for name, _ in emitted] == ["main", "dlq", "dlq", "main"]
    main_row = emitted[0][1]
    assert (main_row[0], main_row[1]) == ("out.valid", "c-1")
    assert emitted[3][1][1] == "c-4"  # a renamed physical topic is checked by its contract schema
    dlq_rows = [row for name, row in emitted if name == "dlq"]
    assert all(row[0] == "out.dlq" for row in dlq_rows)
    assert json.loads(dlq_rows[1][2])["ts"] == 0  # a tombstone with no timestamp at all


def test_restore_latest_without_a_checkpoint_stops_with_a_clear_message(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(restore, "transaction_states", lambda servers, prefix: {})
    args = ingest_check.parse_args(["--checkpoint-dir", str(tmp_path), "--restore-from", "latest"])
    with pytest.raises(SystemExit, match="no completed checkpoint"):
        ingest_check.config_from_args(args, Settings.from_env())


def test_topic_mapping_and_latest_checkpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(restore, "transaction_states", lambda servers, prefix: {})
    for job, number in [("a" * 32, 3), ("b" * 32, 7)]:
        (tmp_path / job / f"chk-{number}").mkdir(parents=True)
        (tmp_path / job / f"chk-{number}" / "_metadata").write_bytes(b"x")
    (tmp_path / ("c" * 32) / "chk-9").mkdir(parents=True)  # in progress: no _metadata
    args = ingest_check.parse_args(
        [
            "--checkpoint-dir",
            str(tmp_path),
            "--restore-from",
            "latest",
            "--topic",
            "content.versions=t1.in",
        ]
    )
    config = ingest_check.config_from_args(args, Settings.from_env())
    assert config.topic("content.versions") == "t1.in"
    assert config.topic("moderation.dlq") == "moderation.dlq"
    assert config.restore_from is not None
    assert config.restore_from.endswith("/chk-7")
