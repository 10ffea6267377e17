"""The notebook API over the Parquet archive (modstream/analytics/archive.py): Arrow tables and a
DuckDB connection with one view per archive table, so an analyst needs neither a broker nor Flink.

    from modstream import analytics
    decisions = analytics.read_decisions(since="2026-12-01", prefix=analytics.last_demo())
    con = analytics.connect(prefix="demo1a2b3c")
    con.sql("SELECT outcome, count(*) FROM decisions GROUP BY outcome").show()

Views exist for every table even before anything was archived (empty, with the right
columns), so a query written today still runs on an empty deployment. `since` prunes whole
day folders (the hive partition `date`) before it filters rows by `ts`.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.dataset as ds

from modstream.analytics import cost
from modstream.analytics.archive_schema import TABLES, Table
from modstream.core.config import Settings
from modstream.stack import deployments

Since = datetime.datetime | datetime.date | int | str | None


def root_of(
    settings: Settings | None = None, prefix: str | None = None, root: Path | None = None
) -> Path:
    """The archive folder: `root` itself, else the deployment `prefix`'s under the run dir."""
    if root is not None:
        return Path(root)
    return deployments.archive_root(settings or Settings.from_env(), prefix)


def last_demo(settings: Settings | None = None) -> str:
    """The prefix of the last `modstream demo` run (for `prefix=`)."""
    return deployments.last_demo(settings or Settings.from_env())


def table(name: str) -> Table:
    found = TABLES.get(name)
    if found is None:
        raise ValueError(f"no archive table {name!r}; the tables: {', '.join(TABLES)}")
    return found


def _files(root: Path, spec: Table) -> bool:
    folder = root / spec.name
    return folder.is_dir() and any(folder.rglob("*.parquet"))


def _quoted(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def connect(
    settings: Settings | None = None, prefix: str | None = None, root: Path | None = None
) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB connection with a view per archive table (see the module)."""
    where = root_of(settings, prefix, root)
    con = duckdb.connect()
    for spec in TABLES.values():
        con.register(f"_empty_{spec.name}", spec.read_schema.empty_table())
        source = f"_empty_{spec.name}"
        if _files(where, spec):
            types = ", ".join(
                f"{_quoted(f.name)}: {'DATE' if f.name == 'date' else 'BIGINT'}"
                for f in spec.partitions
            )
            # By name after the table's own empty schema: a column added to a model since older
            # files were written (workflow_version) reads as null there instead of missing.
            source = (
                f"(SELECT * FROM {source} UNION ALL BY NAME SELECT * FROM "
                f"read_parquet({_quoted(str(where / spec.name) + '/**/*.parquet')}, "
                f"hive_partitioning = true, hive_types = {{{types}}}, union_by_name = true))"
            )
        con.execute(f'CREATE VIEW "{spec.name}" AS SELECT * FROM {source}')
    # Derived from the tables: cost per decision by policy and workflow version (issue 29 item 5).
    con.execute(f'CREATE VIEW "cost_per_decision" AS {cost.VIEW}')
    return con


def query(
    sql: str,
    settings: Settings | None = None,
    prefix: str | None = None,
    root: Path | None = None,
) -> pa.Table | None:
    """The result of one SQL statement over the archive's views (None for a statement with no
    result); duckdb.Error when DuckDB refuses it."""
    con = connect(settings, prefix, root)
    try:
        relation = con.sql(sql)
        return None if relation is None else relation.to_arrow_table()
    finally:
        con.close()


def since_ms(since: Since) -> int | None:
    """`since` as ms since the epoch: a datetime (naive means UTC), a date (its UTC midnight),
    an ISO text of either, or ms themselves."""
    if since is None:
        return None
    if isinstance(since, bool):
        raise TypeError("since: a datetime, a date, an ISO date text or ms, not a bool")
    if isinstance(since, int):
        return since
    if isinstance(since, str):
        try:
            since = datetime.datetime.fromisoformat(since)
        except ValueError:
            raise ValueError(f"since: {since!r} is not an ISO date or datetime") from None
    if isinstance(since, datetime.datetime):
        aware = since if since.tzinfo is not None else since.replace(tzinfo=datetime.UTC)
        return int(aware.timestamp() * 1000)
    if isinstance(since, datetime.date):
        midnight = datetime.datetime.combine(since, datetime.time(), tzinfo=datetime.UTC)
        return int(midnight.timestamp() * 1000)
    raise TypeError(
        f"since: a datetime, a date, an ISO date text or ms, not {type(since).__name__}"
    )


def _filter(spec: Table, since: Since, policy_version: int | Iterable[int] | None) -> Any:
    condition = None
    start = since_ms(since)
    if start is not None:
        day = datetime.datetime.fromtimestamp(start / 1000, tz=datetime.UTC).date()
        condition = (ds.field("date") >= day) & (ds.field("ts") >= start)
    if policy_version is not None:
        if not spec.by_version:
            raise ValueError(f"table {spec.name!r} is not split by policy_version")
        versions = [policy_version] if isinstance(policy_version, int) else list(policy_version)
        chosen = ds.field("policy_version").isin(versions)
        condition = chosen if condition is None else condition & chosen
    return condition


def read_table(
    name: str,
    since: Since = None,
    policy_version: int | Iterable[int] | None = None,
    settings: Settings | None = None,
    prefix: str | None = None,
    root: Path | None = None,
) -> pa.Table:
    """Archive table `name` as an Arrow table (rows at or after `since`; of `policy_version`,
    one or several, where the table is split by it), with the partition columns."""
    spec = table(name)
    condition = _filter(spec, since, policy_version)
    where = root_of(settings, prefix, root)
    if not _files(where, spec):
        return spec.read_schema.empty_table()
    dataset = ds.dataset(
        where / spec.name,
        format="parquet",
        schema=spec.read_schema,
        partitioning=ds.partitioning(spec.partitions, flavor="hive"),
    )
    return dataset.to_table(filter=condition)


def read_decisions(
    since: Since = None,
    policy_version: int | Iterable[int] | None = None,
    settings: Settings | None = None,
    prefix: str | None = None,
    root: Path | None = None,
) -> pa.Table:
    """moderation.decisions from the archive: every revision, with `date` and `policy_version`."""
    return read_table("decisions", since, policy_version, settings, prefix, root)
