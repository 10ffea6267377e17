"""moderation: the keyed evidence join and decision job (logic in operators/moderation.py).

Wiring: inputs (content versions, evidence, reports, reviews, appeals, re-evaluation requests)
are decoded and validated once, stamped with their event time `ts`, keyed by
`(content_id, content_version)` and buffered per key until the watermark passes their `ts`;
then the pure step runs with the policy and hash banks as of that `ts`, read from broadcast
state. Everything the job writes (decisions, actions, review tasks, shadow decisions, DLQ) is a
`Row(topic, key, value)` for one exactly-once sink, or for replay's files.
"""

from __future__ import annotations

import json
import os
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pyflink.common import Duration, Row, Types, WatermarkStrategy
from pyflink.common.watermark_strategy import TimestampAssigner
from pyflink.datastream import DataStream, OutputTag, StreamExecutionEnvironment
from pyflink.datastream.functions import (
    KeyedBroadcastProcessFunction,
    KeyedProcessFunction,
    ProcessFunction,
    RuntimeContext,
)
from pyflink.datastream.state import MapStateDescriptor, ValueStateDescriptor
from pyflink.java_gateway import get_gateway

from jobs import runtime
from modstream.config import Settings
from operators import moderation, reports, sanctions
from operators.hashbank import HashBanks
from operators.moderation import BROADCAST_TOPICS, KEYED_TOPICS
from operators.policy_store import PolicyStore, Rejected, dead_letter_for
from operators.reports import REPORTER_TTL_MS, ReportWeight
from schemas import SchemaError, dead_letter, parse
from schemas.signals import HashBankEntry

# Row(kind, key, topic, value, ts, seq): kind "keyed" | "broadcast" | "report"; seq orders
# records of equal ts that reach a key by different paths (replay: the line number; Kafka: 0).
DECODED_ROW = Types.ROW(
    [Types.STRING(), Types.STRING(), Types.STRING(), Types.STRING(), Types.LONG(), Types.LONG()]
)
BROADCAST_STATE = MapStateDescriptor("moderation_broadcast", Types.STRING(), Types.STRING())
# A viral item's report storm: reports are combined per (version, shard, window) before the
# version's own operator, so one hot key costs one state read and write per window and shard.
REPORT_SHARDS = 8
REPORT_WINDOW_MS = 1_000
REPORT_BATCH = "moderation.reports#batch"


@dataclass(frozen=True, kw_only=True)
class ModerationConfig(runtime.TopicNames):
    policy_id: str = "global"
    out_of_orderness_ms: int = 5_000
    idleness_ms: int = 10_000
    policy_key: str | None = None  # the deployment's HMAC key (MODSTREAM_POLICY_KEY)
    trusted_policy: dict[str, Any] | None = None  # replay's --policy document
    # Parallelism of everything before key_by; replay uses 1 so file order survives.
    pre_key_parallelism: int | None = None


DLQ_TAG = OutputTag("dlq", runtime.SINK_ROW)
BROADCAST_TAG = OutputTag("broadcast", DECODED_ROW)
REPORTS_TAG = OutputTag("reports", DECODED_ROW)


class Decode(ProcessFunction):
    """Row(topic, key, value, ts) -> a validated keyed row; policy and hash-bank records to the
    `broadcast` side output; anything invalid to the `dlq` side output. One pass per record."""

    def __init__(self, config: ModerationConfig) -> None:
        self.config = config

    def process_element(self, value: Row, ctx: Any) -> Iterator[Any]:
        physical, key, raw, record_ts = value[0], value[1], value[2], value[3] or 0
        seq = value[4] if len(value) > 4 else 0
        topic = self.config.contract(physical)
        if topic in BROADCAST_TOPICS:
            ts = _event_time(raw, record_ts)
            yield BROADCAST_TAG, Row("broadcast", topic, topic, raw or "", ts, seq)
            return
        try:
            if topic not in KEYED_TOPICS:
                raise SchemaError(topic, f"{topic!r} is not an input of the moderation job")
            record = parse(topic, raw if raw is not None else "")
        except SchemaError as error:
            letter = dead_letter(
                physical, key, raw, error, ts=_event_time(raw, record_ts), operator="moderation"
            )
            yield (
                DLQ_TAG,
                Row(self.config.physical("moderation.dlq"), key, letter.model_dump_json()),
            )
            return
        ts = record.ts  # type: ignore[attr-defined]
        version_key = f"{record.content_id}\x1f{record.content_version}"  # type: ignore[attr-defined]
        if topic == "moderation.reports":
            # First through the reporter-side gate (hourly limit, trust), keyed by reporter.
            reporter = getattr(record, "reporter_id", None)
            yield REPORTS_TAG, Row("report", reporter, topic, record.model_dump_json(), ts, seq)
            return
        yield Row("keyed", version_key, topic, record.model_dump_json(), ts, seq)


def _event_time(raw: str | None, fallback: int) -> int:
    try:
        ts = json.loads(raw).get("ts") if raw else None
    except (ValueError, AttributeError):
        return fallback
    return ts if isinstance(ts, int) and not isinstance(ts, bool) and ts >= 0 else fallback


def subtask_index(runtime_context: RuntimeContext) -> int:
    """This parallel instance's index. PyFlink 2.2's thread-mode RuntimeContext still calls
    RuntimeContext.getIndexOfThisSubtask(), which Flink 2 moved to getTaskInfo()."""
    java = getattr(runtime_context, "_runtime_context", None)
    if java is not None:
        return int(java.getTaskInfo().getIndexOfThisSubtask())
    return runtime_context.get_index_of_this_subtask()


class PayloadTime(TimestampAssigner):
    def extract_timestamp(self, value: Row, record_timestamp: int) -> int:
        return int(value[3])


class PolicyAware(KeyedBroadcastProcessFunction):
    """Shared by the keyed operators: policy and hash banks in broadcast state (rebuilt once per
    change), and keyed input buffered until the watermark passes its ts."""

    def __init__(self, config: ModerationConfig, *, report_rejections: bool) -> None:
        self.config = config
        self.report_rejections = report_rejections

    def open(self, runtime_context: RuntimeContext) -> None:
        self.buffer = runtime_context.get_map_state(
            MapStateDescriptor("buffer", Types.LONG(), Types.STRING())
        )
        self.subtask = subtask_index(runtime_context)
        self.key = self.config.policy_key.encode("utf-8") if self.config.policy_key else None
        self.store: PolicyStore | None = None
        self.banks: HashBanks | None = None
        self.loaded_revision = -1

    def _load(self, state: Any) -> tuple[PolicyStore, HashBanks]:
        revision = int(state.get("revision") or 0)
        if self.store is None or self.banks is None or revision != self.loaded_revision:
            store = PolicyStore.from_records(
                json.loads(state.get("policies") or "[]"), trusted=self.config.trusted_policy
            )
            self.store = store
            banks = json.loads(state.get("banks") or "{}")
            self.banks = HashBanks.from_records(banks.get("entries", []), banks.get("seen", []))
            self.loaded_revision = revision
        return self.store, self.banks

    def process_broadcast_element(self, value: Row, ctx: Any) -> Iterator[Row]:
        state = ctx.get_broadcast_state(BROADCAST_STATE)
        store, banks = self._load(state)
        topic, raw, ts = value[2], value[3], value[4]
        try:
            if topic == "policy.rules":
                changed = store.apply(raw, self.key)
            else:
                entry = parse("hash.bank", raw)
                assert isinstance(entry, HashBankEntry)
                changed = banks.apply(entry)
        except (Rejected, SchemaError) as error:
            # Every subtask of every keyed operator sees each broadcast record: one DLQ row.
            if self.report_rejections and self.subtask == 0:
                letter = dead_letter_for(raw, error, ts=ts, source_topic=topic)
                yield Row(self.config.physical("moderation.dlq"), None, letter.model_dump_json())
            return
        if changed:
            self.loaded_revision += 1
            state.put("revision", str(self.loaded_revision))
            state.put("policies", json.dumps(store.to_records()))
            state.put(
                "banks",
                json.dumps({"entries": banks.to_records(), "seen": sorted(banks._seen)}),
            )

    def process_element(self, value: Row, ctx: Any) -> Iterator[Row]:
        ts = int(value[4])
        pending = self.buffer.get(ts)
        entries = json.loads(pending) if pending else []
        entries.append([value[2], value[3], int(value[5] or 0)])
        self.buffer.put(ts, json.dumps(entries))
        ctx.timer_service().register_event_time_timer(ts)
        return iter(())

    def _drain(self, timestamp: int) -> list[tuple[str, str, int]]:
        """The input buffered for `timestamp`, in sequence order (stable: arrival order)."""
        pending = self.buffer.get(timestamp)
        if not pending:
            return []
        self.buffer.remove(timestamp)
        entries = sorted(json.loads(pending), key=lambda entry: entry[2])
        return [(topic, raw, seq) for topic, raw, seq in entries]


class ReportGate(PolicyAware):
    """Adapter keyed by reporter: the policy's hourly limit and the reporter's trust weight
    (operators/reports.py), then the report goes on to its content version with its weight."""

    def __init__(self, config: ModerationConfig) -> None:
        super().__init__(config, report_rejections=False)

    def open(self, runtime_context: RuntimeContext) -> None:
        super().open(runtime_context)
        self.reporter = runtime_context.get_state(ValueStateDescriptor("reporter", Types.STRING()))

    def on_timer(self, timestamp: int, ctx: Any) -> Iterator[Row]:
        store, _ = self._load(ctx.get_broadcast_state(BROADCAST_STATE))
        raw_state = self.reporter.value()
        state = json.loads(raw_state) if raw_state else None
        drained = self._drain(timestamp)
        if not drained:
            if state is not None and timestamp >= state["last"] + REPORTER_TTL_MS:
                self.reporter.clear()
            elif state is not None and timestamp >= state.get("timer", 0):
                # One TTL timer at a time: it re-arms when the reporter was active since.
                state["timer"] = state["last"] + REPORTER_TTL_MS
                self.reporter.update(json.dumps(state))
                ctx.timer_service().register_event_time_timer(state["timer"])
            return
        policy = store.resolve(self.config.policy_id, timestamp, "").decide
        limits = policy.document.reports if policy is not None else None
        hourly_limit = limits.reporter_hourly_limit if limits is not None else 10
        for topic, raw, seq in drained:
            record = json.loads(raw)
            state, weight = reports.gate(state, timestamp, hourly_limit)
            record["_modstream_weight"] = weight.weight
            record["_modstream_new_reporter"] = weight.new_reporter
            record["_modstream_seq"] = seq
            shard = zlib.crc32(record["reporter_id"].encode("utf-8")) % REPORT_SHARDS
            key = f"{record['content_id']}\x1f{record['content_version']}\x1f{shard}"
            yield Row("keyed", key, topic, json.dumps(record), timestamp, seq)
        assert state is not None
        if "timer" not in state:
            state["timer"] = state["last"] + REPORTER_TTL_MS
            ctx.timer_service().register_event_time_timer(state["timer"])
        self.reporter.update(json.dumps(state))


class ReportCombine(KeyedProcessFunction):
    """Keyed by (version, shard): the weighed reports of one event-time window become one batch
    for the version's operator (local-global pre-aggregation of a report storm). The batch is
    applied at the window's last millisecond, each report with its own ts."""

    def open(self, runtime_context: RuntimeContext) -> None:
        self.pending = runtime_context.get_map_state(
            MapStateDescriptor("reports", Types.STRING(), Types.STRING())
        )

    def process_element(self, value: Row, ctx: Any) -> Iterator[Row]:
        ts, seq = int(value[4]), int(value[5] or 0)
        window_end = (ts // REPORT_WINDOW_MS + 1) * REPORT_WINDOW_MS - 1
        event_id = json.loads(value[3])["event_id"]
        self.pending.put(f"{window_end:015d}|{ts:015d}|{seq:012d}|{event_id}", value[3])
        ctx.timer_service().register_event_time_timer(window_end)
        return iter(())

    def on_timer(self, timestamp: int, ctx: Any) -> Iterator[Row]:
        due = sorted((key, raw) for key, raw in self.pending.items() if int(key[:15]) <= timestamp)
        if not due:
            return
        batch = []
        for key, raw in due:
            self.pending.remove(key)
            _, ts, seq, event_id = key.split("|", 3)
            batch.append([int(ts), int(seq), event_id, raw])
        version_key = str(ctx.get_current_key()).rsplit("\x1f", 1)[0]
        yield Row("keyed", version_key, REPORT_BATCH, json.dumps(batch), timestamp, 0)


class Moderate(PolicyAware):
    """Adapter keyed by content version: runs the pure step with the policy and hash banks as
    of each input's ts, and stores the version's state."""

    def __init__(self, config: ModerationConfig) -> None:
        super().__init__(config, report_rejections=True)

    def open(self, runtime_context: RuntimeContext) -> None:
        super().open(runtime_context)
        self.version = runtime_context.get_state(ValueStateDescriptor("version", Types.STRING()))

    def _inputs(self, timestamp: int) -> list[tuple[str, str, int]]:
        """(topic, raw, ts) in processing order: the input buffered for `timestamp`, then the
        reports of any batches, merged in (ts, seq, event_id) order whatever shard they took."""
        direct: list[tuple[str, str, int]] = []
        batched: list[list[Any]] = []
        for topic, raw, _ in self._drain(timestamp):
            if topic == REPORT_BATCH:
                batched += json.loads(raw)
            else:
                direct.append((topic, raw, timestamp))
        batched.sort(key=lambda item: (item[0], item[1], item[2]))
        return direct + [("moderation.reports", item[3], item[0]) for item in batched]

    def on_timer(self, timestamp: int, ctx: Any) -> Iterator[Any]:
        store, banks = self._load(ctx.get_broadcast_state(BROADCAST_STATE))
        raw_state = self.version.value()
        state = json.loads(raw_state) if raw_state else None
        outputs: list[moderation.Output] = []
        letters: list[tuple[str, str | None, str, str, str, int]] = []
        timers: list[int] = []
        for topic, raw, ts in self._inputs(timestamp):
            parsed: Any = parse(topic, raw)
            hashes = (state or {}).get("content") or (
                {"sha256": parsed.sha256, "phash": parsed.phash}
                if topic == "content.versions" and parsed.type == "upsert"
                else {}
            )
            context = self._context(store, banks, parsed.content_id, ts, hashes)
            if topic == "moderation.reports":
                weights = json.loads(raw)
                context = moderation.Context(
                    context.resolution,
                    context.hash_matches,
                    ReportWeight(
                        float(weights.get("_modstream_weight", 1.0)),
                        bool(weights.get("_modstream_new_reporter")),
                    ),
                )
            result = moderation.step(state, topic, parsed, ts, context)
            state = result.state
            outputs += result.outputs
            timers += result.timers
            letters += [
                (topic, parsed.content_id, error_class, message, raw, ts)
                for error_class, message in result.dead_letters
            ]
        if state is not None:
            context = self._context(
                store, banks, state["cid"], timestamp, state.get("content") or {}
            )
            result = moderation.on_timer(state, timestamp, context)
            state = result.state
            outputs += result.outputs
            timers += result.timers
        if state is None:
            self.version.clear()
        else:
            self.version.update(json.dumps(state, separators=(",", ":")))
        for timer in set(timers):
            ctx.timer_service().register_event_time_timer(timer)
        for topic, key, output in outputs:
            if topic == moderation.SANCTIONS:
                # On the main output under a reserved topic (no side outputs here): routed to
                # the sanctions operator by a Java filter, with the time it was emitted.
                output = {**output, "at": timestamp}
            else:
                topic = self.config.physical(topic)
            yield Row(topic, key, json.dumps(output, separators=(",", ":"), ensure_ascii=False))
        for topic, content_id, error_class, message, raw, ts in letters:
            letter = dead_letter(
                self.config.physical(topic),
                content_id,
                raw,
                message,
                ts=ts,
                error_class=error_class,  # type: ignore[arg-type]
                operator="moderation",
            )
            yield Row(self.config.physical("moderation.dlq"), None, letter.model_dump_json())

    def _context(
        self, store: PolicyStore, banks: HashBanks, content_id: str, ts: int, hashes: dict[str, Any]
    ) -> moderation.Context:
        """The policies and the content's hash-bank matches as of event time `ts`."""
        resolution = store.resolve(self.config.policy_id, ts, content_id)
        matches: frozenset[str] = frozenset()
        if resolution.decide is not None and hashes:
            matches = banks.matches(
                hashes.get("sha256"),
                hashes.get("phash"),
                ts,
                resolution.decide.document.phash_max_distance,
            )
        return moderation.Context(resolution, matches)


class Sanctions(KeyedProcessFunction):
    """Adapter keyed by author: strikes and sanctions (operators/sanctions.py). Decisions are
    buffered by the time the version's operator emitted them and applied in (ts, content,
    version, revision) order, so the result does not depend on how subtasks interleave."""

    def __init__(self, config: ModerationConfig) -> None:
        self.config = config

    def open(self, runtime_context: RuntimeContext) -> None:
        self.buffer = runtime_context.get_map_state(
            MapStateDescriptor("decisions", Types.LONG(), Types.STRING())
        )
        self.account = runtime_context.get_state(ValueStateDescriptor("account", Types.STRING()))

    def process_element(self, value: Row, ctx: Any) -> Iterator[Row]:
        entry = json.loads(value[2])
        emitted_at = int(entry.pop("at"))
        pending = self.buffer.get(emitted_at)
        entries = json.loads(pending) if pending else []
        entries.append(entry)
        self.buffer.put(emitted_at, json.dumps(entries))
        ctx.timer_service().register_event_time_timer(emitted_at)
        return iter(())

    def on_timer(self, timestamp: int, ctx: Any) -> Iterator[Row]:
        raw_state = self.account.value()
        state = json.loads(raw_state) if raw_state else None
        pending = self.buffer.get(timestamp)
        user_id = str(ctx.get_current_key())
        outputs: list[sanctions.Output] = []
        timers: list[int] = []
        if pending:
            self.buffer.remove(timestamp)
            entries = sorted(
                json.loads(pending),
                key=lambda entry: (
                    entry["decision"]["ts"],
                    entry["decision"]["content_id"],
                    entry["decision"]["content_version"],
                    entry["decision"]["decision_revision"],
                ),
            )
            for entry in entries:
                result = sanctions.on_decision(state, user_id, entry["decision"], entry["strikes"])
                state, outputs, timers = result.state, outputs + result.outputs, result.timers
        else:
            result = sanctions.on_timer(state, timestamp)
            state, timers = result.state, result.timers
        if state is None:
            self.account.clear()
        else:
            self.account.update(json.dumps(state, separators=(",", ":")))
        for timer in timers:
            ctx.timer_service().register_event_time_timer(timer)
        for topic, key, output in outputs:
            yield Row(
                self.config.physical(topic),
                key,
                json.dumps(output, separators=(",", ":"), ensure_ascii=False),
            )


def build(
    env: StreamExecutionEnvironment,
    source: DataStream,
    sink: Callable[[DataStream], Any],
    config: ModerationConfig,
    *,
    source_has_event_time: bool = False,
) -> None:
    """Wire decode -> event time -> key -> broadcast join -> sink. `source` gives SOURCE_ROW
    rows (topic, key, value, ts) of every input topic, keyed and broadcast alike; when
    `source_has_event_time` its watermarks come from the source (Kafka, per partition),
    otherwise they are assigned here from each record's `ts` (replay's ordered file)."""
    if not source_has_event_time:
        source = source.assign_timestamps_and_watermarks(
            WatermarkStrategy.for_bounded_out_of_orderness(
                Duration.of_millis(config.out_of_orderness_ms)
            )
            .with_timestamp_assigner(PayloadTime())
            .with_idleness(Duration.of_millis(config.idleness_ms))
        )
        if config.pre_key_parallelism:
            source = source.set_parallelism(config.pre_key_parallelism)
    decoded = (
        source.process(Decode(config), output_type=DECODED_ROW)
        .name("decode")
        .uid("moderation_decode")
    )
    if config.pre_key_parallelism:
        # The order of the input is the order of equal-ts records: no reshuffle before key_by.
        decoded = decoded.set_parallelism(config.pre_key_parallelism)
    dlq = decoded.get_side_output(DLQ_TAG)
    broadcast = decoded.get_side_output(BROADCAST_TAG).broadcast(BROADCAST_STATE)
    weighed = (
        decoded.get_side_output(REPORTS_TAG)
        .key_by(lambda row: row[1], key_type=Types.STRING())
        .connect(broadcast)
        .process(ReportGate(config), output_type=DECODED_ROW)
        .name("report_gate")
        .uid("moderation_report_gate")
    )
    combined = (
        weighed.key_by(lambda row: row[1], key_type=Types.STRING())
        .process(ReportCombine(), output_type=DECODED_ROW)
        .name("report_combine")
        .uid("moderation_report_combine")
    )
    keyed = decoded.union(combined).key_by(lambda row: row[1], key_type=Types.STRING())
    decided = (
        keyed.connect(broadcast)
        .process(Moderate(config), output_type=runtime.SINK_ROW)
        .name("moderate")
        .uid("moderation_moderate")
    )
    sanctioned = (
        by_topic(decided, moderation.SANCTIONS, keep=True)
        .key_by(lambda row: row[1], key_type=Types.STRING())
        .process(Sanctions(config), output_type=runtime.SINK_ROW)
        .name("sanctions")
        .uid("moderation_sanctions")
    )
    sink(by_topic(decided, moderation.SANCTIONS, keep=False).union(dlq, sanctioned))


def by_topic(stream: DataStream, topic: str, *, keep: bool) -> DataStream:
    """The rows of `stream` whose topic is (keep) or is not `topic`, filtered in Java."""
    jvm = get_gateway().jvm
    return DataStream(stream._j_data_stream.filter(jvm.io.modstream.flink.TopicFilter(topic, keep)))


def main(argv: list[str] | None = None) -> int:
    """Run the moderation job on Kafka (the local stack by default) until SIGTERM."""
    parser = runtime.job_parser("moderation", __doc__)
    parser.add_argument("--policy-id", default="global", help="the policy that decides")
    parser.add_argument(
        "--policy",
        type=Path,
        default=None,
        help="a trusted policy YAML used until a policy.rules record arrives",
    )
    parser.add_argument("--out-of-orderness-ms", type=int, default=2_000)
    parser.add_argument("--idleness-ms", type=int, default=5_000)
    args = parser.parse_args(argv)
    settings = Settings.from_env()
    job = runtime.job_config("moderation", args, settings)
    trusted = yaml.safe_load(args.policy.read_text(encoding="utf-8")) if args.policy else None
    config = ModerationConfig(
        policy_id=args.policy_id,
        out_of_orderness_ms=args.out_of_orderness_ms,
        idleness_ms=args.idleness_ms,
        policy_key=os.environ.get("MODSTREAM_POLICY_KEY"),
        trusted_policy=trusted,
        topics=job.topics,
    )
    env = runtime.create_env(job, settings)
    # Keyed inputs resume from committed offsets; policy.rules and hash.bank are state, read
    # from the beginning whenever the job starts without a checkpoint.
    event_time = runtime.payload_watermarks(args.out_of_orderness_ms, args.idleness_ms)
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
        source_has_event_time=True,
    )
    if job.restore_from:
        print(f"moderation: restoring from {job.restore_from}", flush=True)
    return runtime.run(env, job.name, detached=args.detached)


if __name__ == "__main__":
    raise SystemExit(main())
