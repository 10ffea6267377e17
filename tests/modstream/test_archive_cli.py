"""`modstream query`, `report`, `archive` and `clean` as a user calls them (no broker: the
archive is built by modstream/testing/archive.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pytest

from modstream.cli.archive import formatted
from modstream.cli.main import build_parser, main
from modstream.core.config import Settings
from modstream.stack import local as stack
from modstream.testing import archive as archive_data

PREFIX = "demo123abc"


@pytest.fixture
def run_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("MODSTREAM_RUN_DIR", str(tmp_path))
    monkeypatch.setenv("MODSTREAM_CONFIG", "none")
    archive_data.build(tmp_path / "archive" / PREFIX)
    return tmp_path


def test_rows_as_a_table_csv_or_json_lines() -> None:
    result = pa.table({"outcome": ["BLOCK", "ALLOW"], "n": [3, 12], "why": [["a", "b"], None]})
    assert formatted(result, "table") == (
        'outcome  n   why\n-------  --  ---------\nBLOCK    3   ["a","b"]\nALLOW    12\n(2 rows)\n'
    )
    assert formatted(result, "csv") == 'outcome,n,why\nBLOCK,3,"[""a"",""b""]"\nALLOW,12,\n'
    assert [json.loads(line) for line in formatted(result, "json").splitlines()] == [
        {"outcome": "BLOCK", "n": 3, "why": ["a", "b"]},
        {"outcome": "ALLOW", "n": 12, "why": None},
    ]


def test_query_prints_the_rows_of_a_deployment_s_archive(
    run_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sql = "SELECT count(*) AS n, count(DISTINCT date) AS days FROM decisions"
    assert main(["query", sql, "--prefix", PREFIX, "--format", "json"]) == 0
    decisions = len(archive_data.records()["moderation.decisions"])
    assert json.loads(capsys.readouterr().out) == {"n": decisions, "days": 1}


def test_query_reads_sql_from_a_file_and_finds_the_last_demo(
    run_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (run_dir / "demo").mkdir()
    (run_dir / "demo" / "last-run.json").write_text(json.dumps({"prefix": PREFIX}))
    query = run_dir / "q.sql"
    query.write_text("SELECT error_class, count(*) AS n FROM dlq GROUP BY ALL ORDER BY ALL")
    assert main(["query", "--file", str(query), "--last-demo", "--format", "csv"]) == 0
    assert capsys.readouterr().out.splitlines()[0] == "error_class,n"


def test_a_query_duckdb_refuses_is_exit_2_with_its_reason(
    run_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["query", "SELECT nope FROM decisions", "--prefix", PREFIX]) == 2
    assert 'modstream query: Binder Error: Referenced column "nope" not found' in (
        capsys.readouterr().err
    )
    assert main(["query", "SELECT 1", "--prefix", "bad prefix!"]) == 1


def test_report_writes_the_html(run_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = run_dir / "r.html"
    assert main(["report", "--out", str(out), "--prefix", PREFIX]) == 0
    assert capsys.readouterr().out == f"report: wrote {out}\n"
    assert out.read_text().count('src="data:image/png;base64,') >= 5


def test_archive_takes_a_deployment_and_follow() -> None:
    args = build_parser().parse_args(["archive", "--last-demo", "--follow"])
    assert (args.last_demo, args.follow, args.prefix) == (True, True, None)
    with pytest.raises(SystemExit):
        build_parser().parse_args(["archive", "--last-demo", "--prefix", "p"])


def test_clean_removes_what_modstream_wrote_and_nothing_else(tmp_path: Path) -> None:
    settings = Settings.from_env(
        {
            "MODSTREAM_RUN_DIR": str(tmp_path),
            "MODSTREAM_CONFIG": "none",
            "MODSTREAM_KAFKA_PORT": "1",  # nothing runs there: `down` finds no pid
            "MODSTREAM_KAFKA_CONTROLLER_PORT": "2",
            "MODSTREAM_REDIS_PORT": "3",
        }
    )
    for name in ("kafka/data", "redis/data", "archive/demo123abc", "demo", "my-notes"):
        (tmp_path / name).mkdir(parents=True)
    said: list[str] = []
    removed = stack.clean(settings, say=said.append)
    assert sorted(p.name for p in removed) == ["archive", "demo", "kafka", "redis"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["my-notes"]
    assert f"removed {tmp_path / 'archive'}" in said
