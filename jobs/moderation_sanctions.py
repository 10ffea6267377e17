"""moderation: `Sanctions`, the adapter keyed by author that turns the version operators'
decisions into strikes and account sanctions (operators/sanctions.py)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from pyflink.common import Row, Types
from pyflink.datastream.functions import KeyedProcessFunction, RuntimeContext
from pyflink.datastream.state import MapStateDescriptor, ValueStateDescriptor

from jobs import python_calls
from jobs.metrics import NO_METRICS, OperatorMetrics
from jobs.moderation_config import ModerationConfig
from jobs.moderation_letters import HANDLER_FAILURES, TIMERS, failure_letter, schema_letters
from operators import sanctions, state_schema


@python_calls.counted
class Sanctions(KeyedProcessFunction):
    """Adapter keyed by author: strikes and sanctions (operators/sanctions.py). Decisions are
    buffered by the time the version's operator emitted them and applied at that time, in
    `sanctions.decision_order`, so the result does not depend on how subtasks interleave."""

    metrics = NO_METRICS  # until open

    def __init__(self, config: ModerationConfig) -> None:
        self.config = config

    def open(self, runtime_context: RuntimeContext) -> None:
        self.buffer = runtime_context.get_map_state(
            MapStateDescriptor("decisions", Types.LONG(), Types.STRING())
        )
        self.account = runtime_context.get_state(ValueStateDescriptor("account", Types.STRING()))
        self.metrics = OperatorMetrics(runtime_context, "sanctions")

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
            letters = schema_letters(self.config, too_new, user_id, decisions, timestamp)
            yield from (self.metrics.letter(letter) for letter in letters)
            return
        if pending:
            self.buffer.remove(timestamp)
            result, failed = sanctions.on_decisions(state, user_id, json.loads(pending))
            for decision, error in failed:
                raw = json.dumps(decision)
                content_id = decision.get("content_id")
                topic = "moderation.decisions"
                letter = failure_letter(self.config, topic, content_id, raw, timestamp, error)
                yield self.metrics.letter(letter)
        else:
            try:
                expired = sanctions.on_timer(state, timestamp)
                result = sanctions.SanctionResult(expired.state, timers=expired.timers)
            except HANDLER_FAILURES as error:
                result = sanctions.SanctionResult(state)  # as before the timer
                letter = failure_letter(self.config, TIMERS, user_id, "", timestamp, error)
                yield self.metrics.letter(letter)
        yield from self._store(result, ctx)

    def _store(self, result: sanctions.SanctionResult, ctx: Any) -> Iterator[Row]:
        """Keep the author's new state, arm its timers, and send its account actions."""
        if result.state is None:
            self.account.clear()
        else:
            self.account.update(state_schema.dump(result.state))
        for timer in result.timers:
            ctx.timer_service().register_event_time_timer(timer)
        for topic, key, output in result.outputs:
            yield Row(
                self.config.physical(topic),
                key,
                json.dumps(output, separators=(",", ":"), ensure_ascii=False),
            )
