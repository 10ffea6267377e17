"""The moderation job's own adapters wired as `modstream.jobs.moderation.job.build` wires them,
in-process with small fakes of Flink's state, timers and contexts: no JVM, so thousands of fuzzed
records go through the real decode, broadcast, report-gate, moderate and sanctions code in seconds.

One `Pipeline` is one fresh job: the trusted global policy, per-key state, and event-time
timers fired in order up to a horizon (the watermark after the input).
"""

from __future__ import annotations

import contextlib
import heapq
import json
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import yaml
from pyflink.common import Row

from modstream.contract.records import contract_key
from modstream.core.limits import EARLIEST_TS
from modstream.jobs.moderation.config import ModerationConfig
from modstream.jobs.moderation.decode import Decode
from modstream.jobs.moderation.letters import DLQ_TAG
from modstream.jobs.moderation.moderate import Moderate
from modstream.jobs.moderation.reports import ReportCombine, ReportGate
from modstream.jobs.moderation.sanctions import Sanctions
from modstream.moderation import step as moderation
from modstream.review.queue import grant_record
from modstream.testing.policies import GLOBAL_YAML, KEY
from modstream.testing.records import TEST_KEYRING, upload
from modstream.trust.signing import signed

DLQ = "moderation.dlq"
POLICY = yaml.safe_load(GLOBAL_YAML.read_text())
# Past every deadline, provisional expiry and state TTL of the input (30 days).
HORIZON_MS = 31 * 86_400_000


class _Keys:
    """The key Flink has set for the adapter call in progress."""

    def __init__(self) -> None:
        self.current: Any = None


class _ValueState:
    def __init__(self, keys: _Keys) -> None:
        self.keys = keys
        self.values: dict[Any, Any] = {}

    def value(self) -> Any:
        return self.values.get(self.keys.current)

    def update(self, value: Any) -> None:
        self.values[self.keys.current] = value

    def clear(self) -> None:
        self.values.pop(self.keys.current, None)


class _MapState:
    def __init__(self, keys: _Keys) -> None:
        self._keys = keys
        self.maps: dict[Any, dict[Any, Any]] = {}

    def _map(self) -> dict[Any, Any]:
        return self.maps.setdefault(self._keys.current, {})

    def get(self, key: Any) -> Any:
        return self._map().get(key)

    def put(self, key: Any, value: Any) -> None:
        self._map()[key] = value

    def remove(self, key: Any) -> None:
        self._map().pop(key, None)

    def contains(self, key: Any) -> bool:
        return key in self._map()

    def items(self) -> Iterable[tuple[Any, Any]]:
        return list(self._map().items())

    def keys(self) -> Iterable[Any]:
        return list(self._map())

    def values(self) -> Iterable[Any]:
        return list(self._map().values())

    def is_empty(self) -> bool:
        return not self._map()

    def clear(self) -> None:
        self._map().clear()


class _BroadcastState(dict[Any, Any]):
    def put(self, key: Any, value: Any) -> None:
        self[key] = value

    def remove(self, key: Any) -> None:
        self.pop(key, None)

    def contains(self, key: Any) -> bool:
        return key in self


class _RuntimeContext:
    def __init__(self, keys: _Keys) -> None:
        self.keys = keys

    def get_state(self, descriptor: Any) -> _ValueState:
        return _ValueState(self.keys)

    def get_map_state(self, descriptor: Any) -> _MapState:
        return _MapState(self.keys)

    def get_index_of_this_subtask(self) -> int:
        return 0

    def get_number_of_parallel_subtasks(self) -> int:
        return 1


class _Timers:
    def __init__(self, owner: _Operator) -> None:
        self.owner = owner

    def register_event_time_timer(self, ts: int) -> None:
        self.owner.timers.add((int(ts), self.owner.keys.current))

    def delete_event_time_timer(self, ts: int) -> None:
        self.owner.timers.discard((int(ts), self.owner.keys.current))

    def current_watermark(self) -> int:
        return self.owner.watermark

    def current_processing_time(self) -> int:
        return time.time_ns() // 1_000_000


class _Context:
    def __init__(self, owner: _Operator, timestamp: int | None) -> None:
        self.owner = owner
        self._timestamp = timestamp

    def get_current_key(self) -> Any:
        return self.owner.keys.current

    def timer_service(self) -> _Timers:
        return _Timers(self.owner)

    def get_broadcast_state(self, descriptor: Any) -> _BroadcastState:
        return self.owner.broadcast

    def timestamp(self) -> int | None:
        return self._timestamp


class _Operator:
    """One keyed operator (a single subtask) and its timers."""

    def __init__(self, function: Any) -> None:
        self.function = function
        self.keys = _Keys()
        self.broadcast = _BroadcastState()
        self.timers: set[tuple[int, Any]] = set()
        self.watermark = -(2**63)
        function.open(_RuntimeContext(self.keys))

    def element(self, key: Any, row: Row, timestamp: int) -> list[Any]:
        self.keys.current = key
        return list(self.function.process_element(row, _Context(self, timestamp)) or ())

    def broadcast_element(self, row: Row) -> list[Any]:
        self.keys.current = None
        return list(self.function.process_broadcast_element(row, _Context(self, None)) or ())

    def fire(self, ts: int, key: Any) -> list[Any]:
        self.timers.discard((ts, key))
        self.keys.current = key
        return list(self.function.on_timer(ts, _Context(self, ts)) or ())


class _Order:
    """EventTimeOrder.java as the job runs it: keyed input held until the watermark passes its
    ts, then one batch per key, Row(topics, values, stamps, seqs) by (ts, seq, arrival)."""

    def __init__(self) -> None:
        self.timers: set[tuple[int, Any]] = set()
        self.pending: dict[Any, dict[int, list[tuple[int, int, str, str]]]] = {}
        self.watermark = -(2**63)
        self.target = -(2**63)  # the watermark being advanced to (Java's currentWatermark)
        self.arrivals = 0

    def element(self, key: Any, row: Row, timestamp: int) -> list[Any]:
        self.arrivals += 1
        held = self.pending.setdefault(key, {}).setdefault(int(row[4]), [])
        held.append((int(row[5] or 0), self.arrivals, row[2], row[3]))
        self.timers.add((int(row[4]), key))
        return []

    def fire(self, ts: int, key: Any) -> list[Any]:
        self.timers.discard((ts, key))
        held = self.pending.get(key, {})
        due = sorted(stamp for stamp in held if stamp <= max(self.target, ts))
        topics: list[str] = []
        values: list[str] = []
        stamps: list[int] = []
        seqs: list[int] = []
        for stamp in due:
            for seq, _, topic, value in sorted(held.pop(stamp)):
                topics.append(topic)
                values.append(value)
                stamps.append(stamp)
                seqs.append(seq)
            self.timers.discard((stamp, key))
        return [(key, Row(topics, values, stamps, seqs))] if topics else []


def to_jvm(row: Row) -> None:
    """Every row a Python function emits crosses to the JVM as UTF-8: a string that cannot be
    encoded (a lone surrogate) fails the job there, so it fails the run here."""
    for value in row:
        if isinstance(value, str):
            try:
                value.encode("utf-8")
            except UnicodeEncodeError:
                raise AssertionError(
                    f"a row field cannot cross to the JVM: {value!r:.80}"
                ) from None


def payload_time(text: str | None, fallback: int) -> int:
    """The event time the Kafka source stamps (deploy/flink-ext PayloadTime.of): the first
    top-level integer `ts` within a signed long and not negative, else the record timestamp."""
    if text is None:
        return fallback
    try:
        pairs = json.loads(text, object_pairs_hook=lambda items: items)
    except (ValueError, RecursionError):
        return fallback
    if not isinstance(pairs, list):
        return fallback
    for name, value in pairs if all(isinstance(p, tuple) for p in pairs) else ():
        if name == "ts":
            ok = isinstance(value, int) and not isinstance(value, bool)
            return value if ok and 0 <= value < 2**63 else fallback
    return fallback


@dataclass
class Outcome:
    """What one input did: its DLQ records and every other output, or the exception."""

    letters: list[dict[str, Any]] = field(default_factory=list)
    outputs: list[tuple[str, str | None, dict[str, Any]]] = field(default_factory=list)
    crashed: BaseException | None = None
    # The same job without the input, up to the same event time: what "nothing else changes"
    # compares against (run_one).
    baseline: list[tuple[str, str | None, dict[str, Any]]] = field(default_factory=list)

    @property
    def error_classes(self) -> list[str]:
        return [letter["error_class"] for letter in self.letters]


class Pipeline:
    """A fresh moderation job: decode -> (broadcast | report gate -> combine | keyed) ->
    moderate -> sanctions, as `modstream.jobs.moderation.job.build` wires it, at parallelism 1."""

    def __init__(self, config: ModerationConfig | None = None) -> None:
        self.config = config or ModerationConfig(
            trusted_policy=POLICY, policy_key=KEY.decode("utf-8"), keyring=TEST_KEYRING
        )
        self.decode = Decode(self.config)
        self.gate = _Operator(ReportGate(self.config))
        self.combine = _Operator(ReportCombine())
        self.order = _Order()
        self.moderate = _Operator(Moderate(self.config))
        self.sanctions = _Operator(Sanctions(self.config))
        self.operators: tuple[_Operator | _Order, ...] = (
            self.gate,
            self.combine,
            self.order,
            self.moderate,
            self.sanctions,
        )
        self.watermark = -(2**63)

    def send(self, topic: str, key: str | None, text: str | None, kafka_ts: int) -> Outcome:
        """Deliver one record as the Kafka source would, then advance event time to the
        record's time plus HORIZON_MS (at least), firing every timer due on the way."""
        outcome = Outcome()
        ts = payload_time(text, kafka_ts)
        try:
            row = Row(topic, key, text, ts, f"{topic}#0")
            decoded = list(self.decode.process_element(row, _Context(self.moderate, ts)) or ())
            for item in decoded:
                self._route_decoded(item, outcome)
            self.advance(max(ts, self.watermark) + HORIZON_MS, outcome)
        except Exception as error:  # a crash is what the census counts; never hidden
            outcome.crashed = error
        return outcome

    def prepare(self, text: str, key: str, ts: int) -> Outcome:
        """An upload up to its own time only (not the horizon): the setup before an input."""
        outcome = Outcome()
        row = Row("content.versions", key, text, ts, "content.versions#0")
        for item in self.decode.process_element(row, _Context(self.moderate, ts)):
            self._route_decoded(item, outcome)
        self.advance(ts, outcome)
        return outcome

    def grant(self, reviewer_id: str) -> None:
        """`reviewer_id` granted every queue from 2000 on by the suite's lead, as review.grants
        delivers it: the reviewer's reviews then meet the job's grant check as a granted
        reviewer's do (modstream/review/access.py)."""
        record = signed(
            "review.grants", grant_record(reviewer_id, ["*"], "lead-1", EARLIEST_TS), TEST_KEYRING
        )
        outcome = Outcome()
        row = Row("review.grants", reviewer_id, json.dumps(record), EARLIEST_TS, "")
        for item in self.decode.process_element(row, _Context(self.moderate, EARLIEST_TS)):
            self._route_decoded(item, outcome)
        if outcome.letters:
            raise AssertionError(f"the grant of {reviewer_id!r} was refused: {outcome.letters}")

    def advance(self, watermark: int, outcome: Outcome) -> None:
        """Fire timers in event-time order up to `watermark`, as a rising watermark does."""
        self.order.target = watermark
        while True:
            due = [
                (ts, index, key)
                for index, operator in enumerate(self.operators)
                for ts, key in operator.timers
                if ts <= watermark
            ]
            if not due:
                break
            ts, index, key = heapq.nsmallest(1, due, key=lambda item: (item[0], item[1]))[0]
            operator = self.operators[index]
            operator.watermark = ts
            self._route(operator, operator.fire(ts, key), outcome)
        self.watermark = max(self.watermark, watermark)
        for operator in self.operators:
            operator.watermark = self.watermark

    def _route_decoded(self, item: Any, outcome: Outcome) -> None:
        """Decode's outputs: DLQ side output, or Row(kind, key, topic, value, ts, seq, lane)."""
        to_jvm(item[1] if isinstance(item, tuple) else item)
        if isinstance(item, tuple):
            if item[0] is not DLQ_TAG:
                raise AssertionError(f"decode: unexpected side output {item[0]!r}")
            outcome.letters.append(json.loads(item[1][2]))
        elif item[0] == "broadcast":
            for operator in (self.gate, self.moderate):
                self._route(operator, operator.broadcast_element(item), outcome)
        elif item[0] == "report":
            self._route(self.gate, self.gate.element(item[1], item, item[4]), outcome)
        elif item[0] == "keyed":
            self.order.element(item[1], item, item[4])
        else:
            raise AssertionError(f"decode: unexpected row kind {item[0]!r}")

    def _route(self, source: _Operator | _Order, rows: list[Any], outcome: Outcome) -> None:
        for row in rows:
            if source is not self.order:
                to_jvm(row)
            if source is self.gate:
                self._route(self.combine, self.combine.element(row[1], row, row[4]), outcome)
            elif source is self.combine:
                self.order.element(row[1], row, row[4])
            elif source is self.order:
                key, batch = row
                # Released once the operator's watermark (both inputs) passed them, as the job's
                # EventTimeOrder releases them one watermark late.
                self.moderate.watermark = max(self.moderate.watermark, max(batch[2]))
                self._route(self.moderate, self.moderate.element(key, batch, 0), outcome)
            elif source is self.moderate and isinstance(row[0], list):  # Unbatch.java
                self._route(
                    self.moderate, [Row(*entry) for entry in zip(*row, strict=True)], outcome
                )
            elif row[0] == moderation.SANCTIONS:
                at = json.loads(row[2])["at"]
                self._route(self.sanctions, self.sanctions.element(row[1], row, at), outcome)
            elif row[0] == self.config.physical(DLQ):
                outcome.letters.append(json.loads(row[2]))
            else:
                outcome.outputs.append((row[0], row[1], json.loads(row[2])))


def run_one(topic: str, text: str | None, record: dict[str, Any]) -> Outcome:
    """`text` through a fresh job, and the same job without it (`Outcome.baseline`). When
    `record` (the valid record it was made from) is about a content version, that version is
    uploaded first, so a review, appeal, report or evidence meets a version the job decided
    (the contract's `stale` is for versions it never saw)."""
    content_id, ts = record.get("content_id"), record.get("ts")
    key = content_id if isinstance(content_id, str) else None
    if topic == "hash.bank":  # keyed by its producer as the contract says (issue 27)
        key = contract_key(topic, record)
    pipeline = _prepared(topic, record)
    before = pipeline.watermark
    outcome = pipeline.send(topic, key, text, ts if isinstance(ts, int) else 0)
    if outcome.crashed is None:
        unchanged = _prepared(topic, record)
        baseline = Outcome()
        unchanged.advance(max(pipeline.watermark, before), baseline)
        outcome.baseline = baseline.outputs
    return outcome


def _prepared(topic: str, record: dict[str, Any]) -> Pipeline:
    """A fresh job that has decided the version `record` is about (unless it is an upload),
    and granted the reviewer a review names."""
    pipeline = Pipeline()
    reviewer_id = record.get("reviewer_id")
    if topic == "review.decisions" and isinstance(reviewer_id, str) and reviewer_id:
        with contextlib.suppress(AssertionError):  # an id no grant can carry: refused anyway
            pipeline.grant(reviewer_id)
    content_id, version, ts = (
        record.get("content_id"),
        record.get("content_version"),
        record.get("ts"),
    )
    if (
        isinstance(content_id, str)
        and isinstance(version, int)
        and isinstance(ts, int)
        and topic != "content.versions"
    ):
        at = max(ts - 1, EARLIEST_TS)
        first = upload(content_id, at, event_id=f"prior-{ts}", content_version=version)
        setup = pipeline.prepare(json.dumps(first), content_id, at)
        if setup.crashed or setup.letters:
            raise AssertionError(f"the prior upload was not accepted: {setup}")
    return pipeline
