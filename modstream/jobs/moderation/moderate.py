"""moderation: `Moderate`, the adapter keyed by content version that runs the pure step
(modstream/moderation/step.py) with the policy and hash banks as of each input's ts, and the format
of the version's stored value (`stored`, `storing`): since state schema 3 MessagePack bytes
under `VERSION_STATE`; a value stored before, JSON text under `version`, is read once and
cleared at the key's next write (modstream/moderation/state_schema.py)."""

from __future__ import annotations

import dataclasses
import functools
import heapq
import json
import operator
from collections.abc import Iterator, Sequence
from typing import Any

import msgspec
from pyflink.common import Row, Types
from pyflink.datastream.functions import RuntimeContext
from pyflink.datastream.state import ValueStateDescriptor

from modstream.contract import dead_letter
from modstream.contract.registry import parse_own
from modstream.core import jsonio
from modstream.jobs import metrics
from modstream.jobs.moderation import python_calls
from modstream.jobs.moderation.broadcast import PolicyAware
from modstream.jobs.moderation.config import REPORT_BATCH, ModerationConfig
from modstream.jobs.moderation.letters import (
    HANDLER_FAILURES,
    TIMERS,
    failure_letter,
    schema_letters,
)
from modstream.jobs.moderation.metrics import ModerationMetrics, in_force
from modstream.moderation import state_schema
from modstream.moderation import step as moderation
from modstream.moderation.rules.retro import RetroRecord
from modstream.moderation.state import Agreement, Content, ReportWeight, VersionState
from modstream.moderation.step import RETRO
from modstream.policy.store import PolicyStore
from modstream.review.access import ReviewGrants
from modstream.trust.hashbank import HashBanks

_TIMER = -1  # the index under which a failed timer is set aside
# The version's keyed value since state schema 3: bytes (`storing`), which Flink keeps as a
# pickled byte array; the JSON text stored before stays readable under `LEGACY_STATE`.
VERSION_STATE = "version_packed"
LEGACY_STATE = "version"
_PACK = msgspec.msgpack.Encoder().encode
_UNPACK = msgspec.msgpack.Decoder().decode


class _InputFailed(Exception):
    def __init__(self, index: int, error: BaseException) -> None:
        super().__init__(index)
        self.index = index
        self.error = error


@python_calls.counted
class Moderate(PolicyAware):
    """Adapter keyed by content version: runs the pure step with the policy and hash banks as
    of each input's ts, and stores the version's state.

    Its input comes from EventTimeOrder.java, in event-time order, one batch per version and
    watermark. The version's own timers (deadlines, expiry, TTL) are kept with its state (`due`):
    one that falls between two inputs of a batch fires between them, as it did when every input
    waited for its own timer, and its Flink timer is deleted (docs/moderation.md, "Time")."""

    def __init__(self, config: ModerationConfig) -> None:
        super().__init__(config, report_rejections=True)
        # The last Context made, by what it was made of: most inputs share one.
        self._made: tuple[tuple[Any, ...], moderation.Context] | None = None
        # The second reviews compared by the last `apply` (modstream/review/second_review.py):
        # counted by the metrics, never written.
        self.agreements: list[Agreement] = []
        self.results_read: list[tuple[str, int]] = []  # (detector, inference_ms) per result read
        # The watermark of the current call, where the engine hands it over (`_event_time`).
        self.watermark: int | None = None
        # The states this instance stored last, decoded (state_schema.DecodedStates).
        self.decoded = state_schema.DecodedStates(config.state_cache_versions)
        self._clock_ms: int | None = None  # the processing clock of the current firing (`_run`)

    def open(self, runtime_context: RuntimeContext) -> None:
        super().open(runtime_context)  # `buffer`: input held before issue 14, drained on timers
        self.packed = runtime_context.get_state(
            ValueStateDescriptor(VERSION_STATE, Types.PICKLED_BYTE_ARRAY())
        )
        self.version = runtime_context.get_state(ValueStateDescriptor(LEGACY_STATE, Types.STRING()))
        self._legacy = False
        self.metrics = metrics.OperatorMetrics(runtime_context, "moderate")
        self.reported = ModerationMetrics(self.metrics, self.config.clock)

    def process_broadcast_element(self, value: Row, ctx: Any) -> Iterator[Row]:
        """As every keyed operator's, its DLQ rows as one batch (this operator's output)."""
        yield from self._batch(list(super().process_broadcast_element(value, ctx)))

    def process_element(self, value: Row, ctx: Any) -> Iterator[Row]:
        """A batch Row(topics, values, stamps, seqs) from EventTimeOrder. Out: one Row(topics,
        keys, values) of everything it caused (Unbatch.java splits it)."""
        yield from _batch(self.element_rows(value, ctx))

    def on_timer(self, timestamp: int, ctx: Any) -> Iterator[Row]:
        yield from _batch(self.timer_rows(timestamp, ctx))

    def element_rows(self, value: Any, ctx: Any) -> list[Any]:
        """A batch (topics, values, stamps, seqs) applied: the (topic, key, value) rows it
        caused, its DLQ rows counted. The input of a version stored before issue 14 (its timers
        known to Flink only) waits in `buffer` for a Flink timer at its ts, as all input once
        did. BatchedModerate calls this directly: no Row is made to be taken apart again."""
        due, raw_state = self._stored()
        groups = _by_timestamp(value[0], value[1], value[2], value[3])
        rows: list[Any] = []
        if due is None:
            for timestamp, entries in groups:
                self._hold(timestamp, entries, ctx)
            return rows
        key = str(ctx.get_current_key())
        for timestamp, entries in groups:
            while due and due[0] < timestamp:
                raw_state = self._fire(_pop(due, ctx), [], raw_state, key, ctx, rows, due)
            while due and due[0] == timestamp:
                _pop(due, ctx)
            inputs = self._inputs([(topic, raw) for topic, raw, _ in entries], timestamp)
            raw_state = self._fire(timestamp, inputs, raw_state, key, ctx, rows, due)
        self._keep(due, raw_state)
        self._count_letters(rows)
        return rows

    def timer_rows(self, timestamp: int, ctx: Any) -> list[Any]:
        """The version's timer at `timestamp` fired: the rows it caused, as `element_rows`."""
        due, raw_state = self._stored()
        entries = self._drain(timestamp)  # input stored before issue 14 (see element_rows)
        rows: list[Any] = []
        if due is None or timestamp in due or entries:
            if due is not None:
                due = [other for other in due if other != timestamp]
                heapq.heapify(due)
            inputs = self._inputs([(topic, raw) for topic, raw, _ in entries], timestamp)
            key = str(ctx.get_current_key())
            raw_state = self._fire(timestamp, inputs, raw_state, key, ctx, rows, due)
            self._keep(due, raw_state)
        self._count_letters(rows)
        return rows

    def _batch(self, rows: list[Any]) -> Iterator[Row]:
        self._count_letters(rows)
        return _batch(rows)

    def _count_letters(self, rows: list[Any]) -> None:
        metrics.letters(self.metrics, rows, self.config.physical("moderation.dlq"))

    def _stored(self) -> tuple[list[int] | None, str | bytes | None]:
        """The key's stored value: one read, two for a key without a packed value (a new
        version, or one whose value a job before state schema 3 stored as JSON text)."""
        value: str | bytes | None = self.packed.value()
        self._legacy = False
        if value is None:
            value = self.version.value()
            self._legacy = value is not None
        return stored(value)

    def _keep(self, due: list[int] | None, raw_state: str | bytes | None) -> None:
        value = storing(due, raw_state)
        if value is None:
            self.packed.clear()
        else:
            self.packed.update(value)
        if self._legacy:  # migrated: the JSON text is never read again
            self.version.clear()
            self._legacy = False

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
        batched.sort(key=operator.itemgetter(0, 1, 2))
        return direct + [("moderation.reports", item[3], item[0]) for item in batched]

    def _fire(
        self,
        timestamp: int,
        inputs: list[tuple[str, str, int]],
        raw_state: str | bytes | None,
        key: str,
        ctx: Any,
        rows: list[Any],
        due: list[int] | None,
    ) -> str | bytes | None:
        """Apply `inputs` and the version's timers at `timestamp`: rows out into `rows`, new
        timers registered (and kept in `due`); the new stored state returned."""
        store, banks = self._current(ctx)
        content_id = key.split("\x1f", 1)[0]
        try:
            run, set_aside = self.apply(raw_state, inputs, timestamp, store, banks)
        except state_schema.StateTooNew as too_new:
            rows += map(tuple, schema_letters(self.config, too_new, content_id, inputs, timestamp))
            return raw_state
        state, outputs, timers, letters = run
        earlier = functools.partial(in_force, raw_state)  # read only when a count needs it
        self.reported.decided(key, state, outputs, timestamp, earlier=earlier)
        self.reported.compared(self.agreements)
        self.reported.read_results(self.results_read)
        for timer in set(timers):
            if due is None:  # stored before issue 14: its timers are Flink's alone
                ctx.timer_service().register_event_time_timer(timer)
            elif timer not in due:  # one in `due` has its Flink timer already
                heapq.heappush(due, timer)
                ctx.timer_service().register_event_time_timer(timer)
        rows += self._rows(outputs, letters, timestamp)
        for index, error in sorted(set_aside.items()):
            # The timer's own work (deadlines, expiry, TTL) failing is reported the same way.
            topic, raw, ts = inputs[index] if index != _TIMER else (TIMERS, "", timestamp)
            rows.append(tuple(failure_letter(self.config, topic, content_id, raw, ts, error)))
        return None if state is None else self.decoded.dump(state)

    def _rows(
        self, outputs: list[moderation.Output], letters: list[Any], timestamp: int
    ) -> list[tuple[str, str | None, str]]:
        """(topic, key, value) per output and letter: plain tuples (a pyflink `Row` costs a
        Python `__init__` and `__setattr__`s each); `_batch` makes the one Row that crosses."""
        physical = self.config.physical
        rows: list[tuple[str, str | None, str]] = []
        for topic, key, output in outputs:
            if topic == moderation.SANCTIONS:
                # On the main output under a reserved topic (no side outputs here): routed to
                # the sanctions operator by a Java filter, with the time it was emitted.
                rows.append((topic, key, jsonio.dumps({**output, "at": timestamp})))
            else:
                rows.append((physical(topic), key, jsonio.dumps(output)))
        for topic, content_id, error_class, message, raw, ts in letters:
            letter = dead_letter(
                physical(topic),
                content_id,
                raw,
                message,
                ts=ts,
                error_class=error_class,
                operator="moderation",
            )
            rows.append((physical("moderation.dlq"), content_id, letter.model_dump_json()))
        return rows

    def apply(
        self,
        raw_state: str | bytes | None,
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
            self.agreements = []  # a run again without a failed input compares again
            self.results_read = []  # and reads its results again
            try:
                return self._run(raw_state, inputs, set_aside, timestamp, store, banks), set_aside
            except _InputFailed as failed:
                set_aside[failed.index] = failed.error

    def _run(
        self,
        raw_state: str | bytes | None,
        inputs: list[tuple[str, str, int]],
        set_aside: dict[int, BaseException],
        timestamp: int,
        store: PolicyStore,
        banks: HashBanks,
    ) -> tuple[Any, list[moderation.Output], list[int], list[Any]]:
        """Apply `inputs` (but those set aside) and the timer to the stored state."""
        # The processing clock as of this firing, read once: its inputs and timer share it.
        self._clock_ms = self.config.clock() if self.config.wall_clock else None
        state = self.decoded.load(raw_state)
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
            self.agreements += result.agreements
            letters += [
                (topic, content_id, error_class, message, raw, ts)
                for error_class, message in result.dead_letters
            ]
            letters += _letters_of(result, content_id)
        if state is not None and _TIMER not in set_aside:
            try:
                context = self._context(
                    store, banks, state.content_id, timestamp, _hashes(state.content), contexts
                )
                result = moderation.on_timer(state, timestamp, context)
            except HANDLER_FAILURES as error:
                raise _InputFailed(_TIMER, error) from None
            letters += _letters_of(result, state.content_id)
            state = result.state
            outputs += result.outputs
            timers += result.timers
        return state, outputs, timers, letters

    def _step(
        self,
        state: VersionState | None,
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
        content = state.content if state is not None else None
        hashes = _hashes(content) or (
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
        if topic == "review.decisions":
            # How far event time is when it is read: a review read late waits for its lease
            # from there (modstream/moderation/rules/reviews.py).
            now = self._event_time()
            if now is not None:
                context = dataclasses.replace(context, event_time=now)
        if topic == "detector.results":
            self.results_read.append((str(parsed.detector), int(parsed.inference_ms or 0)))
        return moderation.step(state, topic, parsed, ts, context), parsed.content_id

    def _event_time(self) -> int | None:
        """The operator's event time: the watermark of the call (`watermark`, which
        BatchedModerate sets; a live job's event time follows the processing clock once its
        input is drained), else the newest `ts` this operator fired at, without a call into
        Java (the PyFlink engine); None when neither is known (the bench's peers)."""
        reported = getattr(self, "reported", None)
        newest = reported.event_time if reported is not None else None
        watermark = self.watermark
        if watermark is None:
            return newest
        return watermark if newest is None else max(watermark, newest)

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

    def _review_grants(self) -> ReviewGrants | None:
        """The grants a review is checked against: none loaded yet refuses every review (fails
        closed); None only where the deployment turned the check off (its insecure setting)."""
        if not self.config.keyring.require_review_access:
            return None
        if self.grants is None:
            self.grants = ReviewGrants()
        return self.grants

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
        clock_ms = self._clock_ms
        made_of = (resolution.decide, resolution.shadows, resolution.paused, matches, clock_ms)
        if self._made is not None and self._made[0] == made_of:
            return self._made[1]  # the same policies, matches and clock: the same Context
        context = moderation.Context(
            resolution,
            matches,
            limits=self.config.limits,
            clock_ms=clock_ms,
            live_window_ms=self.config.live_window_ms,
            evidence_grace_ms=self.config.evidence_grace_ms,
            state_ttl_ms=self.config.state_ttl_ms,
            review_retention_ms=self.config.review_retention_ms,
            grants=self._review_grants(),
        )
        self._made = (made_of, context)
        return context


def stored(value: str | bytes | None) -> tuple[list[int] | None, str | bytes | None]:
    """Moderate's keyed value as (due, state). Since state schema 3, bytes: MessagePack of
    [the version's pending timers (nil: Flink's alone, as before issue 14), its state document
    as `state_schema.dump_version` bytes (nil once retired)]. Before, text: since issue 14 the
    pending timers as a JSON list, a newline, then the state's JSON (or nothing once retired);
    before issue 14, the state's JSON alone (a JSON object): due is then None."""
    if value is None:
        return [], None
    if isinstance(value, bytes):
        due, state = _UNPACK(value)
        return due, state
    if value.startswith("{"):
        return None, value
    head, _, state_text = value.partition("\n")
    return json.loads(head), state_text or None


def storing(due: list[int] | None, state: str | bytes | None) -> bytes | None:
    """The inverse of `stored`, as bytes; None when nothing is left to keep (clear the value).
    A state still in JSON text (read from a job before schema 3, not applied since) is kept
    as that text's bytes, which `state_schema.load_version` reads as JSON."""
    if due is not None and not due and state is None:
        return None
    if due is None and state is None:
        return None
    if isinstance(state, str):
        state = state.encode()
    return _PACK([None if due is None else sorted(due), state])


def _letters_of(
    result: moderation.StepResult, content_id: str
) -> list[tuple[str, str | None, str, str, str, int]]:
    """The letters a step or timer made for an input other than the one it applied (a review
    that waited for its lease: modstream/moderation/rules/reviews.py), with that input's record."""
    return [
        (topic, content_id, error_class, message, raw, ts)
        for topic, error_class, message, raw, ts in result.letters_of
    ]


def _hashes(content: Content | None) -> dict[str, Any]:
    """The content's hashes its bank matches are looked up by ({}: no content yet)."""
    if content is None:
        return {}
    return {"sha256": content.sha256, "phash": content.phash}


def _batch(rows: list[Any]) -> Iterator[Row]:
    """Rows as one Row(topics, keys, values): one crossing back to Java however many."""
    if rows:
        yield Row([row[0] for row in rows], [row[1] for row in rows], [row[2] for row in rows])


Group = tuple[int, list[tuple[str, str, int]]]  # ts, its (topic, value, seq) in order


def _by_timestamp(
    topics: Sequence[str], values: Sequence[str], stamps: Sequence[int], seqs: Sequence[int]
) -> list[Group]:
    """A batch's records grouped by ts, in the batch's order (ts ascending). Each column is a
    tuple from PyFlink and a list from BatchedModerate (compiled, the type is checked)."""
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
