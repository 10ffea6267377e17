"""hash_retro: bank additions reach versions decided before them (logic in
modstream/moderation/rules/retro.py).

PyFlink cannot visit every version's keyed state from a broadcast element, so this wiring
joins by hash instead: uploads (`content.versions` upserts) and `hash.bank` records of the
moderation job's decoded, time-stamped stream fan out to their hash keys (`sha256:<hex>`,
`phash:<band>:<bits>`), meet there in `RetroJoin`, and each (version, bank addition) pair
becomes one internal `moderation.retro` row for the moderation operator's keyed input: kind
"keyed", keyed to the version, at the addition's ts, lane "" (it never moves event time).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from typing import Any

from pyflink.common import Row, Types
from pyflink.datastream import DataStream
from pyflink.datastream.functions import KeyedProcessFunction, RuntimeContext
from pyflink.datastream.state import ValueStateDescriptor
from pyflink.java_gateway import get_gateway

from modstream.jobs import runtime
from modstream.jobs.moderation import python_calls
from modstream.jobs.moderation.config import HASH_ROUTE
from modstream.jobs.moderation.java import RETRO_RESTORED, RETRO_UID, batched_by_key
from modstream.moderation import state_schema
from modstream.moderation.rules import retro
from modstream.moderation.step import RETRO

# Row(hash key, kind "upload" | "bank", payload JSON, ts, seq)
HASH_ROW = Types.ROW([Types.STRING(), Types.STRING(), Types.STRING(), Types.LONG(), Types.LONG()])


def fan_out(value: Row) -> Iterator[Row]:
    """An upload or a bank record, once per hash key it belongs to; anything else, nothing."""
    for entry in hash_entries(value[0], value[2], value[3], int(value[4]), int(value[5] or 0)):
        yield Row(*entry)


def hash_entries(
    kind: str, topic: str, raw: str, ts: int, seq: int, admitted: Any = None
) -> Iterator[tuple[str, str, str, int, int]]:
    """`fan_out` of a decoded row's route, topic, value, ts and seq, as plain tuples (hash key,
    "upload" | "bank", payload JSON, ts, seq): what BatchedDecode answers with, no Row made.
    `admitted`: the record Decode admitted as `raw`, whose fields an upload's are read from
    instead of parsing `raw` again (the same values: `raw` is its JSON)."""
    if kind == "keyed" and topic == "content.versions":
        record = json.loads(raw) if admitted is None else _upload_fields(admitted)
        if record.get("type") != "upsert":
            return
        upload = {
            "content_id": record["content_id"],
            "content_version": record["content_version"],
            "ts": ts,
            "sha256": record.get("sha256"),
            "phash": record.get("phash"),
        }
        payload = json.dumps(upload, separators=(",", ":"))
        for key in retro.registration_keys(upload["sha256"], upload["phash"]):
            yield key, "upload", payload, ts, seq
    elif kind == "broadcast" and topic == "hash.bank":
        record = json.loads(raw)  # admitted (validated) by Decode
        entry = {name: record[name] for name in ("event_id", "bank", "hash_type", "hash", "op")}
        entry["ts"] = ts
        payload = json.dumps(entry, separators=(",", ":"))
        for key in retro.bank_keys(entry["hash_type"], entry["hash"]):
            yield key, "bank", payload, ts, seq


def _upload_fields(record: Any) -> dict[str, Any]:
    """The fields of an admitted content.versions record (ContentUpsert or ContentDelete) an
    upload's registration reads, as its JSON would give them."""
    return {
        "type": record.type,
        "content_id": record.content_id,
        "content_version": record.content_version,
        "sha256": getattr(record, "sha256", None),
        "phash": getattr(record, "phash", None),
    }


@python_calls.counted
class RetroJoin(KeyedProcessFunction):  # type: ignore[misc]  # PyFlink's classes are untyped
    """Adapter keyed by hash key: loads the key's state, calls the pure join, stores the
    result, arms its timer and emits `moderation.retro` rows for the version operator."""

    def open(self, runtime_context: RuntimeContext) -> None:
        self.joined = runtime_context.get_state(ValueStateDescriptor("retro", Types.STRING()))

    def process_element(self, value: Row, ctx: Any) -> Iterator[Row]:
        key, kind, payload, seq = value[0], value[1], value[2], int(value[4] or 0)
        result = joined(self.joined.value(), key, kind, payload)
        if result is not None:
            yield from self._store(result, ctx, seq)

    def on_timer(self, timestamp: int, ctx: Any) -> Iterator[Row]:
        result = expired(self.joined.value(), str(ctx.get_current_key()), timestamp)
        if result is not None:
            yield from self._store(result, ctx, 0)

    def _store(self, result: retro.RetroResult, ctx: Any, seq: int) -> Iterator[Row]:
        if result.state is None:
            self.joined.clear()
        else:
            self.joined.update(state_schema.dump(result.state))
        for timer in result.timers:
            ctx.timer_service().register_event_time_timer(timer)
        for record in result.outputs:
            yield Row(*retro_fields(record, seq))


def joined(
    stored: str | bytes | None, key: str, kind: str, payload: str
) -> retro.RetroResult | None:
    """An upload's or a bank record's registration at a hash key over the key's stored state
    (None: a state too new for this code, left as it is); the batched engine's too."""
    try:
        state = state_schema.load(stored, "retro")
    except state_schema.StateTooNew as too_new:
        _refused(too_new, key)
        return None
    if kind == "upload":
        return retro.on_registration(state, key, json.loads(payload))
    return retro.on_bank(state, key, json.loads(payload))


def expired(stored: str | bytes | None, key: str, timestamp: int) -> retro.RetroResult | None:
    """The hash key's timer at `timestamp` over its stored state (None: a state too new)."""
    try:
        state = state_schema.load(stored, "retro")
    except state_schema.StateTooNew as too_new:
        _refused(too_new, key)
        return None
    return retro.on_timer(state, timestamp)


def retro_fields(record: dict[str, Any], seq: int) -> tuple[Any, ...]:
    """The fields of a `moderation.retro` row: route "keyed", the version's key, at the bank
    addition's ts, with the seq of the input that made the pair, lane "" (a DECODED_ROW)."""
    raw = json.dumps(record, separators=(",", ":"))
    return ("keyed", retro.version_key(record), RETRO, raw, record["ts"], seq, "")


def _refused(too_new: state_schema.StateTooNew, key: str) -> None:
    """A hash key's state of a newer schema than this code: left as it is, and said (this
    operator has no DLQ output; the bank record stays in `hash.bank`, and a version it would
    re-decide can be re-decided by `moderation.reevaluate`)."""
    print(f"{too_new} (retro join, key {key!r})", file=sys.stderr, flush=True)


def retro_rows(timed: DataStream, decoded_row: Any, pre_key_parallelism: int | None) -> DataStream:
    """From the moderation job's decoded, time-stamped stream (rows of `decoded_row`), the
    `moderation.retro` rows of the same shape, to union into the version operator's input."""
    gateway = get_gateway()
    pairs = gateway.new_array(gateway.jvm.String, 2)
    pairs[0], pairs[1] = "keyed/content.versions", "broadcast/hash.bank"
    # Only uploads and bank records reach Python: a Java filter first (the rest is most input).
    j_relevant = timed._j_data_stream.filter(gateway.jvm.io.modstream.flink.RouteFilter(pairs))
    relevant = DataStream(j_relevant.name("retro input"))
    hashed = (
        relevant.flat_map(fan_out, output_type=HASH_ROW)
        .name("retro_fan_out")
        .uid("moderation_retro_fan_out")
    )
    if pre_key_parallelism:
        relevant.set_parallelism(pre_key_parallelism)
        hashed = hashed.set_parallelism(pre_key_parallelism)
    return (
        runtime.keyed_by(hashed, HASH_ROW, field=0)
        .process(RetroJoin(), output_type=decoded_row)
        .name("retro_join")
        .uid("moderation_retro_join")
    )


def batched_retro_rows(timed: DataStream, decoded_row: Any, config: Any) -> DataStream:
    """`--engine batched`: the `moderation.retro` rows from decode's hash-key rows (route
    `hash`, picked in Java), joined by BatchedVersions.java with the Python side
    modstream/jobs/moderation/retro_batch.py, one call per flush; no broadcast input, and its rows
    are `decoded_row`s as they come from Python (no conversion, no call)."""
    gateway = get_gateway()
    flink = gateway.jvm.io.modstream.flink
    hashed = timed._j_data_stream.filter(flink.TopicFilter(HASH_ROUTE, True)).name("retro input")
    if config.pre_key_parallelism:
        hashed.setParallelism(config.pre_key_parallelism)
    j_keyed = hashed.keyBy(flink.FieldKey.selector(1), flink.FieldKey.keyType())
    return batched_by_key(
        j_keyed,
        config,
        RETRO_UID,
        "retro_join (batched)",
        "modstream.jobs.moderation.retro_batch:BatchedRetro",
        decoded_row.get_java_type_info(),
        restored=(RETRO_RESTORED, None),
    )
