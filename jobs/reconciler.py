"""reconciler: desired (moderation.actions) vs effective (content.visibility) per content_id.

A separate job keyed by `content_id` (logic in operators/reconcile.py): a disagreement older
than `--sla-ms` becomes a `moderation.discrepancies` record and a repair on
`enforcement.repairs`, which the Action Service re-applies under the repair's own intent id;
after `--max-retries` repairs, one `alert`. Outputs go through this job's own exactly-once sink.
Metrics (Flink's metric system, group `reconciler`): `enforcement_lag_ms` (a histogram of the
time from an action's arrival to the matching effective visibility) and `open_discrepancies`
(a gauge, per subtask).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from pyflink.common import Row, Types
from pyflink.datastream import DataStream, StreamExecutionEnvironment
from pyflink.datastream.functions import KeyedProcessFunction, RuntimeContext
from pyflink.datastream.state import ValueStateDescriptor

from jobs import runtime
from modstream.config import Settings
from operators import reconcile
from schemas import SchemaError, dead_letter, parse

INPUT_TOPICS = ("moderation.actions", "content.visibility")


@dataclass(frozen=True, kw_only=True)
class ReconcilerConfig(runtime.TopicNames):
    sla_ms: int = reconcile.DEFAULT_SLA_MS
    max_retries: int = reconcile.DEFAULT_MAX_RETRIES


class Reconcile(KeyedProcessFunction):
    def __init__(self, config: ReconcilerConfig) -> None:
        self.config = config

    def open(self, runtime_context: RuntimeContext) -> None:
        self.state = runtime_context.get_state(ValueStateDescriptor("content", Types.STRING()))
        self.open_keys: set[str] = set()
        self.lag: Any = None
        try:
            group = runtime_context.get_metrics_group().add_group("reconciler")
            self.lag = group.distribution("enforcement_lag_ms")
            group.gauge("open_discrepancies", lambda: len(self.open_keys))
        except Exception:
            self.lag = None

    def process_element(self, value: Row, ctx: Any) -> Iterator[Row]:
        physical, raw = value[0], value[2]
        topic = self.config.contract(physical)
        try:
            record = parse(topic, raw or "").model_dump(exclude_none=True)
        except SchemaError as error:
            letter = dead_letter(
                physical, value[1], raw, error, ts=value[3] or 0, operator="reconciler"
            )
            yield Row(self.config.physical("moderation.dlq"), value[1], letter.model_dump_json())
            return
        now = int(time.time() * 1000)
        stored = self.state.value()
        state = json.loads(stored) if stored else None
        if topic == "moderation.actions":
            result = reconcile.on_action(state, record, now, self.config.sla_ms)
        else:
            result = reconcile.on_visibility(state, record, now, self.config.sla_ms)
        yield from self._finish(result, ctx)

    def on_timer(self, timestamp: int, ctx: Any) -> Iterator[Row]:
        stored = self.state.value()
        if not stored:
            return
        result = reconcile.on_timer(
            json.loads(stored), int(time.time() * 1000), self.config.sla_ms, self.config.max_retries
        )
        yield from self._finish(result, ctx)

    def _finish(self, result: reconcile.ReconcileResult, ctx: Any) -> Iterator[Row]:
        key = str(ctx.get_current_key())
        self.state.update(json.dumps(result.state, separators=(",", ":")))
        if result.open:
            self.open_keys.add(key)
        else:
            self.open_keys.discard(key)
        if result.lag_ms is not None and self.lag is not None:
            self.lag.update(result.lag_ms)
        for timer in result.timers:
            ctx.timer_service().register_processing_time_timer(timer)
        for topic, output_key, output in result.outputs:
            yield Row(
                self.config.physical(topic), output_key, json.dumps(output, separators=(",", ":"))
            )


def build(
    env: StreamExecutionEnvironment,
    source: DataStream,
    sink: Callable[[DataStream], Any],
    config: ReconcilerConfig,
) -> None:
    reconciled = (
        source.key_by(lambda row: row[1] or "", key_type=Types.STRING())
        .process(Reconcile(config), output_type=runtime.SINK_ROW)
        .name("reconcile")
        .uid("reconcile")
    )
    sink(reconciled)


def main(argv: list[str] | None = None) -> int:
    parser = runtime.job_parser("reconciler", __doc__)
    parser.add_argument("--sla-ms", type=int, default=reconcile.DEFAULT_SLA_MS)
    parser.add_argument("--max-retries", type=int, default=reconcile.DEFAULT_MAX_RETRIES)
    args = parser.parse_args(argv)
    settings = Settings.from_env()
    job = runtime.job_config("reconciler", args, settings)
    config = ReconcilerConfig(sla_ms=args.sla_ms, max_retries=args.max_retries, topics=job.topics)
    return runtime.run_on_kafka(
        job,
        settings,
        list(INPUT_TOPICS),
        lambda env, source, sink: build(env, source, sink, config),
        detached=args.detached,
    )


if __name__ == "__main__":
    raise SystemExit(main())
