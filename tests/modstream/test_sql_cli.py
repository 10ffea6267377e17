"""`modstream sql`'s command line (modstream/cli/sql.py): what it accepts and refuses, no JVM."""

from __future__ import annotations

from pathlib import Path

import pytest

from modstream.analytics.sql_tables import QUERIES_DIR
from modstream.cli.main import build_parser, main
from modstream.cli.sql import scripts_of


def test_several_files_after_one_or_several_flags(tmp_path: Path) -> None:
    paths = [tmp_path / f"q{i}.sql" for i in range(3)]
    for path in paths:
        path.write_text(f"-- question {path.stem}\nSELECT 1;\nSELECT 2")
    args = build_parser().parse_args(
        ["sql", "--file", str(paths[0]), str(paths[1]), "--file", str(paths[2]), "--last-demo"]
    )
    assert args.files == paths and args.last_demo and args.format == "table"
    scripts = scripts_of(args)
    assert [script.title for script in scripts] == ["question q0", "question q1", "question q2"]
    assert sum(len(script.statements) for script in scripts) == 6


def test_an_inline_query_runs_after_the_files(tmp_path: Path) -> None:
    path = tmp_path / "q.sql"
    path.write_text("SELECT 1")
    args = build_parser().parse_args(["sql", "SELECT 2", "--file", str(path), "--format", "csv"])
    assert [script.source for script in scripts_of(args)] == [str(path), "query"]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["sql"], "give a query"),
        (["sql", "--file", "/nonexistent/q.sql"], "/nonexistent/q.sql: No such file"),
        (["sql", "  -- nothing\n"], "the query is empty"),
        (
            ["sql", "--file", str(QUERIES_DIR / "review_backlog_by_queue.sql"), "SELECT 1"],
            "SELECT 1: No such file or directory (a query goes before --file",
        ),
        (["sql", "SELECT 1", "--prefix", "no/slash"], "is not a topic prefix"),
        (["sql", "SELECT 1", "--parallelism", "0"], "--parallelism must be at least 1"),
    ],
)
def test_bad_command_lines_exit_2_with_one_message(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err
    assert "Traceback" not in err


def test_a_file_without_statements_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "empty.sql"
    path.write_text("-- only a header\n")
    assert main(["sql", "--file", str(path)]) == 2
    assert f"{path}: no SQL statement in it" in capsys.readouterr().err


def test_last_demo_without_a_demo_exits_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("MODSTREAM_RUN_DIR", str(tmp_path))
    monkeypatch.setenv("MODSTREAM_CONFIG", "none")
    assert main(["sql", "SELECT 1", "--last-demo"]) == 2
    assert "no demo run recorded" in capsys.readouterr().err


def test_every_ready_query_has_a_header_and_one_query() -> None:
    files = sorted(QUERIES_DIR.glob("*.sql"))
    assert len(files) >= 7
    args = build_parser().parse_args(["sql", "--file", *map(str, files)])
    for script in scripts_of(args):
        assert len(script.title) > 40, f"{script.source}: say what it answers in its header"
        assert len(script.statements) == 1, script.source
        assert script.statements[0].text.lstrip("( ").upper().startswith(("SELECT", "WITH"))
