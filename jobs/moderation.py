"""moderation: the keyed evidence join and decision job (logic in operators/moderation.py).

Wiring: inputs (content versions, evidence, reports, reviews, appeals, re-evaluation requests)
are decoded and validated once, stamped with their event time `ts`, keyed by
`(content_id, content_version)` and buffered per key until the watermark passes their `ts`;
then the pure step runs with the policy and hash banks as of that `ts`, read from broadcast
state. Everything the job writes (decisions, actions, review tasks, shadow decisions, DLQ) is a
`Row(topic, key, value)` for one exactly-once sink, or for replay's files.
"""

from __future__ import annotations

import argparse
import dataclasses
import heapq
import json
import os
import sys
import time
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from pyflink.common import Row, Types, WatermarkStrategy
from pyflink.datastream import DataStream, KeyedStream, OutputTag, StreamExecutionEnvironment
from pyflink.datastream.functions import (
    KeyedBroadcastProcessFunction,
    KeyedProcessFunction,
    ProcessFunction,
    RuntimeContext,
)
from pyflink.datastream.state import MapStateDescriptor, ValueStateDescriptor
from pyflink.java_gateway import get_gateway

from jobs import hash_retro, runtime
from modstream import topics
from modstream.config import Settings
from modstream.limits import Limits
from operators import admission, jsonio, moderation, reports, sanctions, signing, state_schema
from operators.admission import Refused
from operators.hashbank import HashBanks, state_key
from operators.moderation import BROADCAST_TOPICS, KEYED_TOPICS, RETRO
from operators.policy_store import PolicyStore, Rejected, dead_letter_for
from operators.reports import REPORTER_TTL_MS, ReportWeight
from operators.retro import RetroRecord
from operators.signing import Keyring
from schemas import SchemaError, dead_letter, parse
from schemas.registry import parse_own
from schemas.signals import HashBankEntry

# Row(kind, key, topic, value, ts, seq, lane): kind "keyed" | "broadcast" | "report"; seq orders
# records of equal ts that reach a key by different paths (replay: the line number; Kafka: 0);
# lane is where an admitted record came from (`topic#partition@offset`), or "" for records that
# never move event time (policy, control and hash-bank records, re-evaluation requests).
DECODED_ROW = Types.ROW(
    [
        Types.STRING(),
        Types.STRING(),
        Types.STRING(),
        Types.STRING(),
        Types.LONG(),
        Types.LONG(),
        Types.STRING(),
    ]
)
BROADCAST_STATE = MapStateDescriptor("moderation_broadcast", Types.STRING(), Types.STRING())
# A viral item's report storm: reports are combined per (version, shard, window) before the
# version's own operator, so one hot key costs one state read and write per window and shard.
REPORT_SHARDS = 8
REPORT_WINDOW_MS = 1_000
# Decode's input and output in batches (MiniBatch.java, Unbatch.java): up to DECODE_BATCH
# records, at most DECODE_WAIT_MS after the first; a refused record rides as route DLQ_ROUTE.
DECODE_BATCH = 256
DECODE_WAIT_MS = 10
DLQ_ROUTE = "dlq"
DECODED_BATCH = Types.ROW(
    [Types.BASIC_ARRAY(t) for t in (Types.STRING(), Types.STRING(), Types.STRING(), Types.STRING())]
    + [
        Types.BASIC_ARRAY(Types.LONG()),
        Types.BASIC_ARRAY(Types.LONG()),
        Types.BASIC_ARRAY(Types.STRING()),
    ]
)
# EventTimeOrder.java's batch: Row(topics, values, stamps, seqs) of one version, in order.
ORDERED_BATCH = Types.ROW(
    [
        Types.BASIC_ARRAY(Types.STRING()),
        Types.BASIC_ARRAY(Types.STRING()),
        Types.BASIC_ARRAY(Types.LONG()),
        Types.BASIC_ARRAY(Types.LONG()),
    ]
)
# Moderate's output: Row(topics, keys, values), all it emitted for one batch or timer.
OUTPUT_BATCH = Types.ROW([Types.BASIC_ARRAY(Types.STRING())] * 3)
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
    limits: Limits = field(default_factory=Limits)
    # Producers' and approvers' keys; which authority topics must be signed (operators/signing).
    keyring: Keyring = field(default_factory=Keyring)
    # Event time (docs/moderation.md, "Time"): the processing clock is the wall clock unless
    # fixed (replay fixes it at its start, so its admission does not depend on how long it runs);
    # `wall_clock` lets event time follow the processing clock when every lane is live or quiet.
    now_ms: int | None = None
    wall_clock: bool = True
    live_window_ms: int = moderation.LIVE_WINDOW_MS
    backfill_idleness_ms: int = 5_000
    # The lanes (`topic#partition`) the event-time step reads, known before any is heard from:
    # after a start or restore each holds event time until its first record (ValidatedTime).
    expected_lanes: tuple[str, ...] = ()
    # Where the lanes' ends are asked (bootstrap servers, consumer group): a lane whose input is
    # on the broker but not read yet holds event time (ValidatedTime, EndOffsets). "" in replay.
    end_offsets: tuple[str, str] = ("", "")
    # Every lane silent and behind this long: what was read is complete (before: a stall).
    drained_after_ms: int = 60_000
    # Retention (docs/moderation.md, "Retention"): full state after a version's last input,
    # then its compact record, in which reviews and appeals still apply.
    state_ttl_ms: int = moderation.STATE_TTL_MS
    review_retention_ms: int = moderation.REVIEW_RETENTION_MS
    # How long a detector's answer may take to reach this job (the scan job's transaction
    # interval and ours): a live deadline waits this long past the detectors' own deadline.
    evidence_grace_ms: int = moderation.EVIDENCE_GRACE_MS

    def clock(self) -> int:
        """The processing clock, in ms since the epoch."""
        return self.now_ms if self.now_ms is not None else int(time.time() * 1000)


DLQ_TAG = OutputTag("dlq", runtime.SINK_ROW)
# Everything a record must not take down: what a handler may raise on hostile input or a bug.
HANDLER_FAILURES = (Exception, RecursionError, MemoryError)


def admit(
    config: ModerationConfig, topic: str, raw: str | None, record_ts: int, key: str | None
) -> admission.Admitted | Refused:
    """One record of an input topic admitted or refused as this job does (time checked for
    keyed input only, signatures against the job's keyring); the peers in benchmarks/ too."""
    return admission.admit(
        topic,
        raw,
        now_ms=config.clock(),
        limits=config.limits,
        fallback_ts=record_ts,
        fallback_key=key,
        time_checked=topic in KEYED_TOPICS,
        signature=lambda name, document: signing.check(name, document, config.keyring),
    )


class Decode(ProcessFunction):
    """Row(topic, key, value, ts, lane[, seq]) -> one admitted DECODED_ROW (keyed input, reports,
    policy and hash-bank records) on the main output, or one DLQ row on the `dlq` side output.
    Only what `operators.admission` admits carries a lane, so only that moves event time."""

    def __init__(self, config: ModerationConfig) -> None:
        self.config = config

    def process_element(self, value: Row, ctx: Any) -> Iterator[Any]:
        lane = (value[4] or "") if len(value) > 4 else ""
        seq = int(value[5] or 0) if len(value) > 5 else 0
        yield self.decode(value[0], value[1], value[2], int(value[3] or 0), lane, seq)

    def decode(
        self, physical: str, key: str | None, raw: str | None, record_ts: int, lane: str, seq: int
    ) -> Row | tuple[OutputTag, Row]:
        """One source record as a DECODED_ROW, or (DLQ_TAG, its DLQ row)."""
        topic = self.config.contract(physical)
        if topic == "policy.rules":
            # Verified and validated where it is applied (PolicyStore); never moves event time.
            ts = admission.event_time(admission.document_of(raw, self.config.limits), record_ts)
            return Row("broadcast", topic, topic, raw or "", ts, seq, "")
        if topic not in KEYED_TOPICS and topic != "hash.bank":
            refused = Refused(
                "schema", f"{topic!r} is not an input of the moderation job", record_ts, key
            )
            return self._letter(physical, raw, refused)
        verdict = admit(self.config, topic, raw, record_ts, key)
        if isinstance(verdict, Refused):
            return self._letter(physical, raw, verdict)
        record, ts = verdict.record, verdict.ts
        if topic == "hash.bank":
            return Row("broadcast", topic, topic, raw, ts, seq, "")
        if topic == "moderation.reports":
            # First through the reporter-side gate (hourly limit, trust), keyed by reporter.
            reporter = record.reporter_id  # type: ignore[attr-defined]
            return Row("report", reporter, topic, record.model_dump_json(), ts, seq, lane)
        version_key = f"{record.content_id}\x1f{record.content_version}"  # type: ignore[attr-defined]
        # Re-evaluation is low priority: it never holds event time back for live input.
        moves_time = "" if topic == "moderation.reevaluate" else lane
        return Row("keyed", version_key, topic, record.model_dump_json(), ts, seq, moves_time)

    def _letter(self, physical: str, raw: str | None, refused: Refused) -> tuple[OutputTag, Row]:
        letter = dead_letter(
            physical,
            refused.key,
            raw,
            refused.message,
            ts=refused.ts,
            error_class=refused.error_class,  # type: ignore[arg-type]
            operator="moderation",
        )
        return DLQ_TAG, Row(
            self.config.physical("moderation.dlq"), refused.key, letter.model_dump_json()
        )


class DecodeBatch(Decode):
    """MiniBatch.java's Row(topics, keys, values, stamps, lanes, seqs) -> one Row of seven
    arrays, the DECODED_ROW of each record in order (Unbatch.java splits it); a refused record
    as route `dlq` (topic: the DLQ topic, value: its letter). One crossing per batch."""

    def process_element(self, value: Row, ctx: Any) -> Iterator[Row]:
        columns: list[list[Any]] = [[] for _ in range(7)]
        for physical, key, raw, record_ts, lane, seq in zip(*value, strict=True):
            item = self.decode(physical, key, raw, int(record_ts or 0), lane or "", int(seq or 0))
            if isinstance(item, tuple):
                letter = item[1]
                item = Row(DLQ_ROUTE, letter[1], letter[0], letter[2], 0, 0, "")
            for column, part in zip(columns, item, strict=True):
                column.append(part)
        yield Row(*columns)


def subtask_index(runtime_context: RuntimeContext) -> int:
    """This parallel instance's index. PyFlink 2.2's thread-mode RuntimeContext still calls
    RuntimeContext.getIndexOfThisSubtask(), which Flink 2 moved to getTaskInfo()."""
    java = getattr(runtime_context, "_runtime_context", None)
    if java is not None:
        return int(java.getTaskInfo().getIndexOfThisSubtask())
    return runtime_context.get_index_of_this_subtask()


def failure_letter(
    config: ModerationConfig, topic: str, key: str | None, raw: str, ts: int, error: BaseException
) -> Row:
    """A DLQ row (`permanent`) for an admitted input whose handling failed: the input is set
    aside and the operator goes on. The message names the failure, never the content."""
    message = f"{type(error).__name__} while handling the record; input set aside"
    print(f"moderation: {message} ({topic}, key {key!r})", file=sys.stderr, flush=True)
    return _permanent(config, topic, key, raw, ts, message)


def _permanent(
    config: ModerationConfig, topic: str, key: str | None, raw: str, ts: int, message: str
) -> Row:
    letter = dead_letter(
        config.physical(topic),
        key,
        raw,
        message,
        ts=ts,
        error_class="permanent",
        operator="moderation",
    )
    return Row(config.physical("moderation.dlq"), key, letter.model_dump_json())


def schema_letters(
    config: ModerationConfig,
    too_new: state_schema.StateTooNew,
    key: str | None,
    inputs: list[tuple[str, str, int]],
    timestamp: int,
) -> Iterator[Row]:
    """The key's stored state has a schema newer than this code (operators/state_schema.py):
    each input (or the timer, when none came) to the DLQ as `permanent`, naming both schemas;
    the state is left untouched and the job goes on (no crash loop on a restore). Each letter
    is keyed by its input's `content_id` where it has one, else by `key`."""
    message = str(too_new)
    print(f"{message} (key {key!r})", file=sys.stderr, flush=True)
    for topic, raw, ts in inputs or [(_TIMERS, "", timestamp)]:
        try:
            content_id = json.loads(raw).get("content_id", key) if raw else key
        except (ValueError, AttributeError):
            content_id = key
        yield _permanent(config, topic, content_id, raw, ts, message)


class PolicyAware(KeyedBroadcastProcessFunction):
    """Shared by the keyed operators: policy and hash banks in broadcast state (rebuilt once per
    change), and keyed input buffered until the watermark passes its ts (the report gate's;
    `Moderate`'s comes ordered from EventTimeOrder.java, but for versions stored before it)."""

    keeps_banks = True  # the report gate decides nothing on hashes: it holds no bank

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
        """The policies, rebuilt when their revision moved; the hash banks, built once from
        broadcast state (one `bank:<hash_type>:<hash>` key per hash) after a start or restore,
        then kept in sync record by record (`process_broadcast_element`)."""
        revision = int(state.get("revision") or 0)
        if self.store is None or revision != self.loaded_revision:
            self.store = PolicyStore.from_records(
                json.loads(state.get("policies") or "[]"),
                trusted=self.config.trusted_policy,
                keyring=self.config.keyring,
            )
            self.loaded_revision = revision
        if self.banks is None:
            self.banks = HashBanks.from_state(state.items()) if self.keeps_banks else HashBanks()
            legacy = state.get("banks") if self.keeps_banks else None
            for entry in json.loads(legacy or "{}").get("entries", []):  # before issue 12
                self.banks.add_entry(
                    entry["hash_type"], entry["hash"], entry["ts"], entry["op"], entry["bank"]
                )
        return self.store, self.banks

    def _current(self, ctx: Any) -> tuple[PolicyStore, HashBanks]:
        """The policies and banks in force. Every subtask applies every broadcast record to its
        own copies itself, so broadcast state is read only once after a start or restore (each
        read is a Java call, on every timer: 0.8 s of a 2,000-version replay)."""
        if self.store is None or self.banks is None:
            return self._load(ctx.get_broadcast_state(BROADCAST_STATE))
        return self.store, self.banks

    def process_broadcast_element(self, value: Row, ctx: Any) -> Iterator[Row]:
        state = ctx.get_broadcast_state(BROADCAST_STATE)
        store, banks = self._load(state)
        topic, raw, ts = value[2], value[3], value[4]
        entry: HashBankEntry | None = None
        try:
            if topic == "policy.rules":
                changed = store.apply(raw, self.key)
            else:
                parsed = parse("hash.bank", raw)
                assert isinstance(parsed, HashBankEntry)
                entry = parsed
                changed = self.keeps_banks and banks.apply(entry)
        except (Rejected, SchemaError) as error:
            # Every subtask of every keyed operator sees each broadcast record: one DLQ row.
            if self.report_rejections and self.subtask == 0:
                letter = dead_letter_for(raw, error, ts=ts, source_topic=topic)
                yield Row(self.config.physical("moderation.dlq"), None, letter.model_dump_json())
            return
        except HANDLER_FAILURES as error:
            if self.report_rejections and self.subtask == 0:
                yield failure_letter(self.config, topic, None, raw, ts, error)
            return
        if not changed:
            return
        if entry is not None:
            # One small value per hash, rewritten alone: loading a bank is linear in its size.
            state.put(
                state_key(entry.hash_type, entry.hash),
                banks.state_entries(entry.hash_type, entry.hash),
            )
            return
        self.loaded_revision += 1
        state.put("revision", str(self.loaded_revision))
        state.put("policies", json.dumps(store.to_records()))

    def process_element(self, value: Row, ctx: Any) -> Iterator[Row]:
        self._hold(int(value[4]), [(value[2], value[3], int(value[5] or 0))], ctx)
        return iter(())

    def _hold(self, ts: int, entries: list[tuple[str, str, int]], ctx: Any) -> None:
        """(topic, raw, seq) entries kept under `ts` in `buffer` until the timer at `ts`."""
        pending = self.buffer.get(ts)
        held = json.loads(pending) if pending else []
        self.buffer.put(ts, json.dumps(held + [list(entry) for entry in entries]))
        ctx.timer_service().register_event_time_timer(ts)

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

    keeps_banks = False

    def __init__(self, config: ModerationConfig) -> None:
        super().__init__(config, report_rejections=False)

    def open(self, runtime_context: RuntimeContext) -> None:
        super().open(runtime_context)
        self.reporter = runtime_context.get_state(ValueStateDescriptor("reporter", Types.STRING()))

    def on_timer(self, timestamp: int, ctx: Any) -> Iterator[Row]:
        store, _ = self._current(ctx)
        raw_state = self.reporter.value()
        try:
            state = state_schema.load(raw_state, "reporter")
        except state_schema.StateTooNew as too_new:
            drained = [(topic, raw, timestamp) for topic, raw, _ in self._drain(timestamp)]
            yield from schema_letters(self.config, too_new, None, drained, timestamp)
            return
        drained = self._drain(timestamp)
        if not drained:
            if state is not None and timestamp >= state["last"] + REPORTER_TTL_MS:
                self.reporter.clear()
            elif state is not None and timestamp >= state.get("timer", 0):
                # One TTL timer at a time: it re-arms when the reporter was active since.
                state["timer"] = state["last"] + REPORTER_TTL_MS
                self.reporter.update(state_schema.dump(state))
                ctx.timer_service().register_event_time_timer(state["timer"])
            return
        policy = store.resolve(self.config.policy_id, timestamp, "").decide
        limits = policy.document.reports if policy is not None else None
        hourly_limit = limits.reporter_hourly_limit if limits is not None else 10
        for topic, raw, seq in drained:
            try:
                record = json.loads(raw)
                state, weight = reports.gate(
                    state, timestamp, hourly_limit, self.config.limits.max_reporter_reports
                )
            except HANDLER_FAILURES as error:
                yield failure_letter(self.config, topic, None, raw, timestamp, error)
                continue
            record["_modstream_weight"] = weight.weight
            record["_modstream_new_reporter"] = weight.new_reporter
            record["_modstream_seq"] = seq
            shard = zlib.crc32(record["reporter_id"].encode("utf-8")) % REPORT_SHARDS
            key = f"{record['content_id']}\x1f{record['content_version']}\x1f{shard}"
            yield Row("keyed", key, topic, json.dumps(record), timestamp, seq, "")
        if state is None:
            return
        if "timer" not in state:
            state["timer"] = state["last"] + REPORTER_TTL_MS
            ctx.timer_service().register_event_time_timer(state["timer"])
        self.reporter.update(state_schema.dump(state))


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
        yield Row("keyed", version_key, REPORT_BATCH, json.dumps(batch), timestamp, 0, "")


_TIMER = -1  # the index under which a failed timer is set aside
_TIMERS = "moderation.timers"  # DLQ source of a failed timer (no input record)


class _InputFailed(Exception):
    def __init__(self, index: int, error: BaseException) -> None:
        super().__init__(index)
        self.index = index
        self.error = error


class Moderate(PolicyAware):
    """Adapter keyed by content version: runs the pure step with the policy and hash banks as
    of each input's ts, and stores the version's state.

    Its input comes from EventTimeOrder.java, in event-time order, one batch per version and
    watermark. The version's own timers (deadlines, expiry, TTL) are kept with its state (`due`):
    one that falls between two inputs of a batch fires between them, as it did when every input
    waited for its own timer, and its Flink timer is deleted (docs/moderation.md, "Time")."""

    def __init__(self, config: ModerationConfig) -> None:
        super().__init__(config, report_rejections=True)

    def open(self, runtime_context: RuntimeContext) -> None:
        super().open(runtime_context)  # `buffer`: input held before issue 14, drained on timers
        self.version = runtime_context.get_state(ValueStateDescriptor("version", Types.STRING()))

    def process_broadcast_element(self, value: Row, ctx: Any) -> Iterator[Row]:
        """As every keyed operator's, its DLQ rows as one batch (this operator's output)."""
        yield from _batch(list(super().process_broadcast_element(value, ctx)))

    def process_element(self, value: Row, ctx: Any) -> Iterator[Row]:
        """A batch Row(topics, values, stamps, seqs) from EventTimeOrder. Out: one Row(topics,
        keys, values) of everything it caused (Unbatch.java splits it). The input of a version
        stored before issue 14 (its timers known to Flink only) waits in `buffer` for a Flink
        timer at its ts, as all input once did."""
        due, raw_state = stored(self.version.value())
        groups = _by_timestamp(value[0], value[1], value[2], value[3])
        if due is None:
            for timestamp, entries in groups:
                self._hold(timestamp, entries, ctx)
            return
        key = str(ctx.get_current_key())
        rows: list[Row] = []
        for timestamp, entries in groups:
            while due and due[0] < timestamp:
                raw_state = self._fire(_pop(due, ctx), [], raw_state, key, ctx, rows, due)
            while due and due[0] == timestamp:
                _pop(due, ctx)
            inputs = self._inputs([(topic, raw) for topic, raw, _ in entries], timestamp)
            raw_state = self._fire(timestamp, inputs, raw_state, key, ctx, rows, due)
        self._keep(due, raw_state)
        yield from _batch(rows)

    def on_timer(self, timestamp: int, ctx: Any) -> Iterator[Row]:
        due, raw_state = stored(self.version.value())
        entries = self._drain(timestamp)  # input stored before issue 14 (see process_element)
        rows: list[Row] = []
        if due is None or timestamp in due or entries:
            if due is not None:
                due = [other for other in due if other != timestamp]
                heapq.heapify(due)
            inputs = self._inputs([(topic, raw) for topic, raw, _ in entries], timestamp)
            key = str(ctx.get_current_key())
            raw_state = self._fire(timestamp, inputs, raw_state, key, ctx, rows, due)
            self._keep(due, raw_state)
        yield from _batch(rows)

    def _keep(self, due: list[int] | None, raw_state: str | None) -> None:
        value = storing(due, raw_state)
        if value is None:
            self.version.clear()
        else:
            self.version.update(value)

    @staticmethod
    def _inputs(entries: list[tuple[str, str]], timestamp: int) -> list[tuple[str, str, int]]:
        """(topic, raw, ts) in processing order: the input at `timestamp`, then the reports of
        any batches, merged in (ts, seq, event_id) order whatever shard they took."""
        direct: list[tuple[str, str, int]] = []
        batched: list[list[Any]] = []
        for topic, raw in entries:
            if topic == REPORT_BATCH:
                batched += json.loads(raw)
            else:
                direct.append((topic, raw, timestamp))
        batched.sort(key=lambda item: (item[0], item[1], item[2]))
        return direct + [("moderation.reports", item[3], item[0]) for item in batched]

    def _fire(
        self,
        timestamp: int,
        inputs: list[tuple[str, str, int]],
        raw_state: str | None,
        key: str,
        ctx: Any,
        rows: list[Row],
        due: list[int] | None,
    ) -> str | None:
        """Apply `inputs` and the version's timers at `timestamp`: rows out into `rows`, new
        timers registered (and kept in `due`); the new stored state returned."""
        store, banks = self._current(ctx)
        content_id = key.split("\x1f", 1)[0]
        try:
            run, set_aside = self.apply(raw_state, inputs, timestamp, store, banks)
        except state_schema.StateTooNew as too_new:
            rows += schema_letters(self.config, too_new, content_id, inputs, timestamp)
            return raw_state
        state, outputs, timers, letters = run
        for timer in set(timers):
            if due is None:  # stored before issue 14: its timers are Flink's alone
                ctx.timer_service().register_event_time_timer(timer)
            elif timer not in due:  # one in `due` has its Flink timer already
                heapq.heappush(due, timer)
                ctx.timer_service().register_event_time_timer(timer)
        rows += self._rows(outputs, letters, timestamp)
        for index, error in sorted(set_aside.items()):
            # The timer's own work (deadlines, expiry, TTL) failing is reported the same way.
            topic, raw, ts = inputs[index] if index != _TIMER else (_TIMERS, "", timestamp)
            rows.append(failure_letter(self.config, topic, content_id, raw, ts, error))
        return None if state is None else state_schema.dump(state)

    def _rows(
        self, outputs: list[moderation.Output], letters: list[Any], timestamp: int
    ) -> Iterator[Row]:
        for topic, key, output in outputs:
            if topic == moderation.SANCTIONS:
                # On the main output under a reserved topic (no side outputs here): routed to
                # the sanctions operator by a Java filter, with the time it was emitted.
                output = {**output, "at": timestamp}
            else:
                topic = self.config.physical(topic)
            yield Row(topic, key, jsonio.dumps(output))
        for topic, content_id, error_class, message, raw, ts in letters:
            letter = dead_letter(
                self.config.physical(topic),
                content_id,
                raw,
                message,
                ts=ts,
                error_class=error_class,
                operator="moderation",
            )
            yield Row(self.config.physical("moderation.dlq"), content_id, letter.model_dump_json())

    def apply(
        self,
        raw_state: str | None,
        inputs: list[tuple[str, str, int]],
        timestamp: int,
        store: PolicyStore,
        banks: HashBanks,
    ) -> tuple[tuple[Any, list[moderation.Output], list[int], list[Any]], dict[int, BaseException]]:
        """Apply `inputs` and the timer at `timestamp` to the stored state: (state, outputs,
        timers, letters) and the inputs set aside. An input whose step fails is set aside (DLQ
        `permanent`) and the batch runs again from the stored state without it, so a
        half-applied input never reaches state or output. Pure: the peers in benchmarks/ run
        it too."""
        set_aside: dict[int, BaseException] = {}
        while True:
            try:
                return self._run(raw_state, inputs, set_aside, timestamp, store, banks), set_aside
            except _InputFailed as failed:
                set_aside[failed.index] = failed.error

    def _run(
        self,
        raw_state: str | None,
        inputs: list[tuple[str, str, int]],
        set_aside: dict[int, BaseException],
        timestamp: int,
        store: PolicyStore,
        banks: HashBanks,
    ) -> tuple[Any, list[moderation.Output], list[int], list[Any]]:
        """Apply `inputs` (but those set aside) and the timer to the stored state."""
        state = state_schema.load(raw_state, "version")
        outputs: list[moderation.Output] = []
        letters: list[tuple[str, str | None, str, str, str, int]] = []
        timers: list[int] = []
        contexts: dict[tuple[Any, ...], moderation.Context] = {}
        for index, (topic, raw, ts) in enumerate(inputs):
            if index in set_aside:
                continue
            try:
                result, content_id = self._step(state, topic, raw, ts, store, banks, contexts)
            except HANDLER_FAILURES as error:
                raise _InputFailed(index, error) from None
            state = result.state
            outputs += result.outputs
            timers += result.timers
            letters += [
                (topic, content_id, error_class, message, raw, ts)
                for error_class, message in result.dead_letters
            ]
        if state is not None and _TIMER not in set_aside:
            try:
                content = state.get("content") or {}
                context = self._context(store, banks, state["cid"], timestamp, content, contexts)
                result = moderation.on_timer(state, timestamp, context)
            except HANDLER_FAILURES as error:
                raise _InputFailed(_TIMER, error) from None
            state = result.state
            outputs += result.outputs
            timers += result.timers
        return state, outputs, timers, letters

    def _step(
        self,
        state: Any,
        topic: str,
        raw: str,
        ts: int,
        store: PolicyStore,
        banks: HashBanks,
        contexts: dict[tuple[Any, ...], moderation.Context],
    ) -> tuple[moderation.StepResult, str]:
        parsed: Any = (  # admitted by Decode (or made by hash_retro), written by this job
            RetroRecord.from_dict(json.loads(raw)) if topic == RETRO else parse_own(topic, raw)
        )
        hashes = (state or {}).get("content") or (
            {"sha256": parsed.sha256, "phash": parsed.phash}
            if topic == "content.versions" and parsed.type == "upsert"
            else {}
        )
        context = self._context(store, banks, parsed.content_id, ts, hashes, contexts)
        if topic == "moderation.reports":
            weights = json.loads(raw)
            context = dataclasses.replace(
                context,
                report=ReportWeight(
                    float(weights.get("_modstream_weight", 1.0)),
                    bool(weights.get("_modstream_new_reporter")),
                ),
            )
        return moderation.step(state, topic, parsed, ts, context), parsed.content_id

    def _context(
        self,
        store: PolicyStore,
        banks: HashBanks,
        content_id: str,
        ts: int,
        hashes: dict[str, Any],
        contexts: dict[tuple[Any, ...], moderation.Context],
    ) -> moderation.Context:
        """The policies and the content's hash-bank matches as of event time `ts`: made once per
        firing for each (ts, hashes) in `contexts`, so the inputs of one firing and its timer
        share it (the store and banks do not change during a firing)."""
        key = (content_id, ts, hashes.get("sha256"), hashes.get("phash"))
        known = contexts.get(key)
        if known is not None:
            return known
        contexts[key] = self._resolve(store, banks, content_id, ts, hashes)
        return contexts[key]

    def _resolve(
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
        return moderation.Context(
            resolution,
            matches,
            limits=self.config.limits,
            clock_ms=self.config.clock() if self.config.wall_clock else None,
            live_window_ms=self.config.live_window_ms,
            evidence_grace_ms=self.config.evidence_grace_ms,
            state_ttl_ms=self.config.state_ttl_ms,
            review_retention_ms=self.config.review_retention_ms,
        )


def stored(value: str | None) -> tuple[list[int] | None, str | None]:
    """Moderate's keyed value as (due, state JSON). Since issue 14 it is the version's pending
    timers as a JSON list, a newline, then its state (or nothing once retired), one value read
    and written once per batch; before, the state alone (a JSON object): due is then None."""
    if value is None:
        return [], None
    if value.startswith("{"):
        return None, value
    head, _, state = value.partition("\n")
    return json.loads(head), state or None


def storing(due: list[int] | None, state: str | None) -> str | None:
    """The inverse of `stored`; None when nothing is left to keep (clear the value)."""
    if due is None:
        return state
    if not due and state is None:
        return None
    return json.dumps(sorted(due), separators=(",", ":")) + "\n" + (state or "")


def _batch(rows: list[Row]) -> Iterator[Row]:
    """Rows as one Row(topics, keys, values): one crossing back to Java however many."""
    if rows:
        yield Row([row[0] for row in rows], [row[1] for row in rows], [row[2] for row in rows])


Group = tuple[int, list[tuple[str, str, int]]]  # ts, its (topic, value, seq) in order


def _by_timestamp(
    topics: list[str], values: list[str], stamps: list[int], seqs: list[int]
) -> list[Group]:
    """A batch's records grouped by ts, in the batch's order (ts ascending)."""
    groups: list[Group] = []
    for topic, raw, ts, seq in zip(topics, values, stamps, seqs, strict=True):
        if not groups or groups[-1][0] != ts:
            groups.append((int(ts), []))
        groups[-1][1].append((topic, raw, int(seq or 0)))
    return groups


def _pop(due: list[int], ctx: Any) -> int:
    """The version's next timer, fired between a batch's inputs: its Flink timer is deleted."""
    timer = heapq.heappop(due)
    ctx.timer_service().delete_event_time_timer(timer)
    return timer


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
        pending = self.buffer.get(timestamp)
        user_id = str(ctx.get_current_key())
        try:
            state = state_schema.load(raw_state, "account")
        except state_schema.StateTooNew as too_new:
            if pending:
                self.buffer.remove(timestamp)
            decisions = [
                ("moderation.decisions", json.dumps(entry["decision"]), timestamp)
                for entry in json.loads(pending or "[]")
            ]
            yield from schema_letters(self.config, too_new, user_id, decisions, timestamp)
            return
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
                before = json.dumps(state)
                try:
                    result = sanctions.on_decision(
                        state, user_id, entry["decision"], entry["strikes"]
                    )
                except HANDLER_FAILURES as error:
                    state = json.loads(before)
                    decision = entry["decision"]
                    yield failure_letter(
                        self.config,
                        "moderation.decisions",
                        decision.get("content_id"),
                        json.dumps(decision),
                        timestamp,
                        error,
                    )
                    continue
                state, outputs, timers = result.state, outputs + result.outputs, result.timers
        else:
            try:
                result = sanctions.on_timer(state, timestamp)
                state, timers = result.state, result.timers
            except HANDLER_FAILURES as error:
                yield failure_letter(self.config, _TIMERS, user_id, "", timestamp, error)
        if state is None:
            self.account.clear()
        else:
            self.account.update(state_schema.dump(state))
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
) -> None:
    """Wire decode -> event time -> key -> broadcast join -> sink. `source` gives rows
    (topic, key, value, ts, lane[, seq]) of every input topic, keyed and broadcast alike, with
    no watermarks: event time is assigned after decoding, from admitted records only
    (`ValidatedTime`, docs/moderation.md "Time")."""
    decoded = decode(source, config)
    timed = validated_time(by_topic(decoded, DLQ_ROUTE, keep=False, config=config), config)
    dlq = projected(by_topic(decoded, DLQ_ROUTE, keep=True, config=config), (2, 1, 3))
    broadcast = by_topic(timed, "broadcast", keep=True, config=config).broadcast(BROADCAST_STATE)
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
    keyed = by_topic(timed, "keyed", keep=True, config=config).union(
        combined, hash_retro.retro_rows(timed, DECODED_ROW, config.pre_key_parallelism)
    )
    moderated = (
        in_event_time_order(keyed)
        .connect(broadcast)
        .process(Moderate(config), output_type=OUTPUT_BATCH)
        .name("moderate")
        .uid("moderation_moderate")
    )
    decided = unbatched(moderated)
    sanctioned = (
        runtime.keyed_by(by_topic(decided, moderation.SANCTIONS, keep=True), runtime.SINK_ROW)
        .process(Sanctions(config), output_type=runtime.SINK_ROW)
        .name("sanctions")
        .uid("moderation_sanctions")
    )
    sink(by_topic(decided, moderation.SANCTIONS, keep=False).union(dlq, sanctioned))


def decode(source: DataStream, config: ModerationConfig) -> DataStream:
    """Source rows in mini-batches (MiniBatch.java) through DecodeBatch, one DECODED_ROW each
    again (Unbatch.java), at the pre-key parallelism: the order of the input is the order of
    equal-ts records, so nothing reshuffles before the key."""
    flink = get_gateway().jvm.io.modstream.flink
    batches = DataStream(
        source._j_data_stream.transform(
            "mini-batch",
            flink.MiniBatch.outputType(),
            flink.MiniBatch(DECODE_BATCH, DECODE_WAIT_MS),
        ).uid("moderation_decode_batches")
    )
    decoded = (
        batches.process(DecodeBatch(config), output_type=DECODED_BATCH)
        .name("decode")
        .uid("moderation_decode")
    )
    j_rows = decoded._j_data_stream.flatMap(flink.Unbatch(), DECODED_ROW.get_java_type_info())
    rows = DataStream(j_rows.name("decoded"))
    if config.pre_key_parallelism:
        for stream in (batches, decoded, rows):
            stream.set_parallelism(config.pre_key_parallelism)
    return rows


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


def validated_time(decoded: DataStream, config: ModerationConfig) -> DataStream:
    """Timestamps and watermarks from admitted records only, per lane (ValidatedTime.java)."""
    gateway = get_gateway()
    jvm = gateway.jvm
    lanes = gateway.new_array(jvm.String, len(config.expected_lanes))
    for index, lane in enumerate(config.expected_lanes):
        lanes[index] = lane
    strategy = jvm.io.modstream.flink.ValidatedTime(
        config.out_of_orderness_ms,
        config.idleness_ms,
        config.backfill_idleness_ms,
        config.live_window_ms,
        config.wall_clock,
        lanes,
        config.drained_after_ms,
        *config.end_offsets,
    )
    timed = decoded._j_data_stream.assignTimestampsAndWatermarks(strategy)
    timed.name("validated event time").uid("moderation_validated_time")
    if config.pre_key_parallelism:
        timed.setParallelism(config.pre_key_parallelism)
    return DataStream(timed)


def expected_lanes(job: runtime.JobConfig) -> tuple[str, ...]:
    """Every partition of the inputs that move event time (not `moderation.reevaluate`), when
    one event-time instance reads them all: each holds event time until its first record after
    a start or restore (ValidatedTime). With parallel readers an instance reads only the
    partitions its reader was given, which is not known here: none (docs/moderation.md, Time)."""
    if job.parallelism != 1:
        print(
            "moderation: parallelism > 1: partitions are not expected before their first record "
            "(docs/moderation.md, 'Time')",
            file=sys.stderr,
            flush=True,
        )
        return ()
    names = [job.topic(name) for name in KEYED_TOPICS if name != "moderation.reevaluate"]
    counts = topics.partition_counts(job.bootstrap_servers, names)
    return tuple(
        f"{name}#{partition}" for name in names for partition in range(counts.get(name, 0))
    )


def options() -> argparse.ArgumentParser:
    """The job's options: the common ones (jobs/runtime.py), policy, time and retention."""
    parser = runtime.job_parser("moderation", __doc__)
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
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the moderation job on Kafka (the local stack by default) until SIGTERM."""
    args = options().parse_args(argv)
    settings = Settings.from_env()
    job = runtime.job_config("moderation", args, settings, state_schema=state_schema.STATE_SCHEMA)
    trusted = yaml.safe_load(args.policy.read_text(encoding="utf-8")) if args.policy else None
    config = ModerationConfig(
        policy_id=args.policy_id,
        out_of_orderness_ms=args.out_of_orderness_ms,
        idleness_ms=args.idleness_ms,
        live_window_ms=args.live_window_ms,
        backfill_idleness_ms=args.backfill_idleness_ms,
        drained_after_ms=args.drained_after_ms,
        state_ttl_ms=args.state_ttl_ms,
        review_retention_ms=args.review_retention_ms,
        evidence_grace_ms=args.evidence_grace_ms,
        limits=Limits.from_env(),
        keyring=Keyring.from_env(),
        policy_key=os.environ.get("MODSTREAM_POLICY_KEY"),
        trusted_policy=trusted,
        topics=job.topics,
    )
    config = dataclasses.replace(
        config,
        expected_lanes=expected_lanes(job),
        end_offsets=(job.bootstrap_servers, job.group_id),
    )
    env = runtime.create_env(job, settings)
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
