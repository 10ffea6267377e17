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
