"""The moderation job's steps that run in Java (deploy/flink-ext, io.modstream.flink), wired
from Python: event time from admitted records (ValidatedTime), the routing filters and
projections, the per-version input order (EventTimeOrder) for the PyFlink engine, and the
batched engine's keyed operators (BatchedVersions: the per-version step and the sanctions).
jobs/moderation.py builds the job from these and the Python operators.
"""

from __future__ import annotations

import sys
from typing import Any

import cloudpickle
from pyflink.datastream import DataStream, KeyedStream
from pyflink.java_gateway import get_gateway

from jobs import runtime
from jobs.moderation_config import ORDERED_BATCH, ModerationConfig


def projected(stream: DataStream, fields: tuple[int, ...]) -> DataStream:
    """Row(...) -> Row(row[f] for f in fields), in Java (Project.java): here decoded DLQ rows
    back to the sink's Row(topic, key, value)."""
    gateway = get_gateway()
    indexes = gateway.new_array(gateway.jvm.int, len(fields))
    for position, index in enumerate(fields):
        indexes[position] = index
    j_rows = stream._j_data_stream.map(
        gateway.jvm.io.modstream.flink.Project(indexes), runtime.SINK_ROW.get_java_type_info()
    )
    return DataStream(j_rows.name("dlq rows"))


def in_event_time_order(stream: DataStream) -> KeyedStream:
    """Decoded rows keyed by version, held in Java until the watermark passes them and handed
    on in order, one batch per version and watermark (EventTimeOrder.java), keyed for the
    Python operator that follows without a second shuffle."""
    gateway = get_gateway()
    flink = gateway.jvm.io.modstream.flink
    j_batches = (
        stream._j_data_stream.keyBy(flink.FieldKey.selector(1), flink.FieldKey.keyType())
        .process(flink.EventTimeOrder(), flink.EventTimeOrder.outputType())
        .name("event-time order")
        .uid("moderation_event_time_order")
    )
    utils = gateway.jvm.org.apache.flink.streaming.api.datastream.DataStreamUtils
    j_keyed = utils.reinterpretAsKeyedStream(
        j_batches, gateway.jvm.KeyByKeySelector(), flink.FieldKey.keyType()
    )
    return KeyedStream(j_keyed, ORDERED_BATCH, DataStream(j_batches))


def batched_versions(
    keyed: DataStream, broadcast: DataStream, config: ModerationConfig
) -> DataStream:
    """Decoded rows keyed by version through BatchedVersions.java: input order, the version's
    stored value and its timers in Java, the per-version code in Python once per watermark for
    every version it made ready (jobs/moderation_batch.py); policy and hash-bank rows from
    `broadcast`. Out: sink rows Row(topic, key, value)."""
    flink = get_gateway().jvm.io.modstream.flink
    j_keyed = keyed._j_data_stream.keyBy(flink.FieldKey.selector(1), flink.FieldKey.keyType())
    j_rows = flink.BatchedVersions.apply(
        j_keyed,
        broadcast._j_data_stream,
        cloudpickle.dumps(config),
        sys.executable,
        "moderation_moderate_batched",
        config.batch_interval_ms,
    )
    return DataStream(j_rows)


def batched_sanctions(entries: DataStream, config: ModerationConfig) -> DataStream:
    """The version operator's `_sanctions` rows keyed by author through BatchedVersions.java
    (jobs/sanctions_batch.py), held in Java until the watermark passes `at`, the time they
    were emitted (KeyedAt.java); no broadcast input. Out: sink rows Row(topic, key, value)."""
    flink = get_gateway().jvm.io.modstream.flink
    j_entries = entries._j_data_stream.map(flink.KeyedAt("at"), flink.KeyedAt.outputType()).name(
        "sanctions input"
    )
    j_keyed = j_entries.keyBy(flink.FieldKey.selector(1), flink.FieldKey.keyType())
    return batched_by_key(
        j_keyed,
        config,
        "moderation_sanctions_batched",
        "sanctions (batched)",
        "jobs.sanctions_batch:BatchedSanctions",
        flink.BatchedVersions.outputType(),
    )


def batched_by_key(
    j_keyed: Any, config: ModerationConfig, uid: str, name: str, handler: str, output_type: Any
) -> DataStream:
    """A Java keyed stream through BatchedVersions.java with no broadcast input: the Python
    `handler` ("module:Class", jobs/keyed_batch.py) called once per flush for every key made
    ready since the last; `output_type` its rows' Java type."""
    flink = get_gateway().jvm.io.modstream.flink
    module, handler_class = handler.split(":")
    j_rows = flink.BatchedVersions.apply(
        j_keyed,
        None,
        cloudpickle.dumps(config),
        sys.executable,
        uid,
        config.batch_interval_ms,
        name,
        module,
        handler_class,
        output_type,
    )
    return DataStream(j_rows)


def unbatched(stream: DataStream) -> DataStream:
    """Row(topics, keys, values) batches as one Row(topic, key, value) each (Unbatch.java)."""
    flink = get_gateway().jvm.io.modstream.flink
    j_rows = stream._j_data_stream.flatMap(flink.Unbatch(), runtime.SINK_ROW.get_java_type_info())
    return DataStream(j_rows.name("unbatch"))


def by_topic(
    stream: DataStream, topic: str, *, keep: bool, config: ModerationConfig | None = None
) -> DataStream:
    """The rows of `stream` whose first field is (keep) or is not `topic`, filtered in Java;
    before key_by at the configured pre-key parallelism."""
    jvm = get_gateway().jvm
    filtered = stream._j_data_stream.filter(jvm.io.modstream.flink.TopicFilter(topic, keep))
    if config is not None and config.pre_key_parallelism:
        filtered.setParallelism(config.pre_key_parallelism)
    return DataStream(filtered)


def _java_strings(values: tuple[str, ...]) -> Any:
    gateway = get_gateway()
    array = gateway.new_array(gateway.jvm.String, len(values))
    for index, value in enumerate(values):
        array[index] = value
    return array


def validated_time(decoded: DataStream, config: ModerationConfig) -> DataStream:
    """Timestamps and watermarks from admitted records only, per lane (ValidatedTime.java)."""
    gateway = get_gateway()
    jvm = gateway.jvm
    lanes = _java_strings(config.expected_lanes)
    strategy = jvm.io.modstream.flink.ValidatedTime(
        config.out_of_orderness_ms,
        config.idleness_ms,
        config.backfill_idleness_ms,
        config.live_window_ms,
        config.wall_clock,
        lanes,
        config.drained_after_ms,
        *config.end_offsets,
        _java_strings(config.end_offsets_properties),
    )
    # Flink's timestamps-and-watermarks operator, with the generator's lanes and last watermark
    # kept in operator state (ValidatedTimeOperator.java): a restore resumes event time.
    timed = decoded._j_data_stream.transform(
        "validated event time",
        decoded._j_data_stream.getType(),
        jvm.io.modstream.flink.ValidatedTimeOperator.Factory(strategy),
    )
    timed.uid("moderation_validated_time")
    if config.pre_key_parallelism:
        timed.setParallelism(config.pre_key_parallelism)
    return DataStream(timed)
