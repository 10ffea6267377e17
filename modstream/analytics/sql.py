"""`modstream sql`: Flink SQL over one deployment's topics, in one batch TableEnvironment.

Why batch: every table is bounded at its topic's end offsets when the query starts
(modstream/analytics/sql_tables.py), so a query reads what is there and ends, like a query on a
database; ORDER BY and PERCENTILE work as analysts expect. Why one TableEnvironment per call:
the JVM and the MiniCluster start once (seconds), and every statement of every file runs in
them, one bounded job per query. The tables are created for the topics the deployment has;
the Kafka connector jar comes from deploy/local/jars/flink (`make setup`), as for the jobs.

For other commands and tests: `run_files(settings, prefix, files)` returns each query's
`Result` (columns and rows); `execute` yields them one by one as they complete.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import re
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from modstream.analytics import sql_tables
from modstream.analytics.sql_format import Result, plain
from modstream.analytics.sql_script import Script, Statement, explain, read_script
from modstream.core.config import Settings
from modstream.stack import deployments

CONNECTOR_JAR = "flink-sql-connector-kafka-"
AHEAD = 4  # queries running at once (`_pipelined`)
# The MiniCluster's memory for batch operators (sort, hash join, aggregation), shared by the
# slots of the queries running at once.
MANAGED_MEMORY = "512m"
# A statement that is a query (some of its columns come back as JSON text, `_execute_one`).
_QUERY = re.compile(r"^\(*\s*(SELECT|WITH|VALUES)\b", re.IGNORECASE)


class SqlError(Exception):
    """A statement that is wrong (exit_code 2) or could not run (exit_code 1); the message is
    one readable paragraph."""

    def __init__(self, message: str, exit_code: int, missing_table: str | None = None) -> None:
        super().__init__(message)
        self.exit_code = exit_code
        self.missing_table = missing_table


def connection(settings: Settings, prefix: str | None) -> sql_tables.Connection:
    """Where `prefix`'s deployment is: its topics, the broker, the clients' security."""
    return sql_tables.Connection(
        bootstrap_servers=settings.bootstrap_servers,
        topics=deployments.topic_names(prefix),
        properties=settings.kafka.java_properties(),
    )


def present_topics(settings: Settings, where: sql_tables.Connection) -> list[str]:
    """The contract topics (of sql_tables.TABLE_TOPICS) that exist in the deployment; SqlError
    when the broker does not answer (Flink's source would wait a minute to say so)."""
    from kafka.errors import KafkaError

    from modstream.core import topics

    wanted = {where.topic(name): name for name in sql_tables.TABLE_TOPICS}
    quiet = logging.getLogger("kafka")  # its retries would log a line each; the error says it
    level = quiet.level
    quiet.setLevel(logging.CRITICAL)
    try:
        counts = topics.partition_counts(settings.bootstrap_servers, wanted, timeout_s=10.0)
    except (KafkaError, OSError, ValueError) as error:
        raise SqlError(
            f"Kafka at {settings.bootstrap_servers} did not answer ({error}); is the stack up"
            " (`modstream up`)?",
            1,
        ) from None
    finally:
        quiet.setLevel(level)
    return [wanted[physical] for physical in wanted if physical in counts]


def table_environment(settings: Settings, parallelism: int = 1) -> tuple[Any, Any]:
    """A batch TableEnvironment with the Kafka SQL connector, times in UTC, and the MiniCluster
    its queries run on (close it when done). One MiniCluster for every query: a local
    TableEnvironment would start one per query, seconds each."""
    jars = [jar for jar in settings.flink_jars if jar.name.startswith(CONNECTOR_JAR)]
    if not jars:
        raise SqlError(
            f"the Kafka SQL connector ({CONNECTOR_JAR}*.jar) is missing from "
            f"{settings.jars_dir / 'flink'}; run `make setup`",
            1,
        )
    log_dir = settings.run_dir / "flink" / "logs"
    log_dir.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("FLINK_LOG_DIR", str(log_dir))
    os.environ.setdefault("FLINK_IDENT_STRING", f"sql-{os.getpid()}")
    from pyflink.common import Configuration
    from pyflink.table import EnvironmentSettings, TableEnvironment

    # The gateway JVM lives for one call: C1 alone compiles enough and costs a third less CPU
    # (all ready queries on a demo's topics: 45 s of CPU against 70). Only for the gateway this
    # starts: the variable is gone again before any job process inherits it.
    own_args = "JVM_ARGS" not in os.environ
    if own_args:
        os.environ["JVM_ARGS"] = "-XX:TieredStopAtLevel=1"
    try:
        cluster, host, port = _mini_cluster(AHEAD * parallelism)
    finally:
        if own_args:
            os.environ.pop("JVM_ARGS", None)
    conf = Configuration()
    conf.set_string("pipeline.jars", ";".join(jar.as_uri() for jar in jars))
    conf.set_string("table.local-time-zone", "UTC")
    conf.set_string("parallelism.default", str(parallelism))
    conf.set_string("execution.target", "remote")
    conf.set_string("rest.address", host)
    conf.set_string("rest.port", str(port))
    environment = EnvironmentSettings.new_instance().in_batch_mode().with_configuration(conf)
    return TableEnvironment.create(environment.build()), cluster


def _mini_cluster(slots: int) -> tuple[Any, str, int]:
    """A Flink MiniCluster in the gateway JVM, its REST endpoint on a free local port."""
    from pyflink.java_gateway import get_gateway

    jvm = get_gateway().jvm
    conf = jvm.org.apache.flink.configuration.Configuration()
    conf.setString("rest.bind-address", "127.0.0.1")
    conf.setString("rest.address", "127.0.0.1")
    # The Kafka clients' threads log while their job's class loader closes; Flink's check for
    # that would print a Java stack trace on stderr for every query.
    conf.setString("classloader.check-leaked-classloader", "false")
    conf.setString("taskmanager.memory.managed.size", MANAGED_MEMORY)
    minicluster = jvm.org.apache.flink.runtime.minicluster
    built = (
        minicluster.MiniClusterConfiguration.Builder()
        .withRandomPorts()
        .setConfiguration(conf)
        .setNumTaskManagers(1)
        .setNumSlotsPerTaskManager(slots)
        .build()
    )
    cluster = minicluster.MiniCluster(built)
    cluster.start()
    address = cluster.getRestAddress().get()
    return cluster, str(address.getHost()), int(address.getPort())


def execute(
    settings: Settings,
    prefix: str | None,
    scripts: Sequence[Script],
    *,
    parallelism: int = 1,
) -> Iterator[Result]:
    """Every statement of `scripts` in order over `prefix`'s tables; yields each query's
    result as it completes. SqlError on the first statement that fails."""
    where = connection(settings, prefix)
    present = present_topics(settings, where)
    t_env, cluster = table_environment(settings, parallelism)
    try:
        for topic in present:
            ddl = sql_tables.create_table(topic, where)
            _run(functools.partial(t_env.execute_sql, ddl), None)
        tables = Tables(
            [sql_tables.table_name(t) for t in present],
            [where.topic(t) for t in sql_tables.TABLE_TOPICS if t not in present],
        )
        yield from _pipelined(t_env, scripts, tables)
    finally:
        cluster.close()


def _pipelined(t_env: Any, scripts: Sequence[Script], tables: Tables) -> Iterator[Result]:
    """Each statement submitted in order, its rows collected in order, up to AHEAD queries
    running at once: planning is the client's serial part, and the jobs of the queries already
    planned run meanwhile (all ready queries on a demo's topics: 36 s instead of 50)."""
    pending: deque[Pending] = deque()
    for script in scripts:
        for statement in script.statements:
            try:
                submitted = _submit(t_env, statement, script.title, tables)
            except SqlError:
                while pending:  # what ran before the wrong statement is still shown
                    yield _collect(pending.popleft())
                raise
            if submitted is not None:
                pending.append(submitted)
            if len(pending) >= AHEAD:
                yield _collect(pending.popleft())
    while pending:
        yield _collect(pending.popleft())


def run_files(
    settings: Settings, prefix: str | None, files: Iterable[Path], *, parallelism: int = 1
) -> list[Result]:
    """Each file's queries over `prefix`'s topics (None: the contract's names), in one JVM."""
    scripts = [read_script(Path(path)) for path in files]
    return list(execute(settings, prefix, scripts, parallelism=parallelism))


class Tables:
    """The tables this call created, and the topics the deployment lacks (for error messages)."""

    def __init__(self, names: list[str], missing_topics: list[str]) -> None:
        self.names = names
        self.missing_topics = missing_topics

    def listing(self) -> str:
        if not self.names:
            return (
                "no tables: none of this deployment's topics exists on the broker (looked for "
                f"{self.missing_topics[0]}, …); check --prefix / --last-demo"
            )
        text = "the tables: " + ", ".join(sorted(self.names))
        if self.missing_topics:
            text += "; no table for the missing topic(s) " + ", ".join(self.missing_topics)
        return text


@dataclass(frozen=True)
class Pending:
    """A statement whose rows are on their way (its job may still run)."""

    statement: Statement
    title: str
    table_result: Any
    encoded: frozenset[int]  # the columns that come as JSON text


def _submit(t_env: Any, statement: Statement, title: str, tables: Tables) -> Pending | None:
    """Plan and start one statement; a Pending when it returns rows (a query, SHOW,
    DESCRIBE), None when it does not (CREATE VIEW, …)."""
    from pyflink.table import ResultKind

    try:
        table_result, encoded = _run(lambda: _execute_one(t_env, statement.text), statement)
    except SqlError as error:
        if error.missing_table:
            raise SqlError(f"{error}\n{tables.listing()}", error.exit_code) from None
        raise
    if table_result.get_result_kind() != ResultKind.SUCCESS_WITH_CONTENT:
        return None
    return Pending(statement, title, table_result, encoded)


def _collect(pending: Pending) -> Result:
    """The rows of a submitted statement; SqlError (exit 1) when its job failed."""
    statement = pending.statement
    try:
        columns = tuple(pending.table_result.get_resolved_schema().get_column_names())
        with pending.table_result.collect() as rows:
            collected = tuple(_decoded(_values(row), pending.encoded) for row in rows)
    except Exception as error:  # a Java failure while collecting: the job failed
        trace = _java_trace(error)
        if trace is None:
            raise
        raise SqlError(explain(trace, statement).message, 1) from None
    return Result(statement.source, pending.title, columns, collected)


def _execute_one(t_env: Any, text: str) -> tuple[Any, frozenset[int]]:
    """`execute_sql`, and for a query the positions of the columns it returns as JSON text:
    rows, arrays, maps and timestamps are serialized in Flink (JSON_STRING), because PyFlink
    2.2.1 cannot hand TIMESTAMP_LTZ values or a row with a null field to Python, and so that
    timestamps read the same in every format (ISO 8601, `Z` for an instant)."""
    if not _QUERY.match(text):
        return t_env.execute_sql(text), frozenset()
    from pyflink.table import types
    from pyflink.table.expressions import call_sql, col

    structured = (
        types.RowType,
        types.ArrayType,
        types.MapType,
        types.MultisetType,
        types.LocalZonedTimestampType,
        types.TimestampType,
    )
    table = t_env.sql_query(text)
    schema = table.get_resolved_schema()
    kinds = schema.get_column_data_types()
    encoded = frozenset(i for i, kind in enumerate(kinds) if isinstance(kind, structured))
    if encoded:
        names = schema.get_column_names()
        table = table.select(
            *[
                call_sql(f"JSON_STRING({sql_tables.quoted(name)})").alias(name)
                if i in encoded
                else col(name)
                for i, name in enumerate(names)
            ]
        )
    return table.execute(), encoded


def _decoded(values: list[Any], encoded: frozenset[int]) -> tuple[Any, ...]:
    return tuple(
        json.loads(value) if i in encoded and isinstance(value, str) else plain(value)
        for i, value in enumerate(values)
    )


def _run(call: Callable[[], Any], statement: Statement | None) -> Any:
    """`call()`, a Java exception made SqlError (2 for a wrong statement, else 1)."""
    try:
        return call()
    except Exception as error:
        trace = _java_trace(error)
        if trace is None:
            raise
        failure = explain(trace, statement)
        raise SqlError(failure.message, 2 if failure.sql else 1, failure.missing_table) from None


def _java_trace(error: BaseException) -> str | None:
    """The Java stack trace text behind a PyFlink or py4j error, or None for a Python one."""
    from py4j.protocol import Py4JJavaError
    from pyflink.util.exceptions import JavaException

    if isinstance(error, JavaException):
        return str(error.stack_trace)
    if isinstance(error, Py4JJavaError):
        from pyflink.java_gateway import get_gateway

        utils = get_gateway().jvm.org.apache.flink.util.ExceptionUtils
        return str(utils.stringifyException(error.java_exception))
    return None


def _values(row: Any) -> list[Any]:
    """A Flink Row's field values in column order."""
    return list(row._values) if hasattr(row, "_values") else list(row)
