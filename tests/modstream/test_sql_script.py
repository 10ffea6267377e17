"""Statements split from SQL files, and Flink's errors made readable
(modstream/analytics/sql_script.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from modstream.analytics.sql_script import Statement, explain, header, read_script, split

QUERY_FILE = """\
-- Block rate per hour: what share is blocked.
-- Surface from the upload.

SELECT 'a;b' AS text, `odd;name`, "x;y" -- a comment; with a semicolon
FROM t /* block; comment */ WHERE x = 'it''s; fine';
  -- only a comment;
SELECT 2
"""


def test_split_respects_quotes_and_comments() -> None:
    statements = split(QUERY_FILE, "q.sql")
    assert [s.line for s in statements] == [4, 7]
    assert statements[0].text.startswith("SELECT 'a;b' AS text")  # the header comment is not
    assert statements[0].text.endswith("WHERE x = 'it''s; fine'")
    assert statements[1] == Statement("SELECT 2", "q.sql", 7, 1)


def test_a_statement_after_code_on_the_same_line_keeps_its_column() -> None:
    assert split("SELECT 1;  /* x */ SELECT 2", "q") == [
        Statement("SELECT 1", "q", 1, 1),
        Statement("SELECT 2", "q", 1, 20),
    ]


def test_split_of_comments_only_is_empty() -> None:
    assert split("-- nothing here;\n/* nor; here */ ;\n", "q.sql") == []


def test_header_is_the_leading_comment() -> None:
    assert (
        header(QUERY_FILE) == "Block rate per hour: what share is blocked. Surface from the upload."
    )
    assert header("\n\n-- one\nSELECT 1") == "one"
    assert header("SELECT 1 -- late") == ""


def test_read_script(tmp_path: Path) -> None:
    path = tmp_path / "rate.sql"
    path.write_text(QUERY_FILE)
    script = read_script(path)
    assert script.source == str(path)
    assert script.title.startswith("Block rate per hour")
    assert len(script.statements) == 2


VALIDATION = """\
org.apache.flink.table.api.ValidationException: SQL validation failed. From line 2, column 6 \
to line 2, column 9: Object 'nope' not found
\tat org.apache.flink.table.planner.calcite.FlinkPlannerImpl.validate(FlinkPlannerImpl.scala:200)
\tat java.base/java.lang.Thread.run(Thread.java:840)
Caused by: org.apache.calcite.runtime.CalciteContextException: From line 2, column 6 to line 2, \
column 9: Object 'nope' not found
\tat java.base/jdk.internal.reflect.NativeConstructorAccessorImpl.newInstance0(Native Method)
\t... 12 more
Caused by: org.apache.calcite.sql.validate.SqlValidatorException: Object 'nope' not found
\t... 30 more
"""

PARSE = """\
org.apache.flink.table.api.SqlParserException: SQL parse failed. Encountered "FROM" at line 1, \
column 8.
Was expecting one of:
    "ABS" ...
    "ALL" ...
    "ARRAY" ...

\tat org.apache.flink.table.planner.parse.CalciteParser.parseSqlList(CalciteParser.java:81)
Caused by: org.apache.flink.sql.parser.impl.ParseException: Encountered "FROM" at line 1, column 8.
\tat org.apache.flink.sql.parser.impl.FlinkSqlParserImpl.generateParseException(X.java:1)
"""

RUNTIME = """\
java.lang.RuntimeException: Failed to fetch next result
\tat org.apache.flink.streaming.api.operators.collect.CollectResultIterator.next(C.java:1)
Caused by: org.apache.flink.runtime.client.JobExecutionException: Job execution failed.
\tat org.apache.flink.runtime.jobmaster.JobResult.toJobExecutionResult(JobResult.java:1)
Caused by: org.apache.flink.kafka.shaded.org.apache.kafka.common.errors.TimeoutException: \
Timed out waiting for a node assignment. Call: describeTopics
"""


def test_a_validation_error_names_the_file_position_without_java() -> None:
    statement = Statement("SELECT *\nFROM nope", "q.sql", 10, 3)
    failure = explain(VALIDATION, statement)
    assert failure.sql
    assert failure.message == "q.sql:11:6: Object 'nope' not found"
    assert failure.missing_table == "nope"


def test_a_parse_error_is_one_short_message() -> None:
    failure = explain(PARSE, Statement("SELECT FROM t", "query", 1, 1))
    assert failure.sql
    assert failure.message == (
        'query:1:8: Encountered "FROM". Expected one of: "ABS", "ALL", "ARRAY"'
    )
    assert "\tat " not in failure.message and "Exception" not in failure.message


def test_a_runtime_failure_gives_the_top_and_root_messages() -> None:
    failure = explain(RUNTIME, Statement("SELECT 1", "a.sql", 4, 1))
    assert not failure.sql
    assert failure.message == (
        "a.sql:4: Failed to fetch next result (cause: Timed out waiting for a node assignment."
        " Call: describeTopics)"
    )


@pytest.mark.parametrize("trace", ["", "no exception here"])
def test_unrecognised_text_is_passed_on(trace: str) -> None:
    failure = explain(trace)
    assert not failure.sql
    assert failure.message == (trace or "unknown error")
