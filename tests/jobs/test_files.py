"""The file writer a bounded job (replay) ends in: one line per row, one file per topic, inside
the job instead of collecting rows back to the client over py4j (docs/BENCHMARKS.md, "Replay")."""

from __future__ import annotations

from pathlib import Path

from pyflink.common import Row

from jobs.files import _FileWriter


def write(out: Path, rows: list[Row], skip_prefix: str = "") -> None:
    writer = _FileWriter(str(out), skip_prefix)
    writer.open(None)  # type: ignore[arg-type]
    for row in rows:
        assert list(writer.process_element(row, None)) == []
    writer.close()


def test_each_value_is_one_line_of_its_topics_file_in_arrival_order(tmp_path: Path) -> None:
    write(
        tmp_path,
        [
            Row("moderation.decisions", "c-1", '{"n":1}'),
            Row("moderation.actions", "c-1", '{"a":"hide"}'),
            Row("moderation.decisions", None, '{"n":2,"text":"ü"}'),
        ],
    )
    assert (tmp_path / "moderation.decisions.jsonl").read_text(encoding="utf-8") == (
        '{"n":1}\n{"n":2,"text":"ü"}\n'
    )
    assert (tmp_path / "moderation.actions.jsonl").read_text(encoding="utf-8") == '{"a":"hide"}\n'


def test_topics_with_the_skipped_prefix_are_not_written(tmp_path: Path) -> None:
    write(
        tmp_path,
        [Row("scan.requests.text", "c-1", "{}"), Row("moderation.dlq", None, "{}")],
        skip_prefix="scan.requests.",
    )
    assert sorted(path.name for path in tmp_path.iterdir()) == ["moderation.dlq.jsonl"]


def test_a_file_from_an_earlier_run_is_replaced_not_appended_to(tmp_path: Path) -> None:
    (tmp_path / "moderation.decisions.jsonl").write_text('{"old":true}\n', encoding="utf-8")
    write(tmp_path, [Row("moderation.decisions", "c-1", '{"new":true}')])
    assert (tmp_path / "moderation.decisions.jsonl").read_text() == '{"new":true}\n'


def test_closing_a_writer_that_never_opened_does_nothing(tmp_path: Path) -> None:
    _FileWriter(str(tmp_path), "").close()
    assert list(tmp_path.iterdir()) == []
