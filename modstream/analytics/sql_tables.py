"""Flink SQL tables over the contract's topics, generated from the pydantic models in schemas/.

Why generated: the models are the contract's one definition (modstream/contract/json/ is exported
from them too), so DDL written by hand would drift from what the jobs write. deploy/sql/tables.sql
is this module's output for the contract's own topic names and the local stack's broker; a unit test
(and `modstream schemas check`) fails when it differs from a fresh generation. `modstream sql`
generates the same DDL at run time for the chosen deployment: its physical topics (`--prefix`,
`--last-demo`), bootstrap servers and Kafka client security (docs/CONFIG.md).

Every table (name: the contract's topic name, dots made underscores, `moderation_decisions`):
- one column per field of the record, in the model's order: strings, enums and ids STRING,
  integers BIGINT (the contract's longs), numbers DOUBLE, objects of known fields ROW, lists
  ARRAY, `scores` MAP<STRING, DOUBLE>; a free-form object (a policy `document`) is STRING
  holding its JSON text (JSON_VALUE reads into it);
- its Kafka coordinates `_partition`, `_offset` (as the Parquet archive has them) and
  `_timestamp`, the broker's record time (when the producer wrote it);
- `event_time`: TO_TIMESTAMP_LTZ(ts, 3), the record's event time (the Kafka record time for a
  record without `ts`), with a watermark 5 seconds behind it for streaming queries;
- the Kafka connector reading with `isolation.level = read_committed` (outputs are written in
  transactions: an aborted or open transaction is never counted) from the earliest offset, and
  with `scan.bounded.mode = latest-offset` (what `modstream sql` runs: batch queries that end
  at the offsets the topics had when the query started; drop it for a streaming table).
JSON choices: a missing field is NULL (`json.fail-on-missing-field = false`: optional fields
are absent from the records). Input topics carry what producers sent, including records the
jobs refused to the DLQ, so their tables skip text that is not JSON and give NULL for a field of
the wrong type (`json.ignore-parse-errors = true`): filter on required fields, or read
`content_validated`, what the ingest check let through. Output topics are written by modstream
only, through the same models, so a record there that does not parse is a bug and fails the
query (`json.ignore-parse-errors = false`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from modstream.contract.registry import INPUT_TOPICS, OUTPUT_TOPICS, OWN_TOPICS
from modstream.core.config import PROJECT_ROOT

TABLES_FILE = PROJECT_ROOT / "deploy" / "sql" / "tables.sql"
QUERIES_DIR = PROJECT_ROOT / "deploy" / "sql" / "queries"
LOCAL_BOOTSTRAP = "127.0.0.1:9092"
WATERMARK_DELAY = "INTERVAL '5' SECOND"

# content.validated (modstream's own topic) holds content.versions records that passed the
# ingest check; the demo's moderation job reads content.versions itself.
SCHEMA_OF: dict[str, str] = {"content.validated": "content.versions"}
# modstream's own topics with a table: the review console's access log (issue 30).
OWN_TABLE_TOPICS = ("review.access",)
TABLE_TOPICS: tuple[str, ...] = (*INPUT_TOPICS, *OUTPUT_TOPICS, *SCHEMA_OF, *OWN_TABLE_TOPICS)

# Columns every table gets after the record's own fields: (name, type and definition).
KAFKA_COLUMNS: tuple[tuple[str, str], ...] = (
    ("_partition", "INT METADATA FROM 'partition' VIRTUAL"),
    ("_offset", "BIGINT METADATA FROM 'offset' VIRTUAL"),
    ("_timestamp", "TIMESTAMP_LTZ(3) METADATA FROM 'timestamp' VIRTUAL"),
    ("event_time", "AS COALESCE(TO_TIMESTAMP_LTZ(`ts`, 3), `_timestamp`)"),
)
_SCALARS = {"string": "STRING", "integer": "BIGINT", "number": "DOUBLE", "boolean": "BOOLEAN"}


class SqlSchemaError(ValueError):
    """A model field that no Flink SQL type describes, or one that clashes with our columns."""


@dataclass(frozen=True)
class Column:
    name: str
    sql_type: str


@dataclass(frozen=True)
class Connection:
    """Where one deployment's tables read: the defaults are the committed file's (the contract's
    topic names on the local stack's broker)."""

    bootstrap_servers: str = LOCAL_BOOTSTRAP
    topics: Mapping[str, str] = field(default_factory=dict)  # contract name -> physical topic
    # Kafka client properties (security: Settings.kafka.java_properties()), as Kafka names them.
    properties: Mapping[str, str] = field(default_factory=dict)
    bounded: bool = True

    def topic(self, name: str) -> str:
        return self.topics.get(name, name)


def table_name(topic: str) -> str:
    """`moderation.decisions` -> `moderation_decisions`."""
    return topic.replace(".", "_")


def columns(topic: str) -> list[Column]:
    """The record's fields of `topic` as Flink SQL columns, in the model's order."""
    schema_topic = SCHEMA_OF.get(topic, topic)
    if schema_topic in INPUT_TOPICS:
        schema = INPUT_TOPICS[schema_topic].json_schema(mode="validation")
    elif schema_topic in OUTPUT_TOPICS:
        schema = OUTPUT_TOPICS[schema_topic].json_schema(mode="serialization")
    elif schema_topic in OWN_TABLE_TOPICS:
        schema = OWN_TOPICS[schema_topic].json_schema(mode="serialization")
    else:
        raise SqlSchemaError(f"no schema for topic {topic!r}")
    definitions = schema.get("$defs", {})
    fields = _properties(schema, definitions)
    if not fields:
        raise SqlSchemaError(f"{topic}: the record is not an object of known fields")
    found = [Column(name, _sql_type(sub, definitions, f"{topic}.{name}")) for name, sub in fields]
    clash = {column.name for column in found} & {name for name, _ in KAFKA_COLUMNS}
    if clash:
        raise SqlSchemaError(f"{topic}: field(s) {sorted(clash)} clash with the Kafka columns")
    return found


def _resolve(schema: dict[str, Any], definitions: dict[str, Any]) -> dict[str, Any]:
    ref = schema.get("$ref")
    if ref is None:
        return schema
    resolved: dict[str, Any] = definitions[ref.rsplit("/", 1)[-1]]
    return resolved


def _alternatives(schema: dict[str, Any], definitions: dict[str, Any]) -> list[dict[str, Any]]:
    """The non-null shapes a value may take (a union's members, or the schema itself)."""
    schema = _resolve(schema, definitions)
    members = schema.get("anyOf") or schema.get("oneOf")
    if members is None:
        return [] if schema.get("type") == "null" else [schema]
    return [shape for member in members for shape in _alternatives(member, definitions)]


def _properties(
    schema: dict[str, Any], definitions: dict[str, Any]
) -> list[tuple[str, dict[str, Any]]] | None:
    """The fields of an object schema (of every member of a union of objects, the first
    member's order first), or None when it is not an object of known fields."""
    shapes = _alternatives(schema, definitions)
    if not shapes or not all("properties" in shape for shape in shapes):
        return None
    merged: dict[str, dict[str, Any]] = {}
    for shape in shapes:
        for name, sub in shape["properties"].items():
            merged.setdefault(name, {"anyOf": []})["anyOf"].append(sub)
    return list(merged.items())


def _sql_type(schema: dict[str, Any], definitions: dict[str, Any], where: str) -> str:
    """The Flink SQL type of one JSON Schema value (see the module docstring)."""
    shapes = _alternatives(schema, definitions)
    fields = _properties(schema, definitions)
    if fields:
        inner = ", ".join(
            f"{quoted(name)} {_sql_type(sub, definitions, f'{where}.{name}')}"
            for name, sub in fields
        )
        return f"ROW<{inner}>"
    kinds = {shape.get("type") for shape in shapes}
    if len(kinds) != 1:
        raise SqlSchemaError(f"{where}: a union of {sorted(map(str, kinds))} has no SQL type")
    kind = kinds.pop()
    if kind in _SCALARS:
        return _SCALARS[str(kind)]
    if kind == "array":
        items = [shape.get("items", {}) for shape in shapes]
        return f"ARRAY<{_sql_type({'anyOf': items}, definitions, where + '[]')}>"
    if kind == "object":
        values = [shape.get("additionalProperties", True) for shape in shapes]
        if all(isinstance(value, dict) for value in values):
            inner = _sql_type({"anyOf": values}, definitions, where + "{}")
            return f"MAP<STRING, {inner}>"
        return "STRING"  # free-form: its JSON text
    raise SqlSchemaError(f"{where}: JSON type {kind!r} has no SQL type")


def quoted(identifier: str) -> str:
    """`identifier` as a Flink SQL identifier (backticks: `type`, `key`, `state` are keywords)."""
    return "`" + identifier.replace("`", "``") + "`"


def _literal(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def options(topic: str, connection: Connection) -> dict[str, str]:
    """The connector's WITH options for one table (module docstring: why each)."""
    chosen = {
        "connector": "kafka",
        "topic": connection.topic(topic),
        "properties.bootstrap.servers": connection.bootstrap_servers,
        "properties.isolation.level": "read_committed",
        "scan.startup.mode": "earliest-offset",
    }
    if connection.bounded:
        chosen["scan.bounded.mode"] = "latest-offset"
    for key, value in connection.properties.items():
        chosen[f"properties.{key}"] = value
    lenient = SCHEMA_OF.get(topic, topic) in INPUT_TOPICS
    chosen |= {
        "format": "json",
        "json.fail-on-missing-field": "false",
        "json.ignore-parse-errors": "true" if lenient else "false",
    }
    return chosen


def create_table(topic: str, connection: Connection) -> str:
    """The CREATE TABLE statement (without its `;`) of one topic's table."""
    lines = [f"  {quoted(column.name)} {column.sql_type}," for column in columns(topic)]
    lines += [f"  {quoted(name)} {definition}," for name, definition in KAFKA_COLUMNS]
    lines.append(f"  WATERMARK FOR `event_time` AS `event_time` - {WATERMARK_DELAY}")
    settings = ",\n".join(
        f"  {_literal(key)} = {_literal(value)}"
        for key, value in options(topic, connection).items()
    )
    return (
        f"CREATE TABLE {quoted(table_name(topic))} (\n"
        + "\n".join(lines)
        + (f"\n) WITH (\n{settings}\n)")
    )


def statements(connection: Connection, topics: tuple[str, ...] = TABLE_TOPICS) -> list[str]:
    """One CREATE TABLE per topic, for `connection`'s deployment."""
    return [create_table(topic, connection) for topic in topics]


_HEADER = """\
-- Flink SQL tables over modstream's topics: GENERATED from schemas/ by
modstream/analytics/sql_tables.py. -- Do not edit: run `modstream schemas export` (a test checks
this file is fresh). -- Written for the contract's topic names on the local stack's broker;
`modstream sql` creates -- the same tables for the chosen deployment (--prefix / --last-demo: its
topics, bootstrap -- servers and Kafka client security). Column and option choices:
modstream/analytics/sql_tables.py. -- Bounded (scan.bounded.mode = latest-offset) for batch queries:
remove that option for a -- streaming table in the Flink SQL client.
"""


def render() -> str:
    """The text of deploy/sql/tables.sql."""
    blocks = [
        f"-- {topic}\n{statement};\n"
        for topic, statement in zip(TABLE_TOPICS, statements(Connection()), strict=True)
    ]
    return _HEADER + "\n" + "\n".join(blocks)


def export(path: Path = TABLES_FILE) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render(), encoding="utf-8")
    return path


def stale(path: Path = TABLES_FILE) -> list[str]:
    """Why `path` is not a fresh generation (empty: it is)."""
    if not path.exists():
        return [f"{path.name}: missing"]
    if path.read_text(encoding="utf-8") != render():
        return [f"{path.name}: differs from the models"]
    return []
