"""The `modstream` command line: options after `--` go to the job."""

from __future__ import annotations

import pytest

from modstream.cli.main import build_parser, main, split_passthrough


def test_options_after_the_double_dash_belong_to_the_job() -> None:
    own, job = split_passthrough(
        ["run", "moderation", "--jobmanager", "h:1", "--", "--policy", "p.yaml", "--", "x"]
    )
    assert own == ["run", "moderation", "--jobmanager", "h:1"]
    assert job == ["--policy", "p.yaml", "--", "x"]
    args = build_parser().parse_args(own)
    assert (args.job, args.jobmanager, args.job_args) == ("moderation", "h:1", [])


def test_a_command_without_job_options_refuses_them(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["status", "--", "--verbose"]) == 2
    assert "takes no arguments after --" in capsys.readouterr().err


def test_bench_is_the_benchmarks_entry_point_not_an_import_of_the_cli() -> None:
    """`modstream bench` runs modstream/bench/compare.py's main through the entry point that
    pyproject.toml registers (the benchmarks sit over the CLI: modstream/cli/registered.py)."""
    from modstream.bench import compare
    from modstream.cli import registered

    assert "bench" in registered.NAMES
    assert registered.command("bench") is compare.main
    with pytest.raises(SystemExit, match="not registered"):
        registered.command("no-such-command")
