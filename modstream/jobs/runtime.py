"""What every modstream Flink job shares: environment, Kafka source and sink, run loop.

Records cross the Python/Java boundary as rows of strings: sources give
`Row(topic, key, value, ts, lane)` and sinks take `Row(topic, key, value)`, so one source can
read several topics and one exactly-once sink writes every output topic of a job in the same
Kafka transaction. The (de)serializers are Java classes of deploy/flink-ext
(TopicKeyValueDeserializationSchema, TopicKeyValueSerializationSchema; docs/architecture.md
lists the extension's classes), built by `make setup`, because PyFlink's own ones cannot carry
a topic and a key per record.
"""

from __future__ import annotations

import argparse
import os
import signal
import site
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

from pyflink.common import Configuration, Types, WatermarkStrategy
from pyflink.datastream import (
    DataStream,
    KeyedStream,
    StreamExecutionEnvironment,
)
from pyflink.datastream.connectors.base import DeliveryGuarantee
from pyflink.datastream.connectors.kafka import (
    KafkaOffsetResetStrategy,
    KafkaOffsetsInitializer,
    KafkaSink,
    KafkaSource,
)
from pyflink.java_gateway import get_gateway

from modstream.core import topics
from modstream.core.config import SUBMIT_PACKAGE_ENV, Settings
from modstream.core.endpoints import PROMETHEUS_FACTORY
from modstream.jobs import restore

# Row(topic, key, value, ts, lane) from TopicKeyValueDeserializationSchema: ts is the value's own
# top-level `ts` when it has one (not validated), else the Kafka record timestamp; lane is
# `topic#partition@offset` (ValidatedTime reads the offset).
SOURCE_ROW = Types.ROW(
    [Types.STRING(), Types.STRING(), Types.STRING(), Types.LONG(), Types.STRING()]
)
# Row(topic, key, value) for TopicKeyValueSerializationSchema.
SINK_ROW = Types.ROW([Types.STRING(), Types.STRING(), Types.STRING()])

# Below the broker's transaction.max.timeout.ms (modstream/stack/local.py), far above a checkpoint.
TRANSACTION_TIMEOUT_MS = 600_000
_TERMINAL = {"FINISHED", "CANCELED", "FAILED"}


# How often sources emit event time (Flink's default: 200 ms). Every decision waits for the
# watermark, so this adds up to its value to each one's latency: 50 ms cut the p99 from event to
# committed action at 50% load from 2,033 and 1,888 ms to 1,749 and 1,779 (`modstream bench
# --quick --variants modstream`, alternated; docs/BENCHMARKS.md). `--flink-conf
# pipeline.auto-watermark-interval=…` overrides it.
WATERMARK_INTERVAL_MS = 50


@dataclass(frozen=True)
class JobConfig:
    """How one job runs: where it reads and writes, how it checkpoints, what it restores."""

    name: str
    bootstrap_servers: str
    # A local directory, or the URI of a remote store (s3://…: modstream/jobs/options.py,
    # `location`).
    checkpoint_dir: Path | str
    transactional_id_prefix: str
    group_id: str
    checkpoint_interval_ms: int = 5_000
    parallelism: int = 1
    restore_from: str | None = None
    transaction_timeout_ms: int = TRANSACTION_TIMEOUT_MS
    log_dir: Path | None = None
    # None: Flink's default (exponential back-off, for long-running jobs); "none" for replay,
    # where a failure must end the run instead of retrying forever.
    restart_strategy: str | None = None
    topics: dict[str, str] = field(default_factory=dict)
    # More Flink settings for this job (e.g. unaligned checkpoints for slow records).
    flink_conf: dict[str, str] = field(default_factory=dict)
    # Kafka client properties for the source's consumer and the sink's producer (tuning:
    # fetch sizes, batching, compression), after modstream's own; never one modstream sets.
    source_properties: dict[str, str] = field(default_factory=dict)
    sink_properties: dict[str, str] = field(default_factory=dict)
    # Every Kafka client's security (SASL, TLS) and the settings' `kafka.properties`
    # (modstream/core/config.py, KafkaSettings.java_properties), before the two above.
    kafka_properties: dict[str, str] = field(default_factory=dict)
    # Where Flink's Prometheus reporter serves this job's metrics: a port or a range
    # ("9250-9299": the first free one); None: no reporter (replay, tests).
    metrics_port: str | None = None

    def topic(self, name: str) -> str:
        """The physical topic for a contract topic name (tests map them to unique names)."""
        return self.topics.get(name, name)

    def contract_names(self) -> dict[str, str]:
        """Physical topic -> contract topic, for the topics this config renames."""
        return {physical: name for name, physical in self.topics.items()}


def job_config(
    name: str, args: argparse.Namespace, settings: Settings, *, state_schema: int = 1
) -> JobConfig:
    """The job's config from its options; decides where it starts (modstream/jobs/restore.py):
    refuses a second live instance of the deployment and a checkpoint directory of a newer state
    schema, and picks the checkpoint to restore."""
    checkpoint_dir = args.checkpoint_dir or settings.run_dir / "checkpoints" / name
    bootstrap_servers = args.bootstrap_servers or settings.bootstrap_servers
    slug = name.replace("_", "-")

    def live(prefix: str) -> dict[str, str]:
        return restore.refuse_if_live(
            lambda: restore.transaction_states(bootstrap_servers, prefix),
            prefix,
            watch_s=2 * args.checkpoint_interval_ms / 1000 + 2,
        )

    if isinstance(checkpoint_dir, str):  # a remote store (s3://): the cluster restores
        prefix = args.transactional_id_prefix or restore.default_prefix(slug, checkpoint_dir)
        live(prefix)
        restore_from = restore.resolve_remote(args.restore_from, checkpoint_dir)
    else:
        checkpoint_dir.mkdir(parents=True, exist_ok=True)
        marker = restore.read_marker(checkpoint_dir)
        restore.check_schema(marker, name, state_schema)
        prefix = (
            args.transactional_id_prefix
            or marker.get("transactional_id_prefix")
            or (f"modstream-{slug}" if restore.completed_checkpoints(checkpoint_dir) else None)
            or restore.default_prefix(slug, checkpoint_dir)
        )
        restore_from = restore.resolve(args.restore_from, checkpoint_dir, live(prefix), prefix)
        restore.write_marker(checkpoint_dir, name, prefix, state_schema)
    return JobConfig(
        name=name,
        bootstrap_servers=bootstrap_servers,
        checkpoint_dir=checkpoint_dir,
        checkpoint_interval_ms=args.checkpoint_interval_ms,
        restore_from=restore_from,
        transactional_id_prefix=prefix,
        transaction_timeout_ms=args.transaction_timeout_ms,
        group_id=args.group_id or prefix,
        parallelism=args.parallelism,
        restart_strategy=args.restart_strategy,
        topics=dict(args.topic),
        flink_conf=dict(args.flink_conf),
        source_properties=dict(args.source_property),
        sink_properties=dict(args.sink_property),
        kafka_properties=settings.kafka.java_properties(),
        metrics_port=None if args.metrics_port in ("", "off") else args.metrics_port,
    )


def _python_path() -> str:
    """PYTHONPATH for the embedded (thread-mode) interpreter, which does not see the venv."""
    from modstream.core.config import PROJECT_ROOT

    entries = [str(PROJECT_ROOT), *site.getsitepackages()]
    existing = os.environ.get("PYTHONPATH")
    if existing:
        entries.append(existing)
    return os.pathsep.join(dict.fromkeys(entries))


def create_env(config: JobConfig, settings: Settings | None = None) -> StreamExecutionEnvironment:
    """A StreamExecutionEnvironment in thread mode with exactly-once checkpoints.

    Must run before anything else touches the py4j gateway: the gateway JVM inherits the
    environment variables set here.
    """
    settings = settings or Settings.from_env()
    # Submitted with `modstream submit` (`flink run`): the TaskManagers' Python and the jars
    # come from the package (modstream/stack/package.py), never from this machine's virtualenv.
    submitted_from = os.environ.get(SUBMIT_PACKAGE_ENV)
    if not submitted_from:
        os.environ["PYTHONPATH"] = _python_path()
    log_dir = config.log_dir or settings.run_dir / "flink" / "logs"
    log_dir.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("FLINK_LOG_DIR", str(log_dir))
    os.environ.setdefault("FLINK_IDENT_STRING", f"{config.name}-{os.getpid()}")
    if config.metrics_port:
        _reporter_on_classpath()
    jars = sorted((Path(submitted_from) / "jars").glob("*.jar")) if submitted_from else []
    jars = jars or settings.flink_jars
    if not any(jar.name.startswith("modstream-flink-ext") for jar in jars):
        raise RuntimeError(
            f"modstream-flink-ext.jar is missing from {settings.jars_dir / 'flink'};"
            " run `make setup`"
        )

    conf = Configuration()
    conf.set_string("pipeline.name", config.name)
    conf.set_string("pipeline.jars", ";".join(jar.as_uri() for jar in jars))
    conf.set_string("python.execution-mode", "thread")
    if not submitted_from:
        conf.set_string("python.executable", sys.executable)
    conf.set_string("execution.checkpointing.interval", f"{config.checkpoint_interval_ms}ms")
    conf.set_string("execution.checkpointing.mode", "EXACTLY_ONCE")
    conf.set_string("pipeline.auto-watermark-interval", f"{WATERMARK_INTERVAL_MS}ms")
    where = config.checkpoint_dir
    conf.set_string(
        "execution.checkpointing.dir",
        where.resolve().as_uri() if isinstance(where, Path) else where,
    )
    conf.set_string(
        "execution.checkpointing.externalized-checkpoint-retention", "RETAIN_ON_CANCELLATION"
    )
    conf.set_string("execution.checkpointing.num-retained", "3")
    for key, value in settings.flink.conf().items():
        conf.set_string(key, value)
    for key, value in prometheus_reporter(config.metrics_port).items():
        conf.set_string(key, value)
    for key, value in config.flink_conf.items():
        conf.set_string(key, value)
    if config.restore_from:
        conf.set_string("execution.state-recovery.path", config.restore_from)
    if config.restart_strategy:
        conf.set_string("restart-strategy.type", config.restart_strategy)
    env = StreamExecutionEnvironment.get_execution_environment(conf)
    env.set_parallelism(config.parallelism)
    return env


def plugins_dir() -> Path:
    """The wheel's Flink plugins (metrics-prometheus among them)."""
    import pyflink

    return Path(pyflink.__file__).resolve().parent / "plugins"


def _reporter_on_classpath() -> None:
    """The Prometheus reporter's jar on the gateway JVM's classpath: a local MiniCluster finds
    reporters there only (it loads no plugins; a cluster loads it from plugins/). PyFlink's
    gateway adds HADOOP_CLASSPATH to its classpath, the one way in from the environment."""
    jars = sorted((plugins_dir() / "metrics-prometheus").glob("flink-metrics-prometheus-*.jar"))
    if not jars:
        return
    existing = os.environ.get("HADOOP_CLASSPATH")
    os.environ["HADOOP_CLASSPATH"] = os.pathsep.join(
        [str(jars[-1]), *([existing] if existing else [])]
    )


def prometheus_reporter(port: str | None) -> dict[str, str]:
    """Flink settings that serve every metric on `port` (or the first free one of a range
    "A-B") at /metrics; none without a port. docs/OPERATIONS.md."""
    if not port:
        return {}
    return {
        "metrics.reporter.prom.factory.class": PROMETHEUS_FACTORY,
        "metrics.reporter.prom.port": port,
    }


def keyed_by(stream: DataStream, row_type: Any, field: int = 1) -> KeyedStream:
    """`stream` keyed by its rows' string field `field` for a Python keyed operator, the key
    taken in Java (FieldKey.java): PyFlink's `key_by(lambda)` would cross into Python for
    every record."""
    gateway = get_gateway()
    flink = gateway.jvm.io.modstream.flink
    j_type = row_type.get_java_type_info()
    j_with_key = stream._j_data_stream.map(
        flink.FieldKey.withKey(field), flink.FieldKey.withKeyType(j_type)
    )
    j_with_key.name("key")
    j_keyed = j_with_key.keyBy(gateway.jvm.KeyByKeySelector(), flink.FieldKey.keyType())
    return KeyedStream(j_keyed, row_type, stream)


def kafka_source(
    config: JobConfig, topics: list[str], *, from_earliest: bool = False
) -> KafkaSource:
    """Reads committed records of `topics` as Row(topic, key, value, timestamp_ms).

    Starts from the group's committed offsets (earliest when it has none), or with
    `from_earliest` always from the beginning (topics that are state, like policy.rules); on
    restore the offsets come from the checkpoint. read_committed because inputs may be written
    by other modstream jobs' transactions.
    """
    offsets = (
        KafkaOffsetsInitializer.earliest()
        if from_earliest
        else KafkaOffsetsInitializer.committed_offsets(KafkaOffsetResetStrategy.EARLIEST)
    )
    builder = (
        KafkaSource.builder()
        .set_bootstrap_servers(config.bootstrap_servers)
        .set_topics(*topics)
        .set_group_id(config.group_id)
        .set_starting_offsets(offsets)
        .set_property("isolation.level", "read_committed")
        .set_property("partition.discovery.interval.ms", "60000")
        .set_property("client.id.prefix", config.group_id)
    )
    for key, value in {**config.kafka_properties, **config.source_properties}.items():
        builder = builder.set_property(key, value)
    jvm = get_gateway().jvm
    builder._j_builder.setDeserializer(jvm.io.modstream.flink.TopicKeyValueDeserializationSchema())
    return builder.build()


def kafka_sink(config: JobConfig) -> KafkaSink:
    """An exactly-once sink for Row(topic, key, value): records are visible to read_committed
    consumers when the checkpoint that covers them completes."""
    builder = (
        KafkaSink.builder()
        .set_bootstrap_servers(config.bootstrap_servers)
        .set_delivery_guarantee(DeliveryGuarantee.EXACTLY_ONCE)
        .set_transactional_id_prefix(config.transactional_id_prefix)
        .set_property("transaction.timeout.ms", str(config.transaction_timeout_ms))
    )
    for key, value in {**config.kafka_properties, **config.sink_properties}.items():
        builder = builder.set_property(key, value)
    jvm = get_gateway().jvm
    builder._j_builder.setRecordSerializer(
        jvm.io.modstream.flink.TopicKeyValueSerializationSchema()
    )
    return builder.build()


def wall_clock_ms() -> int:
    """The processing-time adapters' default clock (each config's `clock`; tests inject one)."""
    return int(time.time() * 1000)


@dataclass(frozen=True, kw_only=True)
class TopicNames:
    """Contract topic <-> physical topic for a job's adapters (`--topic CONTRACT=PHYSICAL`)."""

    topics: dict[str, str] | None = None

    def physical(self, name: str) -> str:
        return (self.topics or {}).get(name, name)

    def contract(self, physical: str) -> str:
        for name, mapped in (self.topics or {}).items():
            if mapped == physical:
                return name
        return physical


# How long a job looks again for an input topic it did not find: one created a moment ago can
# be described without its partitions while their leaders are elected.
INPUTS_SETTLE_S = 10.0


def inputs_missing(job: JobConfig, names: list[str], settle_s: float = INPUTS_SETTLE_S) -> bool:
    """Whether an input topic (physical `names`) is missing on the broker, said on stderr: a
    job refuses to start then, since Flink's Kafka source over a list with a missing topic
    reads none of them. A topic not found is looked for again every second for `settle_s`."""
    give_up = time.monotonic() + settle_s
    while True:
        present = topics.partition_counts(job.bootstrap_servers, names)
        missing = [name for name in names if not present.get(name)]
        if not missing or time.monotonic() >= give_up:
            break
        time.sleep(1.0)
    if missing:
        print(
            f"{job.name}: input topics missing on the broker: {', '.join(missing)}; create "
            "them first (`modstream topics create`, docs/OPERATIONS.md)",
            file=sys.stderr,
            flush=True,
        )
    return bool(missing)


def run_on_kafka(
    job: JobConfig,
    settings: Settings,
    input_topics: list[str],
    wire: Any,
    *,
    detached: bool = False,
) -> int:
    """The common main of a processing-time job: one Kafka source over `input_topics`
    (contract names), `wire(env, source, sink)` in between, one exactly-once sink, run.
    Refuses to start (2) while an input topic is missing on the broker: Flink's Kafka source
    over a list with a missing topic reads none of them (the reconciler, given review.tasks
    and review.decisions as inputs, reported no discrepancy at all)."""
    names = [job.topic(name) for name in input_topics]
    if inputs_missing(job, names):
        return 2
    env = create_env(job, settings)
    source: DataStream = env.from_source(
        kafka_source(job, names),
        WatermarkStrategy.no_watermarks(),
        f"{job.name} inputs",
        type_info=SOURCE_ROW,
    ).uid(f"{job.name}_source")
    wire(env, source, exactly_once_sink(job))
    if job.restore_from:
        print(f"{job.name}: restoring from {job.restore_from}", flush=True)
    return run(env, job.name, detached=detached)


def exactly_once_sink(job: JobConfig) -> Callable[[DataStream], Any]:
    """What `run_on_kafka` hands its wiring: Row(topic, key, value) streams into the job's one
    exactly-once sink (uid `sink`)."""
    return lambda stream: stream.sink_to(kafka_sink(job)).uid("sink")


def run(
    env: StreamExecutionEnvironment, name: str, say: Any = print, *, detached: bool = False
) -> int:
    """Submit the job, report when it runs, cancel it cleanly on SIGTERM or SIGINT.

    Returns 0 when the job finished or was cancelled on request, 1 when it failed. Detached,
    returns 0 as soon as the cluster accepted the job.
    """
    if detached:
        client = env.execute_async(name)
        say(f"job {name} {client.get_job_id()} submitted", flush=True)
        return 0
    stop_requested: list[int] = []

    def request_stop(signum: int, _frame: FrameType | None) -> None:
        stop_requested.append(signum)

    previous = {sig: signal.signal(sig, request_stop) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        client = env.execute_async(name)
        job_id = client.get_job_id()
        announced = False
        while True:
            status = client.get_job_status().result().name
            if status == "RUNNING" and not announced:
                say(f"job {name} {job_id} running", flush=True)
                announced = True
            if status in _TERMINAL:
                break
            if stop_requested:
                say(f"job {name} {job_id}: cancelling on signal {stop_requested[0]}", flush=True)
                client.cancel().result()
                # A local MiniCluster shuts down with its job: nothing left to ask for status.
                status = "CANCELED"
                break
            time.sleep(0.2)
        say(f"job {name} {job_id} {status.lower()}", flush=True)
        return 1 if status == "FAILED" else 0
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
