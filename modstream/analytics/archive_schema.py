"""The Parquet archive's tables: which topic fills each one, and its Arrow schema, derived from
the pydantic models in schemas/ by one mapping function (`arrow_type`), so a field added to a
model reaches the archive without a second schema to keep in step.

A row is the record as its model validated it (`model_dump`), plus its Kafka coordinates
`_partition`, `_offset` and `_timestamp` (the record's Kafka timestamp: when its producer wrote
it, which is processing time for modstream's own outputs). The hive partition columns (`date`,
the UTC day of `ts`; `policy_version` where a table is split by it) live in the folder names,
not in the files, as hive readers (DuckDB, pyarrow, pandas) expect; `read_schema` is what a
reader of the whole table sees. docs/ANALYSTS.md lists the layout.
"""

from __future__ import annotations

import datetime
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, Union

import pyarrow as pa
from pydantic import BaseModel

from modstream.contract.content import ContentDelete, ContentUpsert
from modstream.contract.detector import DetectorResult
from modstream.contract.dlq import DlqRecord
from modstream.contract.outputs import (
    Action,
    ContentVisibility,
    Decision,
    Exposure,
    ReviewTask,
    ShadowDecision,
)
from modstream.contract.registry import SchemaError, validate
from modstream.contract.review import ReviewAccess
from modstream.contract.signals import Appeal, ReviewDecision

# Every row's Kafka coordinates (not fields of any model).
COORDINATES = pa.schema(
    [
        pa.field("_partition", pa.int32(), nullable=False),
        pa.field("_offset", pa.int64(), nullable=False),
        pa.field("_timestamp", pa.int64()),
    ]
)
DATE = pa.field("date", pa.date32())
POLICY_VERSION = pa.field("policy_version", pa.int64())
# The facts of an upload: never its text, media reference or hashes.
CONTENT_FACTS = (
    "event_id", "type", "content_id", "content_version", "author_id", "modality", "surface",
    "region", "audience", "account_risk", "size_bytes", "mime_type", "segments", "ts",
)  # fmt: skip
# The review console's access log, less the reviewer's private note (for leads, in the topic and
# the console's lead view; the archive is read more widely): who saw what, when.
REVIEW_ACCESS_FACTS = (
    "event_id", "reviewer_id", "action", "ts", "task_id", "queue", "content_id",
    "content_version", "evidence_ref", "outcome", "detail",
)  # fmt: skip
DETECTOR_RESULT_FACTS = (
    "event_id", "content_id", "content_version", "detector", "model_version", "status", "ts",
    "segment_id", "scores", "inference_ms", "language", "language_confidence",
)  # fmt: skip


class Unfit(ValueError):
    """A record that validated but cannot be a row (say, a `ts` past year 9999)."""


@dataclass(frozen=True)
class Table:
    """One archive table: the folder `name`, filled from contract topic `topic`, whose records
    `models` describe (several for a union such as upsert | delete)."""

    name: str
    topic: str
    models: tuple[type[BaseModel], ...]
    by_version: bool  # hive-partitioned by policy_version as well as date
    columns: tuple[str, ...] | None = None  # a projection; None: every field

    @property
    def file_schema(self) -> pa.Schema:
        """The columns of one Parquet file: the fields less the hive partitions, then the
        Kafka coordinates."""
        fields = [f for f in model_fields(self.models, self.columns) if f.name not in _HIVE]
        return pa.schema([*fields, *COORDINATES]).with_metadata(
            {"modstream.table": self.name, "modstream.topic": self.topic}
        )

    @property
    def partitions(self) -> pa.Schema:
        """The hive partition columns, in folder order."""
        return pa.schema([DATE, POLICY_VERSION] if self.by_version else [DATE])

    @property
    def read_schema(self) -> pa.Schema:
        """What a reader of the whole table sees: the file columns, then the partitions."""
        return pa.schema([*self.file_schema, *self.partitions])


_HIVE = frozenset({"date", "policy_version"})

TABLES: dict[str, Table] = {
    table.name: table
    for table in (
        Table("decisions", "moderation.decisions", (Decision,), by_version=True),
        Table("shadow", "moderation.shadow", (ShadowDecision,), by_version=True),
        Table("actions", "moderation.actions", (Action,), by_version=True),
        Table("review_tasks", "review.tasks", (ReviewTask,), by_version=True),
        Table("review_decisions", "review.decisions", (ReviewDecision,), by_version=False),
        Table("appeals", "moderation.appeals", (Appeal,), by_version=False),
        Table("dlq", "moderation.dlq", (DlqRecord,), by_version=False),
        # content.versions, validated as ingest_check validates it (content.validated holds the
        # same records, but only where that job runs; the moderation job reads content.versions).
        Table(
            "contents",
            "content.versions",
            (ContentUpsert, ContentDelete),
            by_version=False,
            columns=CONTENT_FACTS,
        ),
        Table("visibility", "content.visibility", (ContentVisibility,), by_version=False),
        # modstream's own topic: the reconciler's exposure windows
        # (modstream/moderation/exposure.py).
        Table("exposure", "enforcement.exposure", (Exposure,), by_version=False),
        # Evidence, for score drift and cost per decision (issue 29 items 4 and 5): scores,
        # model time and the language named, never the media reference or the signature.
        Table(
            "detector_results",
            "detector.results",
            (DetectorResult,),
            by_version=False,
            columns=DETECTOR_RESULT_FACTS,
        ),
        # modstream's own topic: the review console's access log (issue 30), for "who revealed
        # what" (deploy/sql/audit/who_revealed_what.sql has the same over Kafka).
        Table(
            "review_access",
            "review.access",
            (ReviewAccess,),
            by_version=False,
            columns=REVIEW_ACCESS_FACTS,
        ),
    )
}


def arrow_type(annotation: Any) -> tuple[pa.DataType, bool]:
    """The Arrow type of a pydantic field annotation, and whether it may be null.

    str, int, float, bool, Literal, `X | None`, list[X], dict[str, X] and nested models map;
    anything else raises TypeError naming the annotation (a model change the archive must learn).
    """
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return arrow_type(typing.get_args(annotation)[0])
    if origin in (Union, types.UnionType):
        members = [arg for arg in typing.get_args(annotation) if arg is not type(None)]
        nullable = len(members) < len(typing.get_args(annotation))
        found = {arrow_type(member)[0] for member in members}
        if len(found) != 1:
            raise TypeError(f"archive: no single Arrow type for {annotation!r}")
        return found.pop(), nullable or any(arrow_type(m)[1] for m in members)
    if origin is Literal:
        found = {arrow_type(type(value))[0] for value in typing.get_args(annotation)}
        if len(found) != 1:
            raise TypeError(f"archive: mixed literal types in {annotation!r}")
        return found.pop(), False
    if origin is list:
        item, item_nullable = arrow_type(typing.get_args(annotation)[0])
        return pa.list_(pa.field("item", item, nullable=item_nullable)), False
    if origin is dict:
        key, value = (arrow_type(arg)[0] for arg in typing.get_args(annotation))
        return pa.map_(key, value), False
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return pa.struct(model_fields((annotation,))), False
    scalar = _SCALARS.get(annotation)
    if scalar is None:
        raise TypeError(f"archive: no Arrow type for {annotation!r}")
    return scalar, False


_SCALARS: dict[Any, pa.DataType] = {
    bool: pa.bool_(),
    int: pa.int64(),
    float: pa.float64(),
    str: pa.string(),
}


def model_fields(
    models: tuple[type[BaseModel], ...], columns: tuple[str, ...] | None = None
) -> list[pa.Field]:
    """The Arrow fields of `models` (a union: a field some member lacks may be null), in the
    first model's order, or `columns`' order when given."""
    names = columns or tuple(models[0].model_fields)
    fields = []
    for name in names:
        owners = [model.model_fields[name] for model in models if name in model.model_fields]
        if not owners:
            raise TypeError(f"archive: no model of {models} has the field {name!r}")
        arrow, nullable = arrow_type(owners[0].annotation)
        fields.append(pa.field(name, arrow, nullable=nullable or len(owners) < len(models)))
    return fields


def row_of(table: Table, document: Any) -> dict[str, Any]:
    """The columns of one loaded JSON record of `table`'s topic, validated by its model
    (SchemaError when it is not), projected to the table's columns."""
    record = validate(table.topic, document)
    values = record.model_dump(mode="python")
    names = table.columns or tuple(values)
    return {name: values.get(name) for name in names}


def partition_of(table: Table, row: Mapping[str, Any]) -> tuple[str, int | None]:
    """The hive partition of a row: the UTC day of its `ts`, and its policy_version where the
    table is split by version; Unfit when `ts` names no calendar day."""
    try:
        day = datetime.datetime.fromtimestamp(row["ts"] / 1000, tz=datetime.UTC).date()
    except (OverflowError, OSError, ValueError):
        raise Unfit(f"{table.name}: ts {row['ts']} is past any calendar day") from None
    return day.isoformat(), (row["policy_version"] if table.by_version else None)


def partition_path(table: Table, day: str, version: int | None) -> str:
    """The folder of a partition, relative to the archive root."""
    if table.by_version:
        return f"{table.name}/date={day}/policy_version={version}"
    return f"{table.name}/date={day}"


def to_arrow(table: Table, rows: list[dict[str, Any]]) -> tuple[pa.Table, int]:
    """Rows as an Arrow table of the file schema, and how many rows did not fit it (left out;
    a validated record should always fit, so any that does not is counted, never lost
    silently)."""
    schema = table.file_schema
    try:
        return pa.Table.from_pylist(rows, schema=schema), 0
    except (pa.ArrowException, TypeError, ValueError, OverflowError):
        pass
    fitting = []
    for row in rows:
        try:
            pa.Table.from_pylist([row], schema=schema)
        except (pa.ArrowException, TypeError, ValueError, OverflowError):
            continue
        fitting.append(row)
    return pa.Table.from_pylist(fitting, schema=schema), len(rows) - len(fitting)


def table_of_topic(contract_topic: str) -> Table | None:
    """The archive table filled from a contract topic, if any."""
    return next((t for t in TABLES.values() if t.topic == contract_topic), None)


__all__ = ["TABLES", "SchemaError", "Table", "Unfit", "arrow_type", "row_of", "to_arrow"]
