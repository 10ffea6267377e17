"""The archive's Arrow schemas come from the pydantic models by one mapping (arrow_type); every
archived model maps, and its real records fit the schema it maps to."""

from __future__ import annotations

from typing import Annotated, Any, Literal

import pyarrow as pa
import pytest
from pydantic import BaseModel, Field

from modstream.analytics.archive_schema import (
    CONTENT_FACTS,
    COORDINATES,
    TABLES,
    Unfit,
    arrow_type,
    partition_of,
    partition_path,
    row_of,
    to_arrow,
)
from modstream.contract.registry import TOPIC_MODELS
from modstream.testing import archive as archive_data


class Inner(BaseModel):
    name: str
    size: int | None


@pytest.mark.parametrize(
    ("annotation", "expected", "nullable"),
    [
        (str, pa.string(), False),
        (int, pa.int64(), False),
        (float, pa.float64(), False),
        (bool, pa.bool_(), False),
        (Annotated[int, Field(ge=1)], pa.int64(), False),
        (Literal["review", "appeal"], pa.string(), False),
        (Literal[True], pa.bool_(), False),
        (int | None, pa.int64(), True),
        (Annotated[str, Field(max_length=8)] | None, pa.string(), True),
        (list[str], pa.list_(pa.field("item", pa.string(), nullable=False)), False),
        (list[int | None], pa.list_(pa.field("item", pa.int64())), False),
        (dict[str, float], pa.map_(pa.string(), pa.float64()), False),
        (
            Inner,
            pa.struct(
                [pa.field("name", pa.string(), nullable=False), pa.field("size", pa.int64())]
            ),
            False,
        ),
    ],
)
def test_each_kind_of_annotation_maps_to_its_arrow_type(
    annotation: Any, expected: pa.DataType, nullable: bool
) -> None:
    assert arrow_type(annotation) == (expected, nullable)


@pytest.mark.parametrize("annotation", [bytes, int | str, Literal["a", 1], tuple[int, int]])
def test_an_annotation_the_archive_cannot_store_is_refused_by_name(annotation: Any) -> None:
    with pytest.raises(TypeError, match="archive: "):
        arrow_type(annotation)


@pytest.mark.parametrize("table", TABLES.values(), ids=lambda table: table.name)
def test_every_table_has_its_models_fields_less_the_hive_partitions_plus_its_coordinates(
    table: Any,
) -> None:
    fields = table.columns or tuple(table.models[0].model_fields)
    expected = [name for name in fields if name not in ("date", "policy_version")]
    assert table.file_schema.names == [*expected, *COORDINATES.names]
    assert table.read_schema.names[-len(table.partitions) :] == table.partitions.names
    assert ("policy_version" in table.read_schema.names) == (
        table.by_version or "policy_version" in fields
    )


@pytest.mark.parametrize("table", TABLES.values(), ids=lambda table: table.name)
def test_the_topics_own_validator_gives_one_of_the_tables_models(table: Any) -> None:
    value = archive_data.records()[table.topic][0]
    assert isinstance(TOPIC_MODELS[table.topic].validate_python(value), table.models)


@pytest.mark.parametrize("table", TABLES.values(), ids=lambda table: table.name)
def test_every_real_record_of_the_tables_topic_fits_its_schema(table: Any) -> None:
    rows = []
    for value in archive_data.records()[table.topic]:
        try:
            rows.append(row_of(table, value) | {"_partition": 0, "_offset": 0, "_timestamp": 1})
        except ValueError:
            # the workload's deliberately malformed uploads (one sent to detector.results)
            assert table.name in ("contents", "detector_results")
    arrow, unfit = to_arrow(table, rows)
    assert unfit == 0
    assert arrow.num_rows == len(rows) > 0
    assert arrow.schema == table.file_schema


def test_contents_keep_the_facts_never_the_text_media_or_hashes() -> None:
    table = TABLES["contents"]
    row = row_of(table, archive_data.records()["content.versions"][0])
    assert tuple(row) == CONTENT_FACTS
    assert not {"text", "media_ref", "sha256", "phash"} & set(table.read_schema.names)


def test_a_delete_has_no_upload_facts_and_fits() -> None:
    table = TABLES["contents"]
    deleted = {"event_id": "d1", "type": "delete", "content_id": "c", "content_version": 2, "ts": 5}
    row = row_of(table, deleted) | {"_partition": 0, "_offset": 3, "_timestamp": None}
    assert row["modality"] is None and row["segments"] is None
    arrow, unfit = to_arrow(table, [row])
    assert (arrow.num_rows, unfit) == (1, 0)


def test_a_row_that_does_not_fit_the_schema_is_counted_not_written() -> None:
    table = TABLES["dlq"]
    good = row_of(table, archive_data.records()["moderation.dlq"][0])
    good |= {"_partition": 0, "_offset": 0, "_timestamp": None}
    bad = good | {"attempts": "three"}
    arrow, unfit = to_arrow(table, [good, bad])
    assert (arrow.num_rows, unfit) == (1, 1)


def test_the_partition_is_the_utc_day_of_ts_and_the_policy_version_where_split() -> None:
    decision = archive_data.records()["moderation.decisions"][0]
    row = row_of(TABLES["decisions"], decision)
    assert partition_of(TABLES["decisions"], row) == ("2025-11-30", 1)
    assert partition_of(TABLES["dlq"], {"ts": 86_400_000 - 1}) == ("1970-01-01", None)
    assert partition_path(TABLES["decisions"], "2025-11-30", 1) == (
        "decisions/date=2025-11-30/policy_version=1"
    )
    assert partition_path(TABLES["appeals"], "2025-11-30", None) == "appeals/date=2025-11-30"
    with pytest.raises(Unfit, match="past any calendar day"):
        partition_of(TABLES["dlq"], {"ts": 2**62})


def test_the_access_log_is_archived_without_the_reviewers_private_note() -> None:
    table = TABLES["review_access"]
    logged = archive_data.records()["review.access"]
    decided = next(record for record in logged if record["action"] == "decide")
    assert decided["note"] and "note" not in table.file_schema.names
    row = row_of(table, decided)
    assert "note" not in row and (row["reviewer_id"], row["outcome"]) == (
        decided["reviewer_id"],
        decided["outcome"],
    )
    assert any(record["action"] == "reveal" and record["evidence_ref"] for record in logged)
