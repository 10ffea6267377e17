"""moderation: the report path before a version's operator. `ReportGate`, keyed by reporter,
weighs each report (hourly limit, trust, the reporter's TTL: modstream/moderation/rules/reports.py);
`ReportCombine`, keyed by (version, shard), hands a report storm on as one batch per
event-time window, so one hot version costs one state read and write per window and shard."""

from __future__ import annotations

import json
import zlib
from collections.abc import Iterator
from typing import Any

from pyflink.common import Row, Types
from pyflink.datastream.functions import KeyedProcessFunction, RuntimeContext
from pyflink.datastream.state import MapStateDescriptor, ValueStateDescriptor

from modstream.jobs.metrics import NO_METRICS, OperatorMetrics
from modstream.jobs.moderation import python_calls
from modstream.jobs.moderation.broadcast import PolicyAware
from modstream.jobs.moderation.config import REPORT_BATCH, REPORT_SHARDS, ModerationConfig
from modstream.jobs.moderation.letters import HANDLER_FAILURES, failure_letter, schema_letters
from modstream.moderation import state_schema
from modstream.moderation.rules import reports
from modstream.moderation.state import ReportWeight


@python_calls.counted
class ReportGate(PolicyAware):
    """Adapter keyed by reporter: the policy's hourly limit and the reporter's trust weight
    (modstream/moderation/rules/reports.py), then the report goes on to its content version with its
    weight."""

    keeps_banks = False
    metrics = NO_METRICS  # until open

    def __init__(self, config: ModerationConfig) -> None:
        super().__init__(config, report_rejections=False)

    def open(self, runtime_context: RuntimeContext) -> None:
        super().open(runtime_context)
        self.reporter = runtime_context.get_state(ValueStateDescriptor("reporter", Types.STRING()))
        self.metrics = OperatorMetrics(runtime_context, "report_gate")

    def on_timer(self, timestamp: int, ctx: Any) -> Iterator[Row]:
        store, _ = self._current(ctx)
        raw_state = self.reporter.value()
        try:
            state = state_schema.load(raw_state, "reporter")
        except state_schema.StateTooNew as too_new:
            drained = [(topic, raw, timestamp) for topic, raw, _ in self._drain(timestamp)]
            letters = schema_letters(self.config, too_new, None, drained, timestamp)
            yield from (self.metrics.letter(letter) for letter in letters)
            return
        drained = self._drain(timestamp)
        if not drained:
            if state is not None:
                self._expire(state, timestamp, ctx)
            return
        policy = store.resolve(self.config.policy_id, timestamp, "").decide
        hourly_limit = reports.hourly_limit(policy)
        for topic, raw, seq in drained:
            try:
                record = json.loads(raw)
                state, weight = reports.gate(
                    state, timestamp, hourly_limit, self.config.limits.max_reporter_reports
                )
            except HANDLER_FAILURES as error:
                letter = failure_letter(self.config, topic, None, raw, timestamp, error)
                yield self.metrics.letter(letter)
                continue
            yield self._weighed(record, weight, topic, timestamp, seq)
        if state is None:
            return
        state, timer = reports.arm(state)
        if timer is not None:
            ctx.timer_service().register_event_time_timer(timer)
        self.reporter.update(state_schema.dump(state))

    def _expire(self, state: dict[str, Any], timestamp: int, ctx: Any) -> None:
        """A timer with no report due: the reporter forgotten, or its TTL timer re-armed."""
        kept, timer = reports.expire(state, timestamp)
        if kept is None:
            self.reporter.clear()
        elif timer is not None:
            self.reporter.update(state_schema.dump(kept))
            ctx.timer_service().register_event_time_timer(timer)

    @staticmethod
    def _weighed(
        record: dict[str, Any], weight: ReportWeight, topic: str, timestamp: int, seq: int
    ) -> Row:
        """The report on its way to its version's shard, its weight and seq riding along."""
        record["_modstream_weight"] = weight.weight
        record["_modstream_new_reporter"] = weight.new_reporter
        record["_modstream_seq"] = seq
        shard = zlib.crc32(record["reporter_id"].encode("utf-8")) % REPORT_SHARDS
        key = f"{record['content_id']}\x1f{record['content_version']}\x1f{shard}"
        return Row("keyed", key, topic, json.dumps(record), timestamp, seq, "")


@python_calls.counted
class ReportCombine(KeyedProcessFunction):  # type: ignore[misc]  # PyFlink's classes are untyped
    """Keyed by (version, shard): the weighed reports of one event-time window become one batch
    for the version's operator (local-global pre-aggregation of a report storm). The batch is
    applied at the window's last millisecond, each report with its own ts."""

    def open(self, runtime_context: RuntimeContext) -> None:
        self.pending = runtime_context.get_map_state(
            MapStateDescriptor("reports", Types.STRING(), Types.STRING())
        )

    def process_element(self, value: Row, ctx: Any) -> Iterator[Row]:
        ts, seq = int(value[4]), int(value[5] or 0)
        event_id = json.loads(value[3])["event_id"]
        self.pending.put(reports.pending_key(ts, seq, event_id), value[3])
        ctx.timer_service().register_event_time_timer(reports.window_end(ts))
        return iter(())

    def on_timer(self, timestamp: int, ctx: Any) -> Iterator[Row]:
        done, batch = reports.due_batch(self.pending.items(), timestamp)
        if not batch:
            return
        for key in done:
            self.pending.remove(key)
        version_key = str(ctx.get_current_key()).rsplit("\x1f", 1)[0]
        yield Row("keyed", version_key, REPORT_BATCH, json.dumps(batch), timestamp, 0, "")
