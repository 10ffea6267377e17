"""reconciler: desired (moderation.actions) vs effective (content.visibility) per content_id.

A separate job keyed by `content_id` (logic in modstream/enforcement/reconcile.py): a disagreement
older than `--sla-ms` becomes a `moderation.discrepancies` record and a repair on
`enforcement.repairs`, which the Action Service re-applies under the repair's own intent id; after
`--max-retries` repairs, one `alert`. Outputs go through this job's own exactly-once sink. Audits
(`--audit-ms`, 0 to turn off): the job reads each known item's served state from the reference
Content Service again (Redis and the public directory, read only), so a state that changed without a
record (a Redis restarted from a rolled-back AOF) is found and repaired. Metrics
(modstream/jobs/metrics.py, docs/OPERATIONS.md): `enforcement_lag_ms` (a histogram of the time from
an action's arrival to the matching effective visibility), `open_discrepancies` (a gauge, per
subtask) and `dlq` by error class. The exposure window (modstream/moderation/exposure.py,
docs/enforcement.md): with content.versions (surface, region) and moderation.decisions (restrictive
revisions, trigger) read as well, each version shown and then restricted gives one
`enforcement.exposure` record and an `exposure_ms` sample; its state (`exposure`) is apart from
reconciliation's, and a failing exposure step is logged and never disturbs reconciliation. The
review wait (modstream/jobs/review_wait.py, modstream/review/wait.py): with review.tasks and
review.decisions read as well, the oldest open review task's wait per queue, in two keyed steps of
their own (by task, then by queue) beside reconciliation.

One record never stops the job (docs/RELIABILITY.md, "Enforce, reconciler and the commands that
read topics"): a record that does not decode or validate goes to the DLQ as `schema`; a valid one
whose handling fails unexpectedly goes as `permanent`, and the content item's state stays as it
was; a failing timer dead-letters the item's desired action. Either way the next record is
handled.
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

from modstream.contract import SchemaError, dead_letter, parse
from modstream.contract.dlq import ErrorClass
from modstream.contract.registry import load_json
from modstream.core import logs
from modstream.core.config import Settings
from modstream.enforcement import reconcile
from modstream.enforcement.content_service import ContentService
from modstream.jobs import metrics, runtime
from modstream.jobs.options import job_parser
from modstream.jobs.review_wait import REVIEW_TOPICS, build_review_wait
from modstream.moderation import exposure

LOG = logging.getLogger("modstream.reconciler")

INPUT_TOPICS = ("moderation.actions", "content.visibility")
# Read for the exposure window only (modstream/moderation/exposure.py): the upload's surface and
# region, the restrictive decisions and their trigger.
EXPOSURE_TOPICS = ("content.versions", "moderation.decisions")
# Everything the job's one source reads, and what it writes (docs/architecture.md draws both:
# modstream/jobs/graph.py).
SOURCE_TOPICS = (*INPUT_TOPICS, *EXPOSURE_TOPICS, *REVIEW_TOPICS)
OUTPUT_TOPICS = (
    "moderation.discrepancies",
    "enforcement.repairs",
    exposure.TOPIC,
    "moderation.dlq",
)


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
        self.exposure = runtime_context.get_state(ValueStateDescriptor("exposure", Types.STRING()))
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
        if topic in REVIEW_TOPICS:  # the review-wait branch's (modstream/jobs/review_wait.py)
            return
        if topic == "content.versions":
            yield from self._upload_facts(raw, ctx)
            return
        try:
            record = _decode(topic, raw)
        except SchemaError as error:
            yield self._letter(physical, key, raw, error, record_ts, "schema")
            return
        now = self.config.clock()
        try:
            rows = []
            if topic != "moderation.decisions":
                stored = self.state.value()
                state = json.loads(stored) if stored else None
                step = (
                    reconcile.on_action
                    if topic == "moderation.actions"
                    else reconcile.on_visibility
                )
                result = step(state, record, now, self.config.sla_ms, self._audit_ms())
                rows += self._finish(result, ctx)
        except Exception as error:
            message = f"reconciler: {topic} record: handling failed ({type(error).__name__})"
            rows = [
                self._letter(
                    physical, record["content_id"], raw, message, record["ts"], "permanent"
                )
            ]
        if topic != "moderation.actions":
            measure = (
                exposure.on_decision if topic == "moderation.decisions" else exposure.on_visibility
            )
            rows += self._expose(measure, record, now, ctx)
        yield from rows

    def on_timer(self, timestamp: int, ctx: Any) -> Iterator[Row]:
        self._expire_exposure(ctx)
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

    def _upload_facts(self, raw: str | None, ctx: Any) -> Iterator[Row]:
        """An upload's surface and region for its exposure labels. content.versions is the
        moderation job's input, which letters what does not validate; here a record without
        the facts is only left out."""
        upsert = _upload(raw)
        if upsert is not None:
            yield from self._expose(exposure.on_upsert, upsert, self.config.clock(), ctx)

    def _expose(
        self,
        step: Callable[..., exposure.ExposureResult],
        record: dict[str, Any],
        now: int,
        ctx: Any,
    ) -> list[Row]:
        """One exposure step (modstream/moderation/exposure.py): its state, timers, metrics and
        record. A measure never disturbs reconciliation: a step that fails is logged and changes
        nothing (the version is not measured). A record keyed by anything but its content_id (the
        contract's key) would reach another item's state: it is left out."""
        if record.get("content_id") != str(ctx.get_current_key()):
            return []
        try:
            stored = self.exposure.value()
            result = step(json.loads(stored) if stored else None, record, now)
            rows = self._rows(result.outputs)
        except Exception as error:
            LOG.warning("reconciler: exposure step failed (%s)", type(error).__name__)
            return []
        _store(self.exposure, result.state)
        for timer in result.timers:
            ctx.timer_service().register_processing_time_timer(timer)
        if result.measured is not None:
            measured = result.measured
            labels = {name: measured[name] for name in ("surface", "region", "trigger")}
            self.metrics.observe("exposure_ms", measured["exposure_ms"], **labels)
        if result.unexposed is not None:
            self.metrics.inc("restricted_unexposed", 1, **result.unexposed)
        return rows

    def _rows(self, outputs: list[tuple[str, str, dict[str, Any]]]) -> list[Row]:
        """(contract topic, key, record) outputs as rows for the job's sink."""
        return [
            Row(self.config.physical(topic), output_key, json.dumps(output, separators=(",", ":")))
            for topic, output_key, output in outputs
        ]

    def _expire_exposure(self, ctx: Any) -> None:
        """The exposure state's TTL timer (any timer of the key may pass by: only a due one
        acts); an unreadable state is forgotten, it measures nothing."""
        stored = self.exposure.value()
        if not stored:
            return
        now = self.config.clock()
        try:
            state = json.loads(stored)
            if now < int(state.get("expires") or 0):
                return
            result = exposure.on_timer(state, now)
        except Exception as error:
            LOG.warning("reconciler: exposure state dropped (%s)", type(error).__name__)
            self.exposure.clear()
            return
        _store(self.exposure, result.state)
        for timer in result.timers:
            ctx.timer_service().register_processing_time_timer(timer)

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
        rows = self._rows(result.outputs)
        _store(self.state, result.state)
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


def _store(value_state: Any, state: dict[str, Any] | None) -> None:
    """A keyed state document stored as compact JSON, or cleared when it is None."""
    if state is None:
        value_state.clear()
    else:
        value_state.update(json.dumps(state, separators=(",", ":")))


def _upload(raw: str | None) -> dict[str, Any] | None:
    """The exposure facts of a content.versions upsert (id, version, surface, region), or
    None for anything else (a delete, a record that does not parse or lacks them)."""
    try:
        record = load_json("content.versions", raw or "")
    except SchemaError:
        return None
    if not isinstance(record, dict) or record.get("type") != "upsert":
        return None
    content_id, version = record.get("content_id"), record.get("content_version")
    surface, region = record.get("surface"), record.get("region")
    facts = (content_id, surface, region)
    if not all(isinstance(f, str) and 0 < len(f) <= 128 for f in facts):
        return None
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        return None
    return {
        "content_id": content_id,
        "content_version": version,
        "surface": surface,
        "region": region,
    }


def _decode(topic: str, raw: str | None) -> dict[str, Any]:
    """A validated moderation.actions, content.visibility or moderation.decisions record; any
    failure is a SchemaError (strict JSON: size, depth, duplicated names, NaN, 64-bit
    integers)."""
    if topic not in (*INPUT_TOPICS, "moderation.decisions"):
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
    except (ValueError, TypeError, AttributeError):  # not JSON, not text, not an object
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
    # The review-wait gauges (modstream/jobs/review_wait.py): their own keyed steps, nothing to
    # write.
    waits = build_review_wait(source, config.contract, config.clock)
    sink(reconciled.union(waits))


def options() -> argparse.ArgumentParser:
    """Every job's options (modstream/jobs/options.py) and the reconciler's own."""
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
        list(SOURCE_TOPICS),
        lambda env, source, sink: build(env, source, sink, config),
        detached=args.detached,
    )


if __name__ == "__main__":
    raise SystemExit(main())
