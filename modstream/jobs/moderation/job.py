"""moderation: the keyed evidence join and decision job (logic in modstream/moderation/step.py).

Wiring: inputs (content versions, evidence, reports, reviews, appeals, re-evaluation requests)
are decoded and validated once, stamped with their event time `ts`, keyed by
`(content_id, content_version)` and buffered per key until the watermark passes their `ts`;
then the pure step runs with the policy and hash banks as of that `ts`, read from broadcast
state. Everything the job writes (decisions, actions, review tasks, shadow decisions, DLQ) is a
`Row(topic, key, value)` for one exactly-once sink, or for replay's files.

This module wires the job and runs it; its adapters are modstream/jobs/moderation/decode.py
(admission), modstream/jobs/moderation/broadcast.py (policy and hash banks),
modstream/jobs/moderation/reports.py (the report gate and combiner),
modstream/jobs/moderation/moderate.py (the per-version step) and
modstream/jobs/moderation/sanctions.py (strikes and sanctions); the steps that run in Java are wired
in modstream/jobs/moderation/java.py; its configuration and row shapes are in
modstream/jobs/moderation/config.py.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import cloudpickle
import yaml
from py4j.protocol import Py4JJavaError
from pyflink.common import WatermarkStrategy
from pyflink.datastream import DataStream, StreamExecutionEnvironment
from pyflink.java_gateway import get_gateway

from modstream.core import logs, topics
from modstream.core.config import Settings
from modstream.jobs import restore, runtime
from modstream.jobs.keys import job_keyring
from modstream.jobs.moderation import hash_retro
from modstream.jobs.moderation.config import (
    BROADCAST_STATE,
    DECODE_BATCH,
    DECODE_WAIT_MS,
    DECODED_ROW,
    DLQ_ROUTE,
    ENGINE_BATCHED,
    ENGINES,
    OUTPUT_BATCH,
    ModerationConfig,
)
from modstream.jobs.moderation.java import (
    batched_sanctions,
    batched_versions,
    by_topic,
    in_event_time_order,
    projected,
    pyflink_order_in,
    unbatched,
    validated_time,
)
from modstream.jobs.moderation.moderate import Moderate
from modstream.jobs.moderation.reports import ReportCombine, ReportGate
from modstream.jobs.moderation.sanctions import Sanctions
from modstream.jobs.options import (
    empty_state_option,
    job_parser,
    non_negative_int,
    positive_int,
)
from modstream.moderation import state_schema
from modstream.moderation import step as moderation
from modstream.moderation.admission import TIME_HOLDING_TOPICS
from modstream.moderation.step import BROADCAST_TOPICS, KEYED_TOPICS

LOG = logging.getLogger("modstream.moderation")


def build(
    env: StreamExecutionEnvironment,
    source: DataStream,
    sink: Callable[[DataStream], Any],
    config: ModerationConfig,
) -> None:
    """Wire decode -> event time -> key -> broadcast join -> sink. `source` gives rows
    (topic, key, value, ts, lane[, seq]) of every input topic, keyed and broadcast alike, with
    no watermarks: event time is assigned after decoding, from admitted records only
    (`ValidatedTime`, docs/moderation.md "Time")."""
    decoded = decode(source, config)
    timed = validated_time(by_topic(decoded, DLQ_ROUTE, keep=False, config=config), config)
    dlq = projected(by_topic(decoded, DLQ_ROUTE, keep=True, config=config), (2, 1, 3))
    broadcast_rows = by_topic(timed, "broadcast", keep=True, config=config)
    broadcast = broadcast_rows.broadcast(BROADCAST_STATE)
    weighed = (
        runtime.keyed_by(by_topic(timed, "report", keep=True, config=config), DECODED_ROW)
        .connect(broadcast)
        .process(ReportGate(config), output_type=DECODED_ROW)
        .name("report_gate")
        .uid("moderation_report_gate")
    )
    combined = (
        runtime.keyed_by(weighed, DECODED_ROW)
        .process(ReportCombine(), output_type=DECODED_ROW)
        .name("report_combine")
        .uid("moderation_report_combine")
    )
    if config.engine == ENGINE_BATCHED:
        retro = hash_retro.batched_retro_rows(timed, DECODED_ROW, config)
    else:
        retro = hash_retro.retro_rows(timed, DECODED_ROW, config.pre_key_parallelism)
    keyed = by_topic(timed, "keyed", keep=True, config=config).union(combined, retro)
    if config.engine == ENGINE_BATCHED:
        decided = batched_versions(keyed, broadcast_rows, config)
    else:
        moderated = (
            in_event_time_order(keyed)
            .connect(broadcast)
            .process(Moderate(config), output_type=OUTPUT_BATCH)
            .name("moderate")
            .uid("moderation_moderate")
        )
        decided = unbatched(moderated)
    if config.engine == ENGINE_BATCHED:
        sanctioned = batched_sanctions(by_topic(decided, moderation.SANCTIONS, keep=True), config)
    else:
        sanctioned = (
            runtime.keyed_by(by_topic(decided, moderation.SANCTIONS, keep=True), runtime.SINK_ROW)
            .process(Sanctions(config), output_type=runtime.SINK_ROW)
            .name("sanctions")
            .uid("moderation_sanctions")
        )
    sink(by_topic(decided, moderation.SANCTIONS, keep=False).union(dlq, sanctioned))


def decode(source: DataStream, config: ModerationConfig) -> DataStream:
    """Source rows in mini-batches (MiniBatch.java) through BatchedDecode.java, which calls its
    Python (decode.py `BatchedDecode`) once per batch and emits one DECODED_ROW each, at the
    pre-key parallelism: the order of the input is the order of equal-ts records, so nothing
    reshuffles before the key."""
    flink = get_gateway().jvm.io.modstream.flink
    batches = DataStream(
        source._j_data_stream.transform(
            "mini-batch",
            flink.MiniBatch.outputType(),
            flink.MiniBatch(DECODE_BATCH, DECODE_WAIT_MS),
        ).uid("moderation_decode_batches")
    )
    j_rows = flink.BatchedDecode.apply(
        batches._j_data_stream, cloudpickle.dumps(config), DECODED_ROW.get_java_type_info()
    )
    rows = DataStream(j_rows).name("decode").uid("moderation_decode")
    if config.pre_key_parallelism:
        for stream in (batches, rows):
            stream.set_parallelism(config.pre_key_parallelism)
    return rows


def expected_lanes(
    job: runtime.JobConfig, pre_key_parallelism: int | None = None
) -> tuple[str, ...]:
    """Every partition of the inputs that hold event time (uploads and evidence:
    modstream/moderation/admission.py `TIME_HOLDING_TOPICS`), when one event-time instance reads
    them all: each holds event time until its first record after a start or restore (ValidatedTime).
    With parallel readers an instance reads only the partitions its reader was given, which is not
    known here: none (docs/moderation.md, Time). `pre_key_parallelism` 1 keeps one such instance
    whatever the keyed operators' parallelism."""
    if (pre_key_parallelism or job.parallelism) != 1:
        print(
            "moderation: pre-key parallelism > 1: partitions are not expected before their first"
            " record (docs/moderation.md, 'Time')",
            file=sys.stderr,
            flush=True,
        )
        return ()
    names = [job.topic(name) for name in TIME_HOLDING_TOPICS]
    counts = topics.partition_counts(job.bootstrap_servers, names)
    return tuple(
        f"{name}#{partition}" for name in names for partition in range(counts.get(name, 0))
    )


def options() -> argparse.ArgumentParser:
    """The job's options: the common ones (modstream/jobs/options.py), policy, time and
    retention."""
    parser = job_parser("moderation", __doc__)
    parser.add_argument("--policy-id", default="global", help="the policy that decides")
    parser.add_argument(
        "--policy",
        type=Path,
        default=None,
        help="a trusted policy YAML used until a policy.rules record arrives",
    )
    parser.add_argument("--out-of-orderness-ms", type=int, default=2_000)
    parser.add_argument(
        "--idleness-ms",
        type=int,
        default=1_000,
        help="a live lane silent this long is quiet: it no longer holds event time back",
    )
    parser.add_argument(
        "--live-window-ms",
        type=int,
        default=moderation.LIVE_WINDOW_MS,
        help="a lane whose records arrive within this of their ts is live (docs/moderation.md)",
    )
    parser.add_argument(
        "--backfill-idleness-ms",
        type=int,
        default=5_000,
        help="a lane that is behind holds event time this long after its last record",
    )
    parser.add_argument(
        "--drained-after-ms",
        type=int,
        default=60_000,
        help="every lane silent and behind this long: the input read is complete, and event "
        "time moves to the newest record read (shorter silences are stalls: it holds)",
    )
    parser.add_argument(
        "--evidence-grace-ms",
        type=int,
        default=moderation.EVIDENCE_GRACE_MS,
        help="a detector's answer reaches this job within this (scan job's checkpoint interval "
        "and ours); a live deadline waits it past the deadline (docs/moderation.md, Time)",
    )
    parser.add_argument(
        "--state-ttl-ms",
        type=int,
        default=moderation.STATE_TTL_MS,
        help="a version's full state is kept this long after its last input, then retired",
    )
    parser.add_argument(
        "--review-retention-ms",
        type=int,
        default=moderation.REVIEW_RETENTION_MS,
        help="a retired version's compact record (reviews and appeals apply) is kept this long",
    )
    operator_options(parser)
    empty_state_option(parser)
    return parser


def operator_options(parser: argparse.ArgumentParser) -> None:
    """How the operators run: --engine, --batch-interval-ms and --pre-key-parallelism (decode
    and event time narrower than the keyed operators)."""
    engine_option(parser)
    batch_interval_option(parser)
    parser.add_argument(
        "--held-input-max-chars",
        type=positive_int,
        default=ModerationConfig.held_input_max_chars,
        help="--engine batched: input waiting for the watermark is held in memory up to this many"
        " characters per keyed operator subtask, then moved to keyed state (RocksDB)",
    )
    parser.add_argument(
        "--state-cache-versions",
        type=non_negative_int,
        default=ModerationConfig.state_cache_versions,
        help="the version states each moderate subtask keeps decoded after storing them, so a"
        " version's next firing need not decode its state (about 6 KB each; 0: none kept)",
    )
    parser.add_argument(
        "--pre-key-parallelism",
        type=positive_int,
        default=None,
        help="parallelism of decode and event time, before the key (default: the job's); 1 keeps"
        " one event-time instance that reads every partition, so a drained backlog's time moves"
        " on while the keyed operators run at --parallelism (docs/moderation.md, Time)",
    )


def engine_option(parser: argparse.ArgumentParser) -> None:
    """--engine: which keyed operator runs the per-version code (issue 26)."""
    parser.add_argument(
        "--engine",
        choices=ENGINES,
        default=ENGINE_BATCHED,
        help="the keyed operators: batched (the default: BatchedVersions.java, order, state and"
        " timers in Java, Python once per batch interval; issue 26) or pyflink (Moderate per"
        " version); a pyflink savepoint restores into batched, not back (docs/OPERATIONS.md)",
    )


def batch_interval_option(parser: argparse.ArgumentParser) -> None:
    """--batch-interval-ms: the batched engine's longest wait before it calls Python."""
    parser.add_argument(
        "--batch-interval-ms",
        type=int,
        default=ModerationConfig.batch_interval_ms,
        help="--engine batched: call Python at most once per this many ms for the versions"
        " readied since its last call (0: at every watermark that readied one)",
    )


def refuse_empty_state(job: runtime.JobConfig, args: argparse.Namespace) -> None:
    """Committed offsets without their state: refused unless named (modstream/jobs/restore.py)."""
    if job.restore_from is not None:
        return
    keyed = [job.topic(name) for name in KEYED_TOPICS]
    committed = restore.committed_partitions(job.bootstrap_servers, job.group_id, keyed)
    line = restore.empty_state_start(
        job.name,
        args.restore_from,
        job.restore_from,
        committed,
        job.group_id,
        accept_empty_state=args.accept_empty_state,
        cluster_restores=isinstance(job.checkpoint_dir, str),
    )
    if line is not None:
        LOG.warning(line)


def configured(args: argparse.Namespace, job: runtime.JobConfig) -> ModerationConfig:
    """The job's configuration from its options, the environment and the broker's partitions."""
    trusted = yaml.safe_load(args.policy.read_text(encoding="utf-8")) if args.policy else None
    return ModerationConfig.from_options(
        args,
        trusted_policy=trusted,
        keyring=job_keyring("moderation", job.bootstrap_servers, job.kafka_properties),
        topics=job.topics,
        expected_lanes=expected_lanes(job, args.pre_key_parallelism),
        end_offsets=(job.bootstrap_servers, job.group_id),
        end_offsets_properties=tuple(f"{k}={v}" for k, v in job.kafka_properties.items()),
    )


def with_restored_order(
    config: ModerationConfig, env: StreamExecutionEnvironment
) -> ModerationConfig:
    """The batched engine started from a checkpoint or savepoint that holds the PyFlink
    engine's event-time order: its held input is handed on (RestoredOrder.java). The path is
    the job's `execution.state-recovery.path`: `--restore-from`, or what a Kubernetes operator
    set. One that cannot be read here is said, and left to Flink's own restore (which refuses
    state it cannot map)."""
    j_conf = env._j_stream_execution_environment.getConfiguration().toMap()
    path = j_conf.get("execution.state-recovery.path")
    if config.engine != ENGINE_BATCHED or not path:
        return config
    try:
        restores = pyflink_order_in(path)
    except Py4JJavaError as error:
        LOG.warning("moderation: %s not read for the PyFlink engine's held input: %s", path, error)
        return config
    if restores:
        print(
            "moderation: the PyFlink engine's held input restores through its event-time"
            " order's uid (RestoredOrder)",
            flush=True,
        )
    return dataclasses.replace(config, restores_pyflink_order=restores)


def main(argv: list[str] | None = None) -> int:
    """Run the moderation job on Kafka (the local stack by default) until SIGTERM."""
    args = options().parse_args(argv)
    settings = Settings.from_env()
    logs.configure_job("moderation", settings)
    job = runtime.job_config("moderation", args, settings, state_schema=state_schema.STATE_SCHEMA)
    refuse_empty_state(job, args)
    config = configured(args, job)
    env = runtime.create_env(job, settings)
    config = with_restored_order(config, env)
    # Keyed inputs resume from committed offsets; policy.rules and hash.bank are state, read
    # from the beginning whenever the job starts without a checkpoint.
    # No watermarks at the sources: event time comes from admitted records (validated_time).
    event_time = WatermarkStrategy.no_watermarks()
    live = env.from_source(
        runtime.kafka_source(job, [job.topic(name) for name in KEYED_TOPICS]),
        event_time,
        "inputs",
        type_info=runtime.SOURCE_ROW,
    ).uid("moderation_source")
    state = env.from_source(
        runtime.kafka_source(
            job, [job.topic(name) for name in BROADCAST_TOPICS], from_earliest=True
        ),
        event_time,
        "policy and hash banks",
        type_info=runtime.SOURCE_ROW,
    ).uid("moderation_broadcast_source")
    source = live.union(state)
    build(
        env,
        source,
        lambda stream: stream.sink_to(runtime.kafka_sink(job)).uid("sink"),
        config,
    )
    if job.restore_from:
        print(f"moderation: restoring from {job.restore_from}", flush=True)
    return runtime.run(env, job.name, detached=args.detached)


if __name__ == "__main__":
    raise SystemExit(main())
