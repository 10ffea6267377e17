"""moderation: the DLQ rows its adapters write when an input, a timer or a stored state cannot
be handled. One record never stops the job (docs/moderation.md, "Bad input"): it is set aside as
`permanent`, the message naming the failure, never the content."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator

from pyflink.common import Row
from pyflink.datastream import OutputTag

from modstream.contract import dead_letter
from modstream.jobs import runtime
from modstream.jobs.moderation.config import ModerationConfig
from modstream.moderation import state_schema

DLQ_TAG = OutputTag("dlq", runtime.SINK_ROW)
# Everything a record must not take down: what a handler may raise on hostile input or a bug.
HANDLER_FAILURES = (Exception, RecursionError, MemoryError)
TIMERS = "moderation.timers"  # DLQ source of a failed timer (no input record)


def failure_letter(
    config: ModerationConfig, topic: str, key: str | None, raw: str, ts: int, error: BaseException
) -> Row:
    """A DLQ row (`permanent`) for an admitted input whose handling failed: the input is set
    aside and the operator goes on. The message names the failure, never the content."""
    message = f"{type(error).__name__} while handling the record; input set aside"
    print(f"moderation: {message} ({topic}, key {key!r})", file=sys.stderr, flush=True)
    return _permanent(config, topic, key, raw, ts, message)


def _permanent(
    config: ModerationConfig, topic: str, key: str | None, raw: str, ts: int, message: str
) -> Row:
    letter = dead_letter(
        config.physical(topic),
        key,
        raw,
        message,
        ts=ts,
        error_class="permanent",
        operator="moderation",
    )
    return Row(config.physical("moderation.dlq"), key, letter.model_dump_json())


def schema_letters(
    config: ModerationConfig,
    too_new: state_schema.StateTooNew,
    key: str | None,
    inputs: list[tuple[str, str, int]],
    timestamp: int,
) -> Iterator[Row]:
    """The key's stored state has a schema newer than this code
    (modstream/moderation/state_schema.py): each input (or the timer, when none came) to the DLQ as
    `permanent`, naming both schemas; the state is left untouched and the job goes on (no crash loop
    on a restore). Each letter is keyed by its input's `content_id` where it has one, else by
    `key`."""
    message = str(too_new)
    print(f"{message} (key {key!r})", file=sys.stderr, flush=True)
    for topic, raw, ts in inputs or [(TIMERS, "", timestamp)]:
        try:
            content_id = json.loads(raw).get("content_id", key) if raw else key
        except (ValueError, AttributeError):
            content_id = key
        yield _permanent(config, topic, content_id, raw, ts, message)
