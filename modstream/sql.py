"""`modstream sql`: Flink SQL over one deployment's topics, in one batch TableEnvironment.

Why batch: every table is bounded at its topic's end offsets when the query starts
(modstream/sql_tables.py), so a query reads what is there and ends, like a query on a
database; ORDER BY and PERCENTILE work as analysts expect. Why one TableEnvironment per call:
the JVM and the MiniCluster start once (seconds), and every statement of every file runs in
them, one bounded job per query. The tables are created for the topics the deployment has;
the Kafka connector jar comes from deploy/local/jars/flink (`make setup`), as for the jobs.

For other commands and tests: `run_files(settings, prefix, files)` returns each query's
`Result` (columns and rows); `execute` yields them one by one as they complete.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from modstream import deployments, sql_tables
from modstream.config import Settings
from modstream.sql_format import Result, plain
from modstream.sql_script import Script, Statement, explain, read_script

CONNECTOR_JAR = "flink-sql-connector-kafka-"
_QUERY_KINDS = ("SUCCESS_WITH_CONTENT",)


class SqlError(Exception):
    """A statement that is wrong (exit_code 2) or could not run (exit_code 1); the message is
    one readable paragraph."""

    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.exit_code = exit_code


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

    from modstream import topics

    wanted = {where.topic(name): name for name in sql_tables.TABLE_TOPICS}
    try:
        counts = topics.partition_counts(settings.bootstrap_servers, wanted, timeout_s=15.0)
    except (KafkaError, OSError, ValueError) as error:
        raise SqlError(
            f"Kafka at {settings.bootstrap_servers} did not answer ({type(error).__name__}:"
            f" {error}); is the stack up (`modstream up`)?",
            1,
        ) from None
    return [wanted[physical] for physical in wanted if physical in counts]


def table_environment(settings: Settings, parallelism: int = 1) -> Any:
    """A batch TableEnvironment with the Kafka SQL connector, times in UTC."""
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

    conf = Configuration()
    conf.set_string("pipeline.jars", ";".join(jar.as_uri() for jar in jars))
    conf.set_string("table.local-time-zone", "UTC")
    conf.set_string("parallelism.default", str(parallelism))
    conf.set_string("pipeline.name", "modstream sql")
    environment = EnvironmentSettings.new_instance().in_batch_mode().with_configuration(conf)
    return TableEnvironment.create(environment.build())


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
    t_env = table_environment(settings, parallelism)
    for topic in present:
        _run(t_env, sql_tables.create_table(topic, where), None)
    tables = Tables(
        [sql_tables.table_name(t) for t in present],
        [where.topic(t) for t in sql_tables.TABLE_TOPICS if t not in present],
    )
    for script in scripts:
        for statement in script.statements:
            result = _statement(t_env, statement, script.title, tables)
            if result is not None:
                yield result


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
        text = "the tables: " + ", ".join(sorted(self.names))
        if self.missing_topics:
            text += "; no table for the missing topic(s) " + ", ".join(self.missing_topics)
        return text


def _statement(t_env: Any, statement: Statement, title: str, tables: Tables) -> Result | None:
    """Run one statement; its Result when it returns rows (a query, SHOW, DESCRIBE)."""
    try:
        table_result = _run(t_env, statement.text, statement)
        if table_result.get_result_kind().name not in _QUERY_KINDS:
            return None
        columns = tuple(table_result.get_resolved_schema().get_column_names())
        with table_result.collect() as rows:
            collected = tuple(tuple(plain(value) for value in _values(row)) for row in rows)
    except SqlError as error:
        if "not found" in str(error):
            raise SqlError(f"{error}\n{tables.listing()}", error.exit_code) from None
        raise
    except Exception as error:  # a Java failure while collecting: the job failed
        trace = _java_trace(error)
        if trace is None:
            raise
        failure = explain(trace, statement)
        raise SqlError(failure.message, 1) from None
    return Result(statement.source, title, columns, collected)


def _run(t_env: Any, text: str, statement: Statement | None) -> Any:
    """`execute_sql`, a Java exception made SqlError (2 for a wrong statement, else 1)."""
    try:
        return t_env.execute_sql(text)
    except Exception as error:
        trace = _java_trace(error)
        if trace is None:
            raise
        failure = explain(trace, statement)
        raise SqlError(failure.message, 2 if failure.sql else 1) from None


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
