"""enforce: the Action Service. moderation.actions (+ enforcement.repairs) -> Content Service.

Reads actions with `read_committed`, keyed by `content_id`; applies each through the intent
pattern (operators/enforcement.py) against the reference Content Service on Redis
(modstream/content_service.py), and writes what users can now see to `content.visibility`
through an exactly-once sink. Failed applies are retried on processing-time timers with
backoff and jitter, then dead-lettered as `transient_exhausted`; an action another worker holds
is looked at again when its intent's TTL may have freed it.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import redis
from pyflink.common import Row, Types
from pyflink.datastream import DataStream, StreamExecutionEnvironment
from pyflink.datastream.functions import KeyedProcessFunction, RuntimeContext
from pyflink.datastream.state import MapStateDescriptor

from jobs import runtime
from modstream.config import Settings
from modstream.content_service import ContentService
from operators import enforcement
from schemas import SchemaError, dead_letter, parse

INPUT_TOPICS = ("moderation.actions", "enforcement.repairs")
# For drills and the crash test: exit the whole process right after applying this action and
# before marking it COMPLETED (the "killed between apply and COMPLETED" case).
CRASH_ENV = "MODSTREAM_ENFORCE_CRASH_AFTER_APPLY"


@dataclass(frozen=True, kw_only=True)
class EnforceConfig(runtime.TopicNames):
    redis_url: str
    media_dir: str
    intent_ttl_ms: int = enforcement.INTENT_TTL_MS
    max_attempts: int = enforcement.MAX_ATTEMPTS


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
    def __init__(self, config: EnforceConfig) -> None:
        self.config = config

    def open(self, runtime_context: RuntimeContext) -> None:
        self.redis = redis.Redis.from_url(self.config.redis_url)
        self.service = ContentService(self.redis, Path(self.config.media_dir))
        self.intents = enforcement.RedisIntents(self.redis)
        crash = os.environ.get(CRASH_ENV)
        self.target: Any = _CrashAfterApply(self.service, crash) if crash else self.service
        # Actions waiting for a retry: action_id -> {"action", "attempt", "source"}.
        self.waiting = runtime_context.get_map_state(
            MapStateDescriptor("waiting", Types.STRING(), Types.STRING())
        )

    def close(self) -> None:
        self.redis.close()

    def process_element(self, value: Row, ctx: Any) -> Iterator[Row]:
        physical, raw = value[0], value[2]
        source = self.config.contract(physical)
        try:
            action = _decode(source, raw)
        except SchemaError as error:
            letter = dead_letter(
                physical, value[1], raw, error, ts=value[3] or 0, operator="enforce"
            )
            yield Row(self.config.physical("moderation.dlq"), value[1], letter.model_dump_json())
            return
        yield from self._attempt(action, 1, physical, ctx)

    def on_timer(self, timestamp: int, ctx: Any) -> Iterator[Row]:
        due = [(key, json.loads(raw)) for key, raw in self.waiting.items()]
        for key, entry in due:
            if entry["at"] <= timestamp:
                self.waiting.remove(key)
                yield from self._attempt(entry["action"], entry["attempt"], entry["source"], ctx)

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
        if outcome.retry_in_ms is not None:
            next_attempt = attempt + (1 if outcome.status == "failed" else 0)
            if next_attempt > self.config.max_attempts:
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
                yield Row(
                    self.config.physical("moderation.dlq"),
                    action["content_id"],
                    letter.model_dump_json(),
                )
                return
            due = int(time.time() * 1000) + outcome.retry_in_ms
            self.waiting.put(
                action["action_id"],
                json.dumps(
                    {"action": action, "attempt": next_attempt, "source": source, "at": due}
                ),
            )
            ctx.timer_service().register_processing_time_timer(due)
            return
        # Applied, stale or already done: report what users can see now (idempotent; after a
        # restart it re-sends what an aborted transaction may have lost).
        effective = self.service.effective(action["content_id"], int(time.time() * 1000))
        if effective is not None:
            yield Row(
                self.config.physical("content.visibility"),
                action["content_id"],
                json.dumps(effective.record(), separators=(",", ":")),
            )


def _decode(source: str, raw: str | None) -> dict[str, Any]:
    """A moderation.actions record, or a repair: the same record plus `repair_of`."""
    if source == "enforcement.repairs":
        try:
            record = json.loads(raw or "")
        except ValueError:
            raise SchemaError(source, "enforcement.repairs: not a JSON object") from None
        if not isinstance(record, dict) or not isinstance(record.get("repair_of"), str):
            raise SchemaError(source, "enforcement.repairs.repair_of: required string")
        repair_of = record.pop("repair_of")
        action = parse("moderation.actions", json.dumps(record)).model_dump(exclude_none=True)
        return {**action, "repair_of": repair_of}
    return parse("moderation.actions", raw or "").model_dump(exclude_none=True)


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


def main(argv: list[str] | None = None) -> int:
    parser = runtime.job_parser("enforce", __doc__)
    parser.add_argument("--intent-ttl-ms", type=int, default=enforcement.INTENT_TTL_MS)
    parser.add_argument("--max-attempts", type=int, default=enforcement.MAX_ATTEMPTS)
    parser.add_argument("--media-dir", type=Path, default=None)
    args = parser.parse_args(argv)
    settings = Settings.from_env()
    job = runtime.job_config("enforce", args, settings)
    config = EnforceConfig(
        redis_url=settings.redis_url,
        media_dir=str(args.media_dir or settings.run_dir / "media"),
        intent_ttl_ms=args.intent_ttl_ms,
        max_attempts=args.max_attempts,
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
