"""moderation: decoding and admission, before event time. Each source record is admitted
(modstream/moderation/admission.py) and routed as one DECODED_ROW (keyed input, reports, policy and
hash-bank records) or refused to the DLQ; only what is admitted carries a lane, so only that
moves event time, and only uploads and evidence hold it (modstream/moderation/admission.py
`time_lane`; ValidatedTime, docs/moderation.md "Time")."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import cloudpickle
import msgspec
from pyflink.common import Row
from pyflink.datastream import OutputTag
from pyflink.datastream.functions import ProcessFunction, RuntimeContext

from modstream.contract import dead_letter
from modstream.contract.detector import DetectorResult
from modstream.contract.signals import HashBankEntry, hash_bank_key, hash_bank_key_problem
from modstream.jobs.metrics import NO_METRICS, OperatorMetrics
from modstream.jobs.moderation.batch import RecordedMetrics
from modstream.jobs.moderation.config import DLQ_ROUTE, ENGINE_BATCHED, HASH_ROUTE, ModerationConfig
from modstream.jobs.moderation.drift_metrics import ScoreCounts
from modstream.jobs.moderation.hash_retro import hash_entries
from modstream.jobs.moderation.letters import DLQ_TAG
from modstream.moderation import admission
from modstream.moderation.admission import Refused, time_lane
from modstream.moderation.step import KEYED_TOPICS
from modstream.trust import signing

_PACK = msgspec.msgpack.Encoder().encode
_UNPACK = msgspec.msgpack.Decoder().decode

# A null value on hash.bank: on a compacted topic, a tombstone would erase the (bank, hash)'s
# record at the next compaction; it is no removal (issue 27).
TOMBSTONE = (
    "hash.bank: a null value (tombstone) removes nothing; a removal is an op=remove record, "
    "signed like an add"
)


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
        signature=lambda name, document, text: signing.check(name, document, config.keyring, text),
    )


class Decode(ProcessFunction):  # type: ignore[misc]  # PyFlink's classes are untyped
    """Row(topic, key, value, ts, lane[, seq]) -> one admitted DECODED_ROW (keyed input, reports,
    policy and hash-bank records) on the main output, or one DLQ row on the `dlq` side output.
    Only what `modstream.moderation.admission` admits carries a lane, so only that moves event
    time."""

    metrics = NO_METRICS  # until open (unit tests call `decode` without it)
    scores = ScoreCounts(NO_METRICS)

    def __init__(self, config: ModerationConfig) -> None:
        self.config = config

    def open(self, runtime_context: RuntimeContext) -> None:
        self.metrics = OperatorMetrics(runtime_context, "decode")
        self.scores = ScoreCounts(self.metrics)

    def process_element(self, value: Row, ctx: Any) -> Iterator[Any]:
        lane = (value[4] or "") if len(value) > 4 else ""
        seq = int(value[5] or 0) if len(value) > 5 else 0
        yield self.decode(value[0], value[1], value[2], int(value[3] or 0), lane, seq)

    def decode(
        self, physical: str, key: str | None, raw: str | None, record_ts: int, lane: str, seq: int
    ) -> Row | tuple[OutputTag, Row]:
        """One source record as a DECODED_ROW, or (DLQ_TAG, its DLQ row)."""
        item = self.fields(physical, key, raw, record_ts, lane, seq)
        if item[0] is DLQ_TAG:
            return DLQ_TAG, Row(*item[1])
        return Row(*item[:7])

    def fields(
        self, physical: str, key: str | None, raw: str | None, record_ts: int, lane: str, seq: int
    ) -> tuple[Any, ...]:
        """`decode` without PyFlink's Row (a Python `__init__` per record, which the batched
        engine only took apart again): (route, key, topic, value, ts, seq, lane, the admitted
        record or None), or (DLQ_TAG, (DLQ topic, key, letter))."""
        topic = self.config.contract(physical)
        if topic == "policy.rules":
            # Verified and validated where it is applied (PolicyStore); never moves event time.
            ts = admission.event_time(admission.document_of(raw, self.config.limits), record_ts)
            return ("broadcast", topic, topic, raw or "", ts, seq, "", None)
        if topic not in KEYED_TOPICS and topic not in ("hash.bank", "review.grants"):
            refused = Refused(
                "schema", f"{topic!r} is not an input of the moderation job", record_ts, key
            )
            return self._letter(physical, raw, refused)
        if topic == "hash.bank" and raw is None:
            self.metrics.inc("bank_refused", reason="tombstone")
            return self._letter(physical, raw, Refused("schema", TOMBSTONE, record_ts, key))
        verdict = admit(self.config, topic, raw, record_ts, key)
        if isinstance(verdict, Refused):
            return self._letter(physical, raw, verdict)
        record, ts = verdict.record, verdict.ts
        if isinstance(record, HashBankEntry):
            problem = hash_bank_key_problem(key, record)
            if problem is not None:
                # Keyed as the contract keys it, so `dlq replay` sends it back under that key.
                self.metrics.inc("bank_refused", reason="key")
                right = hash_bank_key(record.bank, record.hash_type, record.hash)
                return self._letter(physical, raw, Refused("schema", problem, ts, right))
            return ("broadcast", topic, topic, raw, ts, seq, "", record)
        if topic == "review.grants":
            return ("broadcast", topic, topic, raw, ts, seq, "", record)
        if topic == "moderation.reports":
            # First through the reporter-side gate (hourly limit, trust), keyed by reporter.
            reporter = record.reporter_id  # type: ignore[attr-defined]
            value = record.model_dump_json()
            return ("report", reporter, topic, value, ts, seq, time_lane(topic, lane), record)
        if isinstance(record, DetectorResult):  # its scores' buckets, for score drift
            self.scores.count(record.detector, record.model_version, record.status, record.scores)
        version_key = f"{record.content_id}\x1f{record.content_version}"  # type: ignore[attr-defined]
        # Only uploads and evidence hold event time (modstream/moderation/admission.py, time_lane).
        value = record.model_dump_json()
        return ("keyed", version_key, topic, value, ts, seq, time_lane(topic, lane), record)

    def _letter(
        self, physical: str, raw: str | None, refused: Refused
    ) -> tuple[OutputTag, tuple[str, str | None, str]]:
        self.metrics.inc("dlq", error_class=refused.error_class)
        letter = dead_letter(
            physical,
            refused.key,
            raw,
            refused.message,
            ts=refused.ts,
            error_class=refused.error_class,  # type: ignore[arg-type]
            operator="moderation",
        )
        return DLQ_TAG, (
            self.config.physical("moderation.dlq"),
            refused.key,
            letter.model_dump_json(),
        )


class BatchedDecode:
    """BatchedDecode.java's Python side (issue 26): the source rows of one mini-batch (up to
    DECODE_BATCH, at most DECODE_WAIT_MS after the first) in one call, in and out as one
    MessagePack payload each, as BatchedVersions.java calls the version operator. Before, PyFlink's
    embedded operator converted each batch's six arrays into Python and the seven arrays out
    back into Java, field by field in Python: about 30 µs per record in the job's decode thread
    beyond what decoding costs in process (docs/BENCHMARKS.md, stop 45). Counters are summed per
    call and applied by Java, as the version operator's are (`RecordedMetrics`)."""

    def __init__(self, pickled_config: bytes, _subtask: int) -> None:
        config: ModerationConfig = cloudpickle.loads(pickled_config)
        self.metrics = RecordedMetrics("decode")
        self.decoder = Decode(config)
        self.decoder.metrics = self.metrics
        self.decoder.scores = ScoreCounts(self.metrics)

    def decode(self, payload: bytes) -> bytes:
        """[[topic, key, value, record ts, lane, seq], ...] -> [rows, metric updates], the rows
        as `decoded` makes them."""
        rows = decoded(self.decoder, _UNPACK(payload))
        return _PACK([rows, self.metrics.drain()])


def decoded(decoder: Decode, records: Iterable[Sequence[Any]]) -> list[list[Any]]:
    """Each source record (topic, key, value, record ts, lane, seq) as its DECODED_ROW [route,
    key, topic, value, ts, seq, lane], in order; a refused one as route DLQ_ROUTE (topic: the DLQ
    topic, value: its letter). With the batched engine an upload or bank record is followed by
    its hash-key rows (route HASH_ROUTE, the retro join's input, modstream/jobs/moderation/
    hash_retro.py `hash_entries`)."""
    hash_rows = decoder.config.engine == ENGINE_BATCHED
    rows: list[list[Any]] = []
    for physical, key, raw, record_ts, lane, seq in records:
        item = decoder.fields(physical, key, raw, int(record_ts or 0), lane or "", int(seq or 0))
        if item[0] is DLQ_TAG:
            letter = item[1]
            rows.append([DLQ_ROUTE, letter[1], letter[0], letter[2], 0, 0, ""])
            continue
        route, key, topic, value, ts, seq, lane, record = item
        rows.append([route, key, topic, value, ts, seq, lane])
        if hash_rows:
            entries = hash_entries(route, topic, value, ts, seq, record)
            rows.extend([HASH_ROUTE, *entry, ""] for entry in entries)
    return rows
