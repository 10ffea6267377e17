"""The notebook API: DuckDB views and Arrow tables over the archive, with `since` and
`policy_version` filters; pandas reads the same archive."""

from __future__ import annotations

import datetime
from pathlib import Path

import duckdb
import pandas as pd
import pytest

from modstream.analytics import streams as analytics
from modstream.analytics.archive_schema import TABLES
from modstream.core.config import Settings
from modstream.testing import archive as archive_data
from modstream.testing.records import T0

DAY_MS = 86_400_000


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    where = tmp_path_factory.mktemp("archive")
    archive_data.build(where)
    return where


def _expected(topic: str, since: int = 0, versions: tuple[int, ...] | None = None) -> int:
    return sum(
        1
        for record in archive_data.records()[topic]
        if record["ts"] >= since and (versions is None or record["policy_version"] in versions)
    )


def test_every_table_is_a_view_with_its_columns_even_before_anything_is_archived(
    tmp_path: Path,
) -> None:
    con = analytics.connect(root=tmp_path / "nothing-yet")
    for name, table in TABLES.items():
        assert con.sql(f"SELECT count(*) FROM {name}").fetchall() == [(0,)]
        assert [row[0] for row in con.sql(f"DESCRIBE {name}").fetchall()] == (
            table.read_schema.names
        )


def test_duckdb_reads_the_archived_decisions_with_their_nested_fields(root: Path) -> None:
    con = analytics.connect(root=root)
    assert con.sql("SELECT count(*) FROM decisions").fetchall() == [
        (len(archive_data.records()["moderation.decisions"]),)
    ]
    names = [row[0] for row in con.sql("DESCRIBE decisions").fetchall()]
    assert names == TABLES["decisions"].read_schema.names
    unknown = con.sql(
        "SELECT count(*) FROM decisions WHERE list_contains(completeness.unknown, "
        "'offensive_text') AND evidence = []"
    ).fetchall()[0][0]
    assert unknown > 0
    days = con.sql("SELECT DISTINCT date, policy_version FROM decisions").fetchall()
    assert days == [(datetime.date(2025, 11, 30), 1)]


def test_read_table_since_accepts_ms_dates_datetimes_and_iso_text(root: Path) -> None:
    cut = T0 + 20_000
    as_datetime = datetime.datetime.fromtimestamp(cut / 1000, tz=datetime.UTC)
    expected = _expected("moderation.decisions", since=cut)
    assert 0 < expected < len(archive_data.records()["moderation.decisions"])
    for since in (cut, as_datetime, as_datetime.replace(tzinfo=None), as_datetime.isoformat()):
        table = analytics.read_decisions(since=since, root=root)
        assert table.num_rows == expected, since
        assert min(table["ts"].to_pylist()) >= cut
    assert analytics.read_decisions(since=datetime.date(2025, 11, 30), root=root).num_rows == (
        _expected("moderation.decisions")
    )
    assert analytics.read_decisions(since=datetime.date(2025, 12, 1), root=root).num_rows == 0


def test_read_table_by_policy_version(root: Path) -> None:
    shadow = analytics.read_table("shadow", policy_version=2, root=root)
    assert shadow.num_rows == _expected("moderation.shadow", versions=(2,)) > 0
    assert set(shadow["policy_version"].to_pylist()) == {2}
    assert analytics.read_table("shadow", policy_version=[1], root=root).num_rows == 0
    both = analytics.read_table("actions", since=T0, policy_version=[1, 2], root=root)
    assert both.num_rows == _expected("moderation.actions")


def test_read_table_has_the_columns_of_its_schema_also_when_empty(
    root: Path, tmp_path: Path
) -> None:
    for name, table in TABLES.items():
        assert analytics.read_table(name, root=root).schema == table.read_schema
        assert analytics.read_table(name, root=tmp_path).schema == table.read_schema
        assert analytics.read_table(name, root=tmp_path).num_rows == 0


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (lambda r: analytics.read_table("decision", root=r), ValueError, "no archive table"),
        (
            lambda r: analytics.read_table("dlq", policy_version=1, root=r),
            ValueError,
            "'dlq' is not split by policy_version",
        ),
        (lambda r: analytics.read_decisions(since=True, root=r), TypeError, "not a bool"),
        (lambda r: analytics.read_decisions(since="yesterday", root=r), ValueError, "ISO"),
        (lambda r: analytics.read_decisions(since=1.5, root=r), TypeError, "not float"),
    ],
)
def test_bad_arguments_say_what_is_wrong(root: Path, call, error, message) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(error, match=message):
        call(root)


def test_pandas_reads_the_archive_too(root: Path) -> None:
    through_arrow = analytics.read_decisions(root=root).to_pandas()
    direct = pd.read_parquet(root / "decisions")
    assert len(through_arrow) == len(direct) == _expected("moderation.decisions")
    assert sorted(direct["decision_id"]) == sorted(through_arrow["decision_id"])
    assert set(direct["policy_version"].astype(int)) == {1}
    assert through_arrow["completeness"].iloc[0].keys() == {"required", "received", "unknown"}


def test_query_runs_sql_over_the_views(root: Path) -> None:
    result = analytics.query(
        "SELECT kind, count(*) AS n FROM review_tasks GROUP BY kind ORDER BY kind", root=root
    )
    assert result is not None
    assert dict(zip(result["kind"].to_pylist(), result["n"].to_pylist(), strict=True)) == {
        "appeal": 1,
        "review": len(archive_data.records()["review.tasks"]) - 1,
    }
    with pytest.raises(duckdb.Error):
        analytics.query("SELECT * FROM no_such_table", root=root)


def test_a_deployment_s_archive_is_under_the_run_directory(tmp_path: Path) -> None:
    settings = Settings.from_env({"MODSTREAM_RUN_DIR": str(tmp_path), "MODSTREAM_CONFIG": "none"})
    archive_data.build(tmp_path / "archive" / "demo123abc")
    found = analytics.read_decisions(settings=settings, prefix="demo123abc")
    assert found.num_rows == _expected("moderation.decisions")
    assert analytics.read_decisions(settings=settings).num_rows == 0  # the `default` archive
