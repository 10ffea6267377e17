"""`modstream eval` on a small archive written in the archive's layout (hive-partitioned
Parquet per table, docs/ANALYSTS.md): the loading path, the id prefix, the command's output."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from modstream.analytics import evaluation
from modstream.cli import main as cli
from modstream.core.config import PROJECT_ROOT, Settings
from modstream.stack import deployments

EVIDENCE = pa.list_(
    pa.struct(
        [
            ("detector", pa.string()),
            ("model_version", pa.string()),
            ("segment_id", pa.int64()),
            ("evidence_ref", pa.string()),
        ]
    )
)
DECISION = pa.schema(
    [
        ("decision_id", pa.string()),
        ("content_id", pa.string()),
        ("content_version", pa.int64()),
        ("decision_revision", pa.int64()),
        ("outcome", pa.string()),
        ("reasons", pa.list_(pa.string())),
        ("matched_rules", pa.list_(pa.string())),
        ("policy_version", pa.int64()),
        ("evidence", EVIDENCE),
        ("trigger", pa.string()),
        ("ts", pa.int64()),
        ("_partition", pa.int64()),
        ("_offset", pa.int64()),
    ]
)
PREFIX = "demo0eval"
DAY = "date=2026-12-01"


def _write(
    root: Path, folder: str, rows: list[dict[str, Any]], schema: pa.Schema | None = None
) -> None:
    path = root / folder / "part-0.parquet"
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), path)


def _decision(
    content_id: str, outcome: str, reasons: list[str], version: int = 1, **more: Any
) -> dict:
    return {
        "decision_id": f"d-{content_id}",
        "content_id": f"{PREFIX}-{content_id}",
        "content_version": 1,
        "decision_revision": more.get("revision", 1),
        "outcome": outcome,
        "reasons": reasons,
        "matched_rules": [],
        "policy_version": version,
        "evidence": [{"detector": "media_check", "model_version": "media_check-1",
                      "segment_id": None, "evidence_ref": None}],
        "trigger": more.get("trigger", "evidence"),
        "ts": 1,
        "_partition": 0,
        "_offset": more.get("offset", 0),
    }  # fmt: skip


def write_archive(root: Path) -> None:
    """Four decided versions over two policy versions, their facts, a task, two reviews (one
    the job refused) and the DLQ record that refused it."""
    _write(root, f"decisions/{DAY}/policy_version=1", [
        _decision("c7-1", "BLOCK", ["malware"]),
        _decision("c7-2", "ALLOW", [], offset=1),
        _decision("c7-3", "ALLOW", [], offset=2),
    ], DECISION)  # fmt: skip
    _write(root, f"decisions/{DAY}/policy_version=2", [
        _decision("c7-4", "RESTRICT", ["harassment"], version=2),
    ], DECISION)  # fmt: skip
    contents = [
        {"event_id": f"up-{i}", "type": "upsert", "content_id": f"{PREFIX}-c7-{i}",
         "content_version": 1, "modality": "image", "surface": "comment", "region": "DE",
         "ts": 1, "_partition": 0, "_offset": i}
        for i in (1, 2, 3, 4)
    ]  # fmt: skip
    _write(root, f"contents/{DAY}", contents)
    _write(root, f"review_tasks/{DAY}/policy_version=1", [
        {"task_id": "t1", "content_id": f"{PREFIX}-c7-2", "content_version": 1,
         "_partition": 0, "_offset": 0},
    ])  # fmt: skip
    reviews = [
        {"event_id": "rv-ok", "task_id": "external", "content_id": f"{PREFIX}-c7-3",
         "content_version": 1, "reviewer_id": "mod-1", "outcome": "BLOCK",
         "reason": "sexual_content", "ts": 5, "_partition": 0, "_offset": 0},
        {"event_id": "rv-forged", "task_id": "external", "content_id": f"{PREFIX}-c7-2",
         "content_version": 1, "reviewer_id": "mod-9", "outcome": "BLOCK", "reason": "x",
         "ts": 6, "_partition": 0, "_offset": 1},
    ]  # fmt: skip
    _write(root, f"review_decisions/{DAY}", reviews)
    _write(root, f"dlq/{DAY}", [
        {"source_topic": f"{PREFIX}.review.decisions", "key": f"{PREFIX}-c7-2",
         "error_class": "signature", "raw": json.dumps(reviews[1]), "ts": 7,
         "_partition": 0, "_offset": 0},
    ])  # fmt: skip


LABELS = [
    {"content_id": "c7-1", "content_version": 1, "violating": True, "reason": "malware"},
    {"content_id": "c7-2", "content_version": 1, "violating": True, "reason": "malware"},
    {"content_id": "c7-4", "content_version": 1, "violating": False},
    {"content_id": "c7-9", "content_version": 1, "violating": False},
]


@pytest.fixture()
def settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Settings:
    monkeypatch.setenv("MODSTREAM_RUN_DIR", str(tmp_path / "run"))
    monkeypatch.setenv("MODSTREAM_CONFIG", "none")
    monkeypatch.delenv("MODSTREAM_HOME", raising=False)
    settings = Settings.from_env()
    write_archive(deployments.archive_root(settings, PREFIX))
    deployments.record_demo(settings, f"{PREFIX}-")
    return settings


@pytest.fixture()
def labels_path(tmp_path: Path) -> Path:
    path = tmp_path / "labels.jsonl"
    path.write_text("".join(json.dumps(label) + "\n" for label in LABELS))
    return path


def test_the_archive_is_read_and_graded(settings: Settings, labels_path: Path) -> None:
    result = evaluation.run(settings, PREFIX, labels_path, f"{PREFIX}-")
    coverage = result.coverage
    assert (coverage.from_file, coverage.from_reviews, coverage.matched) == (4, 1, 4)
    assert coverage.unmatched_samples == ((f"{PREFIX}-c7-9", 1),)
    found = {row.reason: (row.tp, row.fp, row.fn) for row in result.reasons}
    # c7-1 tp; c7-2 fn; c7-4 fp (RESTRICT, labelled clean); c7-3 fn from its review, whose
    # reason is a rule reason of policy_rules/global.yaml; the forged review is no label
    assert found["(any)"] == (1, 1, 2)
    assert found["malware"] == (1, 0, 1)
    assert found["sexual_content"] == (0, 0, 1)
    policies = {
        row.value: row.versions for row in result.slices if row.dimension == "policy_version"
    }
    assert policies == {"1": 3, "2": 1}  # from both hive partitions
    assert (result.versions, result.blocked, result.reviewed) == (4, 1, 1)


def test_without_the_id_prefix_nothing_matches_and_a_note_says_why(
    settings: Settings, labels_path: Path
) -> None:
    result = evaluation.run(settings, PREFIX, labels_path, reviews=False)
    assert result.coverage.matched == 0
    assert any("--id-prefix" in note for note in result.notes)


def test_the_command_on_the_last_demo_prefixes_the_ids(
    settings: Settings, labels_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["eval", "--labels", str(labels_path), "--last-demo"]) == 0
    out = capsys.readouterr().out
    assert "precision" in out and "recall" in out
    assert f"samples (ids only, after {PREFIX}-):" in out
    assert "false negatives, (any): c7-2 v1, c7-3 v1" in out
    assert cli.main(["eval", "--labels", str(labels_path), "--prefix", PREFIX,
                     "--id-prefix", f"{PREFIX}-", "--no-reviews", "--json"]) == 0  # fmt: skip
    printed = json.loads(capsys.readouterr().out)
    assert printed["reasons"][0] == {
        "reason": "(any)", "tp": 1, "fp": 1, "fn": 1, "precision": 0.5, "recall": 0.5,
        "false_positives": [[f"{PREFIX}-c7-4", 1]], "false_negatives": [[f"{PREFIX}-c7-2", 1]],
    }  # fmt: skip


def test_the_command_names_a_bad_line_and_an_empty_archive(
    settings: Settings, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"content_id": "c7-1", "content_version": 1, "violating": "yes"}\n')
    assert cli.main(["eval", "--labels", str(bad), "--last-demo"]) == 2
    assert f"{bad}:1: violating must be true or false" in capsys.readouterr().err
    good = tmp_path / "good.jsonl"
    good.write_text(json.dumps(LABELS[0]) + "\n")
    assert cli.main(["eval", "--labels", str(good), "--prefix", "nothing-here"]) == 1
    assert "no decisions archived" in capsys.readouterr().out


def test_the_demo_labels_are_shipped(settings: Settings) -> None:
    assert evaluation.demo_labels(settings).relative_to(PROJECT_ROOT).as_posix() == (
        "deploy/demo/labels.jsonl"
    )
    assert evaluation.demo_labels(settings, "real").is_file()


def test_second_reviews_are_graded_per_queue_and_pair_from_the_archive(
    settings: Settings,
) -> None:
    """Issue 29 item 2: a second-review task (its `second_review` struct) pairs the first review
    of the task it names with its own review by another reviewer; a review the job refused
    (here r3's, without the task's lease: in the DLQ) is not one."""
    prefix = "demo0second"
    root = deployments.archive_root(settings, prefix)
    note = pa.struct(
        [
            ("round", pa.string()),
            ("of_task", pa.string()),
            ("sampled", pa.bool_()),
            ("outcomes", pa.list_(pa.string())),
        ]
    )
    tasks = pa.schema(
        [
            ("task_id", pa.string()),
            ("content_id", pa.string()),
            ("content_version", pa.int64()),
            ("queue", pa.string()),
            ("second_review", note),
        ]
    )
    _write(root, f"review_tasks/{DAY}/policy_version=1", [
        {"task_id": "t-1", "content_id": "c-1", "content_version": 1, "queue": "adult",
         "second_review": None},
        {"task_id": "s-1", "content_id": "c-1", "content_version": 1, "queue": "second_review",
         "second_review": {"round": "second", "of_task": "t-1", "sampled": False,
                           "outcomes": None}},
    ], tasks)  # fmt: skip
    reviews = [
        {"event_id": "rv-1", "task_id": "t-1", "content_id": "c-1", "reviewer_id": "r2",
         "outcome": "BLOCK", "ts": 1},
        {"event_id": "rv-unleased", "task_id": "s-1", "content_id": "c-1", "reviewer_id": "r3",
         "outcome": "ALLOW", "ts": 2},
        {"event_id": "rv-2", "task_id": "s-1", "content_id": "c-1", "reviewer_id": "r1",
         "outcome": "BLOCK", "ts": 3},
    ]  # fmt: skip
    _write(root, f"review_decisions/{DAY}", reviews)
    _write(root, f"dlq/{DAY}", [
        {"source_topic": f"{prefix}.review.decisions", "key": "c-1", "error_class": "conflict",
         "raw": json.dumps(reviews[1]), "ts": 4, "_partition": 0, "_offset": 0},
    ])  # fmt: skip
    assert evaluation.second_reviews(settings, prefix) == [
        {"queue": "adult", "pair": "r1,r2", "items": 1, "agreed": 1, "kappa": None}
    ]
    # An archive written before review tasks carried `second_review` has none.
    assert evaluation.second_reviews(settings, PREFIX) == []
