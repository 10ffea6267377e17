"""moderation: `Sanctions`, the adapter keyed by author that turns the version operators'
decisions into strikes and account sanctions (modstream/enforcement/sanctions.py)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from pyflink.common import Row, Types
from pyflink.datastream.functions import KeyedProcessFunction, RuntimeContext
from pyflink.datastream.state import MapStateDescriptor, ValueStateDescriptor

from modstream.enforcement import sanctions
from modstream.jobs.metrics import NO_METRICS, OperatorMetrics
from modstream.jobs.moderation import python_calls
from modstream.jobs.moderation.config import ModerationConfig
from modstream.jobs.moderation.letters import (
    HANDLER_FAILURES,
    TIMERS,
    failure_letter,
    schema_letters,
)
from modstream.moderation import state_schema


@python_calls.counted
class Sanctions(KeyedProcessFunction):  # type: ignore[misc]  # PyFlink's classes are untyped
    """Adapter keyed by author: strikes and sanctions (modstream/enforcement/sanctions.py).
    Decisions are buffered by the time the version's operator emitted them and applied at that time,
    in `sanctions.decision_order`, so the result does not depend on how subtasks interleave."""

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
        pending = self.buffer.get(timestamp)
        if pending:
            self.buffer.remove(timestamp)
        decisions = json.loads(pending) if pending else None
        user_id = str(ctx.get_current_key())
        result, letters = settled(
            self.config, self.metrics, self.account.value(), user_id, timestamp, decisions
        )
        yield from letters
        if result is None:
            return
        if result.state is None:
            self.account.clear()
        else:
            self.account.update(state_schema.dump(result.state))
        for timer in result.timers:
            ctx.timer_service().register_event_time_timer(timer)
        yield from account_rows(self.config, result)


def settled(
    config: ModerationConfig,
    metrics: OperatorMetrics,
    stored: str | bytes | None,
    user_id: str,
    timestamp: int,
    decisions: list[dict[str, Any]] | None,
) -> tuple[sanctions.SanctionResult | None, list[Row]]:
    """The author's decisions emitted at `timestamp` (None: the account's own timer) over its
    stored state: the result to keep (None: a state too new for this code, left as it is) and
    the DLQ letters of what failed; the batched engine's too
    (modstream/jobs/moderation/sanctions_batch.py)."""
    try:
        state = state_schema.load(stored, "account")
    except state_schema.StateTooNew as too_new:
        inputs = [
            ("moderation.decisions", json.dumps(entry["decision"]), timestamp)
            for entry in decisions or []
        ]
        letters = schema_letters(config, too_new, user_id, inputs, timestamp)
        return None, [metrics.letter(letter) for letter in letters]
    if decisions:
        result, failed = sanctions.on_decisions(state, user_id, decisions)
        rows = []
        for decision, error in failed:
            raw = json.dumps(decision)
            content_id = decision.get("content_id")
            topic = "moderation.decisions"
            letter = failure_letter(config, topic, content_id, raw, timestamp, error)
            rows.append(metrics.letter(letter))
        return result, rows
    try:
        expired = sanctions.on_timer(state, timestamp)
        return sanctions.SanctionResult(expired.state, timers=expired.timers), []
    except HANDLER_FAILURES as error:
        letter = failure_letter(config, TIMERS, user_id, "", timestamp, error)
        return sanctions.SanctionResult(state), [metrics.letter(letter)]  # as before the timer


def account_rows(config: ModerationConfig, result: sanctions.SanctionResult) -> Iterator[Row]:
    """The account actions of a result, as sink rows."""
    for topic, key, output in result.outputs:
        yield Row(
            config.physical(topic),
            key,
            json.dumps(output, separators=(",", ":"), ensure_ascii=False),
        )
