"""What `modstream archive` says when it is done (the reading itself is tested on the real
broker: tests/integration/test_archive.py)."""

from __future__ import annotations

from modstream.analytics.archive import Summary
from modstream.analytics.archive_schema import TABLES


def test_the_summary_has_a_line_per_table_with_skipped_records_and_what_was_missing() -> None:
    summary = Summary(
        rows={name: 0 for name in TABLES} | {"decisions": 12, "contents": 7},
        skipped={"contents": 2},
        missing=["p.content.visibility"],
        removed=1,
        totals={"decisions": 40, "contents": 7},
    )
    lines = summary.lines()
    assert lines[0].split() == ["decisions", "12", "rows", "(archive:", "40)"]
    contents = next(line for line in lines if line.split()[0] == "contents")
    assert contents.split() == ["contents", "7", "rows,", "2", "skipped", "(archive:", "7)"]
    assert len(lines) == len(TABLES) + 2
    assert "no topic yet (its table stays empty): p.content.visibility" in lines[-2]
    assert "removed 1 file(s)" in lines[-1]
