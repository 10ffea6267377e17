"""How `modstream sql` prints results (modstream/analytics/sql_format.py); no JVM."""

from __future__ import annotations

import csv
import datetime
import decimal
import io
import json

import pytest

from modstream.analytics.sql_format import Result, as_csv, as_json, as_table, plain, render

RATES = Result(
    "deploy/sql/queries/block_rate.sql",
    "Block rate per hour: blocked versions out of decided ones.",
    ("surface", "versions", "block_rate", "rules"),
    (
        ("public_post", 12, 0.25, ["nsfw-block"]),
        ("comment", 3, None, []),
    ),
)


class _Row:
    """Like a Flink Row with field names."""

    def __init__(self, **fields: object) -> None:
        self.fields = fields

    def as_dict(self) -> dict[str, object]:
        return self.fields

    def __iter__(self):  # type: ignore[no-untyped-def]
        return iter(self.fields.values())


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (decimal.Decimal("3"), 3),
        (decimal.Decimal("0.125"), 0.125),
        (datetime.datetime(2026, 12, 2, 1, 0, 5), "2026-12-02 01:00:05"),
        (datetime.date(2026, 12, 2), "2026-12-02"),
        ((1, "a"), [1, "a"]),
        ({"nsfw": decimal.Decimal("0.5")}, {"nsfw": 0.5}),
        (_Row(required=2, unknown=["x"]), {"required": 2, "unknown": ["x"]}),
        (True, True),
    ],
)
def test_plain_values(value: object, expected: object) -> None:
    assert plain(value) == expected


def test_table_aligns_numbers_right_and_counts_rows() -> None:
    assert as_table(RATES) == (
        "deploy/sql/queries/block_rate.sql: Block rate per hour\n"
        "surface     | versions | block_rate | rules\n"
        "------------+----------+------------+---------------\n"
        'public_post |       12 |       0.25 | ["nsfw-block"]\n'
        "comment     |        3 |       NULL | []\n"
        "(2 rows)\n"
    )


def test_an_empty_result_still_shows_its_columns() -> None:
    empty = Result("query", "", ("a",), ())
    assert as_table(empty) == "query\na\n-\n(0 rows)\n"


def test_csv_has_a_header_and_empty_nulls() -> None:
    rows = list(csv.reader(io.StringIO(as_csv(RATES))))
    assert rows == [
        ["surface", "versions", "block_rate", "rules"],
        ["public_post", "12", "0.25", '["nsfw-block"]'],
        ["comment", "3", "", "[]"],
    ]


def test_json_is_one_document_per_query() -> None:
    text = render([RATES, Result("query", "", ("n",), ((1,),))], "json")
    documents = [json.loads(line) for line in text.splitlines()]
    assert documents[0]["rows"][1] == {
        "surface": "comment",
        "versions": 3,
        "block_rate": None,
        "rules": [],
    }
    assert documents[0]["title"] == "Block rate per hour: blocked versions out of decided ones."
    assert documents[1] == {"source": "query", "title": "", "columns": ["n"], "rows": [{"n": 1}]}
    assert as_json(RATES).endswith("\n")


def test_several_csv_results_are_separated_and_named() -> None:
    text = render([RATES, Result("b.sql", "", ("n",), ((1,),))], "csv")
    assert text.endswith("\n\n# b.sql\nn\n1\n")


def test_an_unknown_format_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown format 'xml'"):
        render([RATES], "xml")
