"""reconciler: desired (moderation.actions) vs effective (content.visibility) per content_id.

A separate job keyed by `content_id` (logic in operators/reconcile.py): a disagreement older
than `--sla-ms` becomes a `moderation.discrepancies` record and a repair on
`enforcement.repairs`, which the Action Service re-applies under the repair's own intent id;
after `--max-retries` repairs, one `alert`. Outputs go through this job's own exactly-once sink.
Audits (`--audit-ms`, 0 to turn off): the job reads each known item's served state from the
reference Content Service again (Redis and the public directory, read only), so a state that
changed without a record (a Redis restarted from a rolled-back AOF) is found and repaired.
Metrics (jobs/metrics.py, docs/OPERATIONS.md): `enforcement_lag_ms` (a histogram of the time
from an action's arrival to the matching effective visibility), `open_discrepancies` (a gauge,
per subtask) and `dlq` by error class.

One record never stops the job (docs/reliability/jobs.md): a record that does not decode or
validate goes to the DLQ as `schema`; a valid one whose handling fails unexpectedly goes as
`permanent`, and the content item's state stays as it was; a failing timer dead-letters the
item's desired action. Either way the next record is handled.
"""

from __future__ import annotations

import argparse
import json
import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import redis
from pyflink.common import Row, Types
from pyflink.datastream import DataStream, StreamExecutionEnvironment
from pyflink.datastream.functions import KeyedProcessFunction, RuntimeContext
from pyflink.datastream.state import ValueStateDescriptor

from jobs import metrics, runtime
from jobs.options import job_parser
from modstream import logs
from modstream.config import Settings
from modstream.content_service import ContentService
from operators import reconcile
from schemas import SchemaError, dead_letter, parse
from schemas.dlq import ErrorClass

LOG = logging.getLogger("modstream.reconciler")

INPUT_TOPICS = ("moderation.actions", "content.visibility")


@dataclass(frozen=True, kw_only=True)
class ReconcilerConfig(runtime.TopicNames):
    sla_ms: int = reconcile.DEFAULT_SLA_MS
    max_retries: int = reconcile.DEFAULT_MAX_RETRIES
    # Audits of the served state; off without a Content Service to read (redis_url None).
    audit_ms: int = 0
    redis_url: str | None = None
    media_dir: str | None = None
    namespace: str = "content"
    clock: Callable[[], int] = runtime.wall_clock_ms  # processing time, ms; tests inject one


class Reconcile(KeyedProcessFunction):
    def __init__(self, config: ReconcilerConfig) -> None:
        self.config = config

    def open(self, runtime_context: RuntimeContext) -> None:
        self.state = runtime_context.get_state(ValueStateDescriptor("content", Types.STRING()))
        self.content: ContentService | None = None
        self.redis: Any = None
        config = self.config
        if config.audit_ms > 0 and config.redis_url and config.media_dir:
            self.redis = redis.Redis.from_url(config.redis_url)
            self.content = ContentService(
                self.redis, Path(config.media_dir), namespace=config.namespace
            )
        self.open_keys: set[str] = set()
        self.metrics = metrics.OperatorMetrics(runtime_context, "reconcile")
        self.metrics.set("open_discrepancies", 0)

    def process_element(self, value: Row, ctx: Any) -> Iterator[Row]:
        physical, key, raw, record_ts = value[0], value[1], value[2], value[3] or 0
        topic = self.config.contract(physical)
        try:
            record = _decode(topic, raw)
        except SchemaError as error:
            yield self._letter(physical, key, raw, error, record_ts, "schema")
            return
        try:
            now = self.config.clock()
            stored = self.state.value()
            state = json.loads(stored) if stored else None
            step = reconcile.on_action if topic == "moderation.actions" else reconcile.on_visibility
            result = step(state, record, now, self.config.sla_ms, self._audit_ms())
            rows = self._finish(result, ctx)
        except Exception as error:
            message = f"reconciler: {topic} record: handling failed ({type(error).__name__})"
            rows = [
                self._letter(
                    physical, record["content_id"], raw, message, record["ts"], "permanent"
                )
            ]
        yield from rows

    def on_timer(self, timestamp: int, ctx: Any) -> Iterator[Row]:
        stored = self.state.value()
        if not stored:
            return
        try:
            now, state = self.config.clock(), json.loads(stored)
            rows = []
            if self.content is not None and reconcile.audit_due(state, now):
                served = self._served(str(ctx.get_current_key()), now)
                audited = reconcile.on_audit(
                    state, served, now, self.config.sla_ms, self.config.audit_ms
                )
                rows += self._finish(audited, ctx)
                state = audited.state
            result = reconcile.on_timer(state, now, self.config.sla_ms, self.config.max_retries)
            rows += self._finish(result, ctx)
        except Exception as error:
            # No record to blame: the letter carries the state's desired action (no content),
            # and no timer is armed again, so a failing state cannot loop.
            key = str(ctx.get_current_key())
            message = f"reconciler: timer failed ({type(error).__name__})"
            rows = [
                self._letter(
                    self.config.physical("moderation.actions"),
                    key,
                    _desired(stored),
                    message,
                    timestamp,
                    "permanent",
                )
            ]
        yield from rows

    def close(self) -> None:
        if self.redis is not None:
            self.redis.close()

    def _audit_ms(self) -> int:
        return self.config.audit_ms if self.content is not None else 0

    def _served(self, content_id: str, now: int) -> dict[str, Any] | None:
        """The item's served state now; None when it cannot be read (Redis down: the next
        audit reads it)."""
        assert self.content is not None
        try:
            effective = self.content.effective(content_id, now)
        except Exception as error:
            LOG.warning("reconciler: audit read failed (%s)", type(error).__name__)
            return None
        return effective.record() if effective is not None else None

    def _finish(self, result: reconcile.ReconcileResult, ctx: Any) -> list[Row]:
        """Store the new state and arm its timers; the rows to emit. Everything that can fail
        on a value runs before the state is touched."""
        key = str(ctx.get_current_key())
        rows = [
            Row(self.config.physical(topic), output_key, json.dumps(output, separators=(",", ":")))
            for topic, output_key, output in result.outputs
        ]
        stored = (
            json.dumps(result.state, separators=(",", ":")) if result.state is not None else None
        )
        if stored is None:
            self.state.clear()
        else:
            self.state.update(stored)
        opened = len(self.open_keys)
        if result.open:
            self.open_keys.add(key)
        else:
            self.open_keys.discard(key)
        if len(self.open_keys) != opened:
            self.metrics.set("open_discrepancies", len(self.open_keys))
        if result.lag_ms is not None:
            self.metrics.observe("enforcement_lag_ms", result.lag_ms)
        metrics.letters(self.metrics, rows, self.config.physical("moderation.dlq"))
        for timer in result.timers:
            ctx.timer_service().register_processing_time_timer(timer)
        return rows

    def _letter(
        self,
        source: str,
        key: str | None,
        raw: str | None,
        error: BaseException | str,
        ts: int,
        error_class: ErrorClass,
    ) -> Row:
        letter = dead_letter(
            source, key, raw, error, ts=ts, error_class=error_class, operator="reconciler"
        )
        self.metrics.inc("dlq", error_class=error_class)
        return Row(self.config.physical("moderation.dlq"), key, letter.model_dump_json())


def _decode(topic: str, raw: str | None) -> dict[str, Any]:
    """A validated moderation.actions or content.visibility record; any failure is a
    SchemaError (strict JSON: size, depth, duplicated names, NaN, 64-bit integers)."""
    if topic not in INPUT_TOPICS:
        raise SchemaError(topic, f"reconciler: {topic!r} is not an input of this job")
    try:
        return parse(topic, raw or "").model_dump(exclude_none=True)
    except SchemaError:
        raise
    except Exception as error:  # whatever a hostile record makes the parser raise
        raise SchemaError(
            topic, f"reconciler: undecodable record ({type(error).__name__})"
        ) from None


def _desired(stored: str) -> str | None:
    """The desired action kept in a stored state, as JSON, for a letter about that state."""
    try:
        desired = json.loads(stored).get("desired")
    except Exception:
        return None
    if not isinstance(desired, dict):
        return None
    return json.dumps({k: v for k, v in desired.items() if k != "received"}, separators=(",", ":"))


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


def options() -> argparse.ArgumentParser:
    """Every job's options (jobs/options.py) and the reconciler's own."""
    parser = job_parser("reconciler", __doc__)
    parser.add_argument("--sla-ms", type=int, default=reconcile.DEFAULT_SLA_MS)
    parser.add_argument("--max-retries", type=int, default=reconcile.DEFAULT_MAX_RETRIES)
    parser.add_argument(
        "--audit-ms",
        type=int,
        default=reconcile.DEFAULT_AUDIT_MS,
        help="re-read each item's served state this long after its last change, doubling"
        " up to an hour (0: no audits)",
    )
    parser.add_argument("--media-dir", type=Path, default=None)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = options().parse_args(argv)
    settings = Settings.from_env()
    logs.configure_job("reconciler", settings)
    job = runtime.job_config("reconciler", args, settings)
    config = ReconcilerConfig(
        sla_ms=args.sla_ms,
        max_retries=args.max_retries,
        audit_ms=args.audit_ms,
        redis_url=settings.redis_url,
        media_dir=str(args.media_dir or settings.run_dir / "media"),
        topics=job.topics,
    )
    return runtime.run_on_kafka(
        job,
        settings,
        list(INPUT_TOPICS),
        lambda env, source, sink: build(env, source, sink, config),
        detached=args.detached,
    )


if __name__ == "__main__":
    raise SystemExit(main())
