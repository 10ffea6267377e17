"""The moderation job's steps that run in Java (deploy/flink-ext, io.modstream.flink), wired
from Python: event time from admitted records (ValidatedTime), the routing filters and
projections, the per-version input order (EventTimeOrder) for the PyFlink engine, and the
batched engine's keyed operators (BatchedVersions: the per-version step and the sanctions).
modstream/jobs/moderation/job.py builds the job from these and the Python operators.

The batched engine's keyed operators run under the uids of the PyFlink operators they replace
and read those operators' state where theirs has none, so a savepoint of the PyFlink engine
restores into the batched one (docs/OPERATIONS.md, "Changing the engine").
"""

from __future__ import annotations

from typing import Any

import cloudpickle
from pyflink.datastream import DataStream, KeyedStream
from pyflink.java_gateway import get_gateway

from modstream.jobs import runtime
from modstream.jobs.moderation.config import DECODED_ROW, ORDERED_BATCH, ModerationConfig

# The PyFlink engine's keyed operators' uids, which the batched engine's take over, and the
# state of theirs each reads where its own has none ("name:pickled" for Types.PICKLED_BYTE_ARRAY,
# "name:string" for Types.STRING(): modstream/jobs/moderation/moderate.py, moderation_sanctions.py,
# hash_retro.py).
MODERATE_UID = "moderation_moderate"
# `Moderate`'s value since state schema 3, then its JSON text from before.
MODERATE_RESTORED = "version_packed:pickled,version:string"
SANCTIONS_UID = "moderation_sanctions"
SANCTIONS_RESTORED = "account:string"
SANCTIONS_BUFFER = "decisions"  # `Sanctions`' decisions held until a timer at their `at`
RETRO_UID = "moderation_retro_join"
RETRO_RESTORED = "retro:string"


def pyflink_order_in(savepoint: str) -> bool:
    """Whether the checkpoint or savepoint at `savepoint` holds the PyFlink engine's
    event-time order (its held input), which the batched engine then restores
    (RestoredOrder.java)."""
    flink = get_gateway().jvm.io.modstream.flink
    return bool(flink.SavepointUids.holds(savepoint, flink.RestoredOrder.UID))


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
    every version it made ready (modstream/jobs/moderation/batch.py); policy and hash-bank rows from
    `broadcast`. Out: sink rows Row(topic, key, value). With `restores_pyflink_order`, the
    input held by the PyFlink engine's event-time order comes first through RestoredOrder."""
    gateway = get_gateway()
    flink = gateway.jvm.io.modstream.flink
    j_keyed = keyed._j_data_stream.keyBy(flink.FieldKey.selector(1), flink.FieldKey.keyType())
    if config.restores_pyflink_order:
        j_restored = (
            j_keyed.process(flink.RestoredOrder(), DECODED_ROW.get_java_type_info())
            .name("event-time order (restored)")
            .uid(flink.RestoredOrder.UID)
        )
        utils = gateway.jvm.org.apache.flink.streaming.api.datastream.DataStreamUtils
        j_keyed = utils.reinterpretAsKeyedStream(
            j_restored, flink.FieldKey.selector(1), flink.FieldKey.keyType()
        )
    j_rows = flink.BatchedVersions.apply(
        j_keyed,
        broadcast._j_data_stream,
        cloudpickle.dumps(config),
        MODERATE_UID,
        config.batch_interval_ms,
        config.held_input_max_chars,
        MODERATE_RESTORED,
    )
    return DataStream(j_rows)


def batched_sanctions(entries: DataStream, config: ModerationConfig) -> DataStream:
    """The version operator's `_sanctions` rows keyed by author through BatchedVersions.java
    (modstream/jobs/moderation/sanctions_batch.py), held in Java until the watermark passes `at`,
    the time they were emitted (KeyedAt.java); no broadcast input. Out: sink rows Row(topic, key,
    value)."""
    flink = get_gateway().jvm.io.modstream.flink
    j_entries = entries._j_data_stream.map(flink.KeyedAt("at"), flink.KeyedAt.outputType()).name(
        "sanctions input"
    )
    j_keyed = j_entries.keyBy(flink.FieldKey.selector(1), flink.FieldKey.keyType())
    return batched_by_key(
        j_keyed,
        config,
        SANCTIONS_UID,
        "sanctions (batched)",
        "modstream.jobs.moderation.sanctions_batch:BatchedSanctions",
        flink.BatchedVersions.outputType(),
        restored=(SANCTIONS_RESTORED, SANCTIONS_BUFFER),
    )


def batched_by_key(
    j_keyed: Any,
    config: ModerationConfig,
    uid: str,
    name: str,
    handler: str,
    output_type: Any,
    restored: tuple[str, str | None],
) -> DataStream:
    """A Java keyed stream through BatchedVersions.java with no broadcast input: the Python
    `handler` ("module:Class", modstream/jobs/moderation/keyed_batch.py) called once per flush for
    every key made ready since the last; `output_type` its rows' Java type; `restored` the PyFlink
    operator's value state and input buffer (None: none) read where its own state has none."""
    flink = get_gateway().jvm.io.modstream.flink
    module, handler_class = handler.split(":")
    j_rows = flink.BatchedVersions.apply(
        j_keyed,
        None,
        cloudpickle.dumps(config),
        uid,
        config.batch_interval_ms,
        config.held_input_max_chars,
        name,
        module,
        handler_class,
        output_type,
        *restored,
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
