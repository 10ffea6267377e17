"""Where a job starts (modstream/jobs/restore.py), with the broker's transaction states given."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from modstream.core.config import Settings
from modstream.jobs import ingest_check, restore


def checkpoint(root: Path, job: str, number: int, mtime: int) -> Path:
    path = root / job / f"chk-{number}"
    path.mkdir(parents=True)
    (path / "_metadata").write_bytes(b"x")
    seconds = mtime * 1_000_000_000  # whole seconds: some filesystems keep no finer mtimes
    os.utime(path / "_metadata", ns=(seconds, seconds))
    return path


def test_the_newest_checkpoint_whose_transactions_were_not_aborted(tmp_path: Path) -> None:
    older = checkpoint(tmp_path, "a" * 32, 6, 1_000)
    newest = checkpoint(tmp_path, "a" * 32, 7, 2_000)
    states = {"p-0-6": "CompleteCommit", "p-0-7": "CompleteAbort", "p-1-7": "CompleteCommit"}
    assert restore.choose([newest, older], states, "p") == restore.Choice(
        older, [(newest, ["p-0-7"])]
    )
    # Another deployment's ids and unknown (expired or unused) ids do not count.
    other = {"p-x-0-7": "CompleteAbort", "pp-0-7": "CompleteAbort"}
    assert restore.choose([newest, older], other, "p").checkpoint == newest


def test_a_passed_over_checkpoint_is_marked_and_never_taken_again(tmp_path: Path) -> None:
    older = checkpoint(tmp_path, "a" * 32, 3, 1_000)
    checkpoint(tmp_path, "a" * 32, 4, 2_000)
    said: list[str] = []
    chosen = restore.resolve("auto", tmp_path, {"p-0-4": "CompleteAbort"}, "p", said.append)
    assert chosen == older.resolve().as_uri()
    assert "passing over" in said[0] and "p-0-4" in said[0]
    # Later the same ids are reused by the restored run: the mark keeps chk-4 out.
    assert restore.resolve("auto", tmp_path, {"p-0-4": "Ongoing"}, "p") == chosen


def test_where_every_checkpoint_lost_its_outputs_the_job_refuses_empty_state(
    tmp_path: Path,
) -> None:
    checkpoint(tmp_path, "a" * 32, 2, 1_000)
    with pytest.raises(restore.RestoreError, match="--restore-from none"):
        restore.resolve("auto", tmp_path, {"p-0-2": "CompleteAbort"}, "p", lambda _: None)
    assert restore.resolve("none", tmp_path, {}, "p") is None


def test_no_checkpoint_starts_empty_unless_latest_was_asked_for(tmp_path: Path) -> None:
    assert restore.resolve("auto", tmp_path, {}, "p") is None
    with pytest.raises(restore.RestoreError, match="no completed checkpoint"):
        restore.resolve("latest", tmp_path, {}, "p")


def test_a_live_writer_is_seen_by_its_new_transactions_or_commits() -> None:
    looks = iter(
        [
            {"p-0-5": "CompleteCommit", "p-0-6": "Ongoing"},
            {"p-0-5": "CompleteCommit", "p-0-6": "CompleteCommit", "p-0-7": "Empty"},
        ]
    )
    with pytest.raises(restore.RestoreError, match="another instance is writing"):
        restore.refuse_if_live(lambda: next(looks), "p", 3, sleep=lambda _: None)


def test_a_crashed_writer_only_times_out_and_is_not_live() -> None:
    looks = iter(
        [{"p-0-6": "Ongoing", "p-0-7": "Empty"}, {"p-0-6": "CompleteAbort", "p-0-7": "Empty"}]
    )
    slept: list[float] = []
    seen = restore.refuse_if_live(lambda: next(looks), "p", 3, sleep=slept.append)
    assert slept == [3] and seen["p-0-6"] == "CompleteAbort"
    # Nothing open: nothing to watch.
    assert restore.refuse_if_live(lambda: {"p-0-7": "CompleteCommit"}, "p", 3, sleep=slept.append)
    assert slept == [3]


def test_deployments_get_their_own_ids_and_a_restart_keeps_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(restore, "transaction_states", lambda servers, prefix: {})
    staging = ingest_check.config_from_args(
        ingest_check.parse_args(["--checkpoint-dir", str(tmp_path / "staging")]),
        Settings.from_env(),
    )
    production = ingest_check.config_from_args(
        ingest_check.parse_args(["--checkpoint-dir", str(tmp_path / "production")]),
        Settings.from_env(),
    )
    assert staging.transactional_id_prefix.startswith("modstream-ingest-check-")
    assert staging.transactional_id_prefix != production.transactional_id_prefix
    assert staging.group_id == staging.transactional_id_prefix
    recorded = restore.read_marker(tmp_path / "staging")
    assert recorded["transactional_id_prefix"] == staging.transactional_id_prefix
    # A directory of checkpoints from before the marker keeps the old fixed ids.
    legacy = tmp_path / "legacy"
    checkpoint(legacy, "a" * 32, 1, 1_000)
    old = ingest_check.config_from_args(
        ingest_check.parse_args(["--checkpoint-dir", str(legacy)]), Settings.from_env()
    )
    assert old.transactional_id_prefix == "modstream-ingest-check"
    assert old.restore_from is not None and old.restore_from.endswith("/chk-1")


def test_a_directory_of_a_newer_state_schema_is_refused(tmp_path: Path) -> None:
    restore.write_marker(tmp_path, "moderation", "p", 3)
    with pytest.raises(restore.RestoreError, match=r"schema 3.*up to schema 2"):
        restore.check_schema(restore.read_marker(tmp_path), "moderation", 2)
    restore.check_schema(restore.read_marker(tmp_path), "moderation", 3)


COMMITTED = ["it.content.versions#0", "it.detector.results#1"]


@pytest.mark.parametrize(
    ("mode", "restore_from", "committed", "accept", "remote", "logged"),
    [
        ("auto", None, [], False, False, None),  # a first start: nothing read yet
        ("auto", "file:///c/chk-3", COMMITTED, False, False, None),  # state restored
        ("auto", None, COMMITTED, True, False, "starting with EMPTY state"),
        ("none", None, COMMITTED, False, False, "the cluster restores"),
        ("auto", None, COMMITTED, False, True, "the cluster restores"),
    ],
)
def test_empty_state_over_committed_offsets_starts_only_where_said(
    mode: str,
    restore_from: str | None,
    committed: list[str],
    accept: bool,
    remote: bool,
    logged: str | None,
) -> None:
    line = restore.empty_state_start(
        "moderation",
        mode,
        restore_from,
        committed,
        "g",
        accept_empty_state=accept,
        cluster_restores=remote,
    )
    assert (line is None) == (logged is None)
    if logged is not None:
        assert line is not None and logged in line and "it.content.versions#0" in line


def test_committed_offsets_without_state_are_refused_with_the_ways_out() -> None:
    with pytest.raises(restore.RestoreError) as refused:
        restore.empty_state_start(
            "moderation",
            "auto",
            None,
            COMMITTED,
            "modstream-moderation-1234abcd",
            accept_empty_state=False,
            cluster_restores=False,
        )
    message = str(refused.value)
    assert "'modstream-moderation-1234abcd' has committed offsets" in message
    assert "--restore-from" in message and "--accept-empty-state" in message
    assert "never decide the versions read but undecided" in message
