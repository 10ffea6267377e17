"""enforce: the Action Service. moderation.actions (+ enforcement.repairs) -> Content Service.

Reads actions with `read_committed`, keyed by `content_id`; applies each through the intent pattern
(modstream/enforcement/apply.py) against the reference Content Service on Redis
(modstream/enforcement/content_service.py), and writes what users can now see to
`content.visibility` through an exactly-once sink. Failed applies are retried on processing-time
timers with backoff and jitter, then dead-lettered as `transient_exhausted`; an action another
worker holds is looked at again when its intent's TTL may have freed it. While what is served is not
what was decided (a failed cache purge), the Content Service's convergence is run again on the same
backoff timers (`--purge-failure-rate` fails purges on purpose, for drills).

One record never stops the job (docs/RELIABILITY.md, "Enforce, reconciler and the commands that
read topics"): a record that does not decode or validate goes to the DLQ as `schema`; a valid
action whose handling fails unexpectedly goes as `permanent`, with nothing emitted for it; either
way the next record is handled.
"""

from __future__ import annotations

import argparse
import json
import os
import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import redis
from pyflink.common import Row, Types
from pyflink.datastream import DataStream, StreamExecutionEnvironment
from pyflink.datastream.functions import KeyedProcessFunction, RuntimeContext
from pyflink.datastream.state import MapStateDescriptor

from modstream.contract import SchemaError, dead_letter, parse
from modstream.contract.dlq import ErrorClass
from modstream.contract.registry import load_json, validate
from modstream.core import logs
from modstream.core.config import Settings
from modstream.enforcement import apply as enforcement
from modstream.enforcement.content_service import ContentService, Purge
from modstream.jobs import metrics, runtime
from modstream.jobs.options import job_parser

INPUT_TOPICS = ("moderation.actions", "enforcement.repairs")
# What the job writes (docs/architecture.md draws both lists: modstream/jobs/graph.py).
OUTPUT_TOPICS = ("content.visibility", "moderation.dlq")
# For drills and the crash test: exit the whole process right after applying this action and
# before marking it COMPLETED (the "killed between apply and COMPLETED" case).
CRASH_ENV = "MODSTREAM_ENFORCE_CRASH_AFTER_APPLY"


@dataclass(frozen=True, kw_only=True)
class EnforceConfig(runtime.TopicNames):
    redis_url: str
    media_dir: str
    intent_ttl_ms: int = enforcement.INTENT_TTL_MS
    max_attempts: int = enforcement.MAX_ATTEMPTS
    # A drill and test option (make test-faults): this share of cache purges fails.
    purge_failure_rate: float = 0.0
    purge_failure_seed: int = 0
    clock: Callable[[], int] = runtime.wall_clock_ms  # processing time, ms; tests inject one


def failing_purge(rate: float, seed: int = 0) -> Purge:
    """A cache purge hook that fails a seeded random share `rate` of its calls, for drills:
    each failure must heal (the purge log keeps the paths; enforce and the reconciler retry)."""
    rng = random.Random(seed)

    def purge(content_id: str, paths: list[Path]) -> None:
        if rng.random() < rate:
            raise ConnectionError("enforce: cache purge failed (--purge-failure-rate drill)")

    return purge


class _CrashAfterApply:
    """Wraps the Content Service: exits the process after one apply of the named action."""

    def __init__(self, service: ContentService, action_id: str) -> None:
        self.service = service
        self.action_id = action_id
        self.current: str | None = None

    def apply(self, *args: Any, **kwargs: Any) -> Any:
        result = self.service.apply(*args, **kwargs)
        if self.current == self.action_id:
            os._exit(137)
        return result


class Enforce(KeyedProcessFunction):
    metrics = metrics.NO_METRICS  # until open (tests attach fakes without it)

    def __init__(self, config: EnforceConfig) -> None:
        self.config = config

    def open(self, runtime_context: RuntimeContext) -> None:
        self.metrics = metrics.OperatorMetrics(runtime_context, "enforce")
        self.redis: Any = redis.Redis.from_url(self.config.redis_url)
        extra: dict[str, Any] = {}
        if self.config.purge_failure_rate > 0:
            # One sequence per subtask, from the same seed (the thread-mode runtime context
            # has no subtask index): a drill is repeatable, not a property of the data.
            rate, seed = self.config.purge_failure_rate, self.config.purge_failure_seed
            extra["invalidate"] = failing_purge(rate, seed)
        service = ContentService(self.redis, Path(self.config.media_dir), **extra)
        # Actions waiting for a retry: action_id -> {"action", "attempt", "source", "at"}.
        waiting = runtime_context.get_map_state(
            MapStateDescriptor("waiting", Types.STRING(), Types.STRING())
        )
        self.attach(service, enforcement.RedisIntents(self.redis), waiting)

    def attach(self, service: Any, intents: enforcement.Intents, waiting: Any) -> None:
        """The Content Service, the intent store and the retry state (tests pass fakes)."""
        self.service = service
        self.intents = intents
        crash = os.environ.get(CRASH_ENV)
        self.target: Any = _CrashAfterApply(service, crash) if crash else service
        self.waiting = waiting

    def close(self) -> None:
        if getattr(self, "redis", None) is not None:
            self.redis.close()

    def process_element(self, value: Row, ctx: Any) -> Iterator[Row]:
        physical, key, raw, record_ts = value[0], value[1], value[2], value[3] or 0
        source = self.config.contract(physical)
        try:
            action = _decode(source, raw)
        except SchemaError as error:
            yield self._letter(physical, key, raw, error, record_ts, "schema")
            return
        yield from self._handle(action, 1, physical, raw, ctx)

    def on_timer(self, timestamp: int, ctx: Any) -> Iterator[Row]:
        for key, stored in list(self.waiting.items()):
            try:
                entry = json.loads(stored)
                due = int(entry["at"]) <= timestamp
                action, attempt, source = entry["action"], int(entry["attempt"]), entry["source"]
                if not isinstance(action, dict) or not isinstance(source, str):
                    raise TypeError("retry entry")
                raw = json.dumps(action, separators=(",", ":"))
            except Exception as error:  # a retry entry this code did not write: drop it, once
                self.waiting.remove(key)
                yield self._letter("enforce.waiting", None, stored, error, timestamp, "permanent")
                continue
            if due:
                self.waiting.remove(key)
                yield from self._handle(action, attempt, source, raw, ctx, heal=entry.get("heal"))

    def _handle(
        self,
        action: dict[str, Any],
        attempt: int,
        source: str,
        raw: str | None,
        ctx: Any,
        *,
        heal: object = False,
    ) -> Iterator[Row]:
        """One attempt at one action (or at healing what it served); an unexpected failure
        dead-letters this action only, and nothing it would have emitted is emitted."""
        try:
            step = self._heal if heal is True else self._attempt
            rows = list(step(action, attempt, source, ctx))
        except Exception as error:
            content_id, ts = action.get("content_id"), action.get("ts")
            rows = [
                self._letter(
                    source,
                    content_id if isinstance(content_id, str) else None,
                    raw,
                    f"enforce: action {_short(action.get('action_id'))}: handling failed "
                    f"({type(error).__name__})",
                    ts if isinstance(ts, int) else 0,
                    "permanent",
                    attempts=attempt,
                )
            ]
        yield from rows

    def _letter(
        self,
        source: str,
        key: str | None,
        raw: str | None,
        error: BaseException | str,
        ts: int,
        error_class: ErrorClass,
        *,
        attempts: int = 1,
    ) -> Row:
        letter = dead_letter(
            source,
            key,
            raw,
            error,
            ts=ts,
            error_class=error_class,
            attempts=attempts,
            operator="enforce",
        )
        self.metrics.inc("dlq", error_class=error_class)
        return Row(self.config.physical("moderation.dlq"), key, letter.model_dump_json())

    def _attempt(
        self, action: dict[str, Any], attempt: int, source: str, ctx: Any
    ) -> Iterator[Row]:
        if isinstance(self.target, _CrashAfterApply):
            self.target.current = action["action_id"]
        outcome = enforcement.enforce(
            action,
            self.intents,
            self.target,
            attempt=attempt,
            intent_ttl_ms=self.config.intent_ttl_ms,
        )
        retry = enforcement.retry_after(outcome, attempt, self.config.max_attempts)
        if retry is None:
            # Applied, stale or already done: report what users can see now (idempotent; after
            # a restart it re-sends what an aborted transaction may have lost).
            yield from self._report(action, 1, source, ctx)
        elif retry.exhausted:
            yield self._exhausted(action, attempt, source, outcome)
        else:
            self.metrics.inc("retries")
            self._wait(action["action_id"], action, retry, source, ctx)

    def _exhausted(
        self, action: dict[str, Any], attempt: int, source: str, outcome: enforcement.Outcome
    ) -> Row:
        """The DLQ row (`transient_exhausted`) of an action the Content Service kept failing."""
        letter = dead_letter(
            source,
            action["content_id"],
            json.dumps(action),
            f"enforce: action {action['action_id']}: the Content Service failed "
            f"{attempt} times ({outcome.error})",
            ts=action["ts"],
            error_class="transient_exhausted",
            operator="enforce",
            attempts=attempt,
        )
        self.metrics.inc("dlq", error_class="transient_exhausted")
        return Row(
            self.config.physical("moderation.dlq"), action["content_id"], letter.model_dump_json()
        )

    def _wait(
        self,
        key: str,
        action: dict[str, Any],
        retry: enforcement.Retry,
        source: str,
        ctx: Any,
        *,
        heal: bool = False,
    ) -> None:
        """Keep the action in `waiting` for its next attempt, on a processing-time timer."""
        due = self.config.clock() + retry.in_ms
        entry: dict[str, Any] = {
            "action": action,
            "attempt": retry.attempt,
            "source": source,
            "at": due,
        }
        if heal:
            entry["heal"] = True
        self.waiting.put(key, json.dumps(entry))
        ctx.timer_service().register_processing_time_timer(due)

    def _heal(self, action: dict[str, Any], attempt: int, source: str, ctx: Any) -> Iterator[Row]:
        """The file step or the purge failed after the fence: converge again, then report."""
        self.service.converge(action["content_id"])
        yield from self._report(action, attempt, source, ctx)

    def _report(self, action: dict[str, Any], attempt: int, source: str, ctx: Any) -> Iterator[Row]:
        """What users can see now; while it is not what was decided (a failed purge), heal
        again with backoff, at most `max_attempts` times (then the reconciler's repairs)."""
        content_id = action["content_id"]
        effective = self.service.effective(content_id, self.config.clock())
        if effective is not None:
            yield Row(
                self.config.physical("content.visibility"),
                content_id,
                json.dumps(effective.record(), separators=(",", ":")),
            )
        heals_left = enforcement.heals_left(attempt, self.config.max_attempts)
        if heals_left and self.service.unsettled(content_id):
            retry = enforcement.heal_retry(attempt)
            self._wait(f"heal:{action['action_id']}", action, retry, source, ctx, heal=True)


def _short(value: object) -> str:
    """An id for a message: ids are ours (sha256 hex), but a message never carries more."""
    return str(value)[:64] if isinstance(value, str) else "<none>"


def _decode(source: str, raw: str | None) -> dict[str, Any]:
    """A moderation.actions record, or a repair: the same record plus `repair_of`. Any failure
    is a SchemaError (strict JSON: size, depth, duplicated names, NaN, 64-bit integers)."""
    try:
        if source == "enforcement.repairs":
            record = load_json(source, raw or "")
            if not isinstance(record, dict) or not isinstance(record.get("repair_of"), str):
                raise SchemaError(source, "enforcement.repairs.repair_of: required string")
            repair_of = record.pop("repair_of")
            if not 1 <= len(repair_of) <= 256:
                raise SchemaError(source, "enforcement.repairs.repair_of: 1 to 256 characters")
            action = validate("moderation.actions", record).model_dump(exclude_none=True)
            return {**action, "repair_of": repair_of}
        return parse("moderation.actions", raw or "").model_dump(exclude_none=True)
    except SchemaError:
        raise
    except Exception as error:  # whatever a hostile record makes the parser raise
        raise SchemaError(source, f"enforce: undecodable record ({type(error).__name__})") from None


def build(
    env: StreamExecutionEnvironment,
    source: DataStream,
    sink: Callable[[DataStream], Any],
    config: EnforceConfig,
) -> None:
    enforced = (
        source.key_by(lambda row: row[1] or "", key_type=Types.STRING())
        .process(Enforce(config), output_type=runtime.SINK_ROW)
        .name("enforce")
        .uid("enforce")
    )
    sink(enforced)


def options() -> argparse.ArgumentParser:
    """Every job's options (modstream/jobs/options.py) and the enforce job's own."""
    parser = job_parser("enforce", __doc__)
    parser.add_argument("--intent-ttl-ms", type=int, default=enforcement.INTENT_TTL_MS)
    parser.add_argument("--max-attempts", type=int, default=enforcement.MAX_ATTEMPTS)
    parser.add_argument("--media-dir", type=Path, default=None)
    parser.add_argument(
        "--purge-failure-rate",
        type=float,
        default=0.0,
        help="drills and tests only: fail this share (0 to 1) of cache purges, seeded",
    )
    parser.add_argument("--purge-failure-seed", type=int, default=0)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = options()
    args = parser.parse_args(argv)
    if not 0.0 <= args.purge_failure_rate <= 1.0:
        parser.error("--purge-failure-rate: a share from 0 to 1")
    settings = Settings.from_env()
    logs.configure_job("enforce", settings)
    job = runtime.job_config("enforce", args, settings)
    config = EnforceConfig(
        redis_url=settings.redis_url,
        media_dir=str(args.media_dir or settings.run_dir / "media"),
        intent_ttl_ms=args.intent_ttl_ms,
        max_attempts=args.max_attempts,
        purge_failure_rate=args.purge_failure_rate,
        purge_failure_seed=args.purge_failure_seed,
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
