"""Progress of the long commands (modstream/core/progress.py): periodic log lines on stderr when
stderr is no terminal, a rich bar when it is, never anything on stdout."""

from __future__ import annotations

import json
import time

import pytest

from modstream.core import logs, progress
from modstream.core.progress import Progress


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_the_line_shows_done_total_rate_and_eta() -> None:
    assert progress.line(250, 1000, 5.0) == "250/1000 (25.0%) 50.0/s ETA 0:00:15"
    assert progress.line(0, 10, 0.0) == "0/10 (0.0%) 0.0/s ETA ?"
    assert progress.line(10, 10, 2.0, "requests") == "10/10 requests (100.0%) 5.0/s ETA 0:00:00"
    assert progress.line(1, 100_000, 1.0).endswith("ETA 27:46:39")
    assert progress.line(30, None, 10.0, "records") == "30 records 3.0/s, 0:00:10 so far"


def test_without_a_terminal_a_line_per_phase_then_at_most_one_per_interval_and_the_end(
    capsys: pytest.CaptureFixture[str],
) -> None:
    logs.configure(False, "INFO", command="dlq")
    clock = Clock()
    with Progress("dlq replay", live=None, every_s=5.0, clock=clock) as shown:
        assert shown.live is False  # pytest's captured stderr is no terminal
        shown.phase("re-checking", total=20, unit="records")
        for _ in shown.track(range(20)):
            clock.now += 1.0  # one item a second: a line at 5, 10, 15 and 20 (the end)
    out, err = capsys.readouterr()
    assert out == ""
    lines = err.splitlines()
    assert [line.split(" [info     ] ")[1].split(" [")[0] for line in lines] == [
        "dlq replay: re-checking",
        "dlq replay: re-checking: 5/20 records (25.0%) 1.0/s ETA 0:00:15",
        "dlq replay: re-checking: 10/20 records (50.0%) 1.0/s ETA 0:00:10",
        "dlq replay: re-checking: 15/20 records (75.0%) 1.0/s ETA 0:00:05",
        "dlq replay: re-checking: 20/20 records (100.0%) 1.0/s ETA 0:00:00",
    ]


def test_as_json_lines_with_the_counts(capsys: pytest.CaptureFixture[str]) -> None:
    logs.configure(True, "INFO", command="reevaluate")
    clock = Clock()
    with Progress("reevaluate", live=False, every_s=1.0, clock=clock) as shown:
        shown.phase("producing", total=2)
        clock.now = 2.0
        shown.update(advance=2)
    out, err = capsys.readouterr()
    assert out == ""
    start, end = (json.loads(line) for line in err.splitlines())
    assert (start["event"], start["phase"], start["total"]) == (
        "reevaluate: producing",
        "producing",
        2,
    )
    assert (end["done"], end["total"], end["command"], end["logger"]) == (
        2,
        2,
        "reevaluate",
        "modstream.core.progress",
    )


def test_waiting_on_a_blocking_call_says_so_every_interval(
    capsys: pytest.CaptureFixture[str],
) -> None:
    logs.configure(False, "INFO", command="replay")
    with Progress("replay", live=False, every_s=0.05) as shown, shown.waiting("running the job"):
        time.sleep(0.3)
    out, err = capsys.readouterr()
    assert out == ""
    assert "replay: running the job" in err
    assert err.count("replay: running the job (0:00:00 so far)") >= 2


def test_on_a_terminal_a_bar_on_stderr_and_nothing_on_stdout(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with Progress("demo", live=True) as shown:
        shown.phase("enforced", total=3, unit="actions")
        shown.update(3)
    out, err = capsys.readouterr()
    assert out == ""
    assert "demo: enforced" in err and "3/3" in err


def test_without_logging_configured_nothing_is_printed(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A library call (a test, another command) that did not ask for progress sees none."""
    with Progress("replay", live=False, every_s=0.0) as shown:
        shown.phase("reading", total=1)
        shown.update(1)
    assert capsys.readouterr() == ("", "")
