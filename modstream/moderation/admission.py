"""Admission of one input record: the only way a record becomes input that may decide or move
event time (contract v1.1, "Time you can trust").

Contract: docs/CONTRACT.md, "v1.1 additions", "Time you can trust": "A keyed input whose `ts`
lies more than the deployment's `max_future_skew_ms` (default 300000) ahead of the processing
clock, or before 2000-01-01, is refused to the DLQ (`error_class: "schema"`) and moves no clock.
Policy and control records may carry a future `ts` (scheduled changes); they never move event
time. Only records that passed validation move event time. A JSON object with a duplicated field
name is invalid."

Proved by:
    tests/jobs/test_moderation_adapter.py::test_keyed_input_stamped_beyond_the_allowed_skew_or_before_2000_is_refused
    tests/jobs/test_moderation_adapter.py::test_policy_records_may_be_scheduled_ahead_and_never_move_event_time
    tests/schemas/test_load_json.py::test_refused_as_the_strict_parser_words_it

A record is admitted when its JSON is strict (`modstream.contract.registry.load_json`), it satisfies
its topic's model, its producer's signature verifies where one is present or required, and, for
keyed input, its `ts` lies between 2000-01-01 and `max_future_skew_ms` ahead of the processing
clock. Anything else is refused with the DLQ class and a message that names the field and never
echoes content. Nothing here raises: an unexpected failure is refused as `permanent`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final

from pydantic import BaseModel

from modstream.contract import SchemaError
from modstream.contract.common import MAX_ID_CHARS
from modstream.contract.registry import load_json, validate
from modstream.core.limits import EARLIEST_TS, Limits
from modstream.core.values import Value

_LONG_MAX = 2**63 - 1
# (topic, document, the text it was parsed from) -> None when the signature is acceptable, else
# the reason (modstream/trust/signing.py `check`).
SignatureCheck = Callable[[str, Mapping[str, Any], str | bytes], str | None]


class Admitted(Value):
    """A record admission lets through, and its trusted event time."""

    FIELDS = ("record", "ts")

    def __init__(self, record: BaseModel, ts: int) -> None:
        self.record: Final = record
        self.ts: Final = ts


class Refused(Value):
    """A record admission refuses: its DLQ class and message, and where its letter goes."""

    FIELDS = ("error_class", "message", "ts", "key")

    def __init__(self, error_class: str, message: str, ts: int, key: str | None) -> None:
        self.error_class: Final = error_class  # modstream.contract.dlq.ErrorClass
        self.message: Final = message
        self.ts: Final = ts  # the record's own ts when usable, else the transport's timestamp
        self.key: Final = key  # the record's content_id when known, else the transport's key


def admit(
    topic: str,
    raw: str | bytes | None,
    *,
    now_ms: int,
    limits: Limits,
    fallback_ts: int,
    fallback_key: str | None,
    time_checked: bool,
    signature: SignatureCheck | None = None,
) -> Admitted | Refused:
    """Admit or refuse one record of `topic`; `time_checked` for keyed input (policy, control
    and hash-bank records may be scheduled ahead and never move event time)."""
    document: Any = None
    try:
        document = load_json(topic, raw if raw is not None else "", limits)
        record = validate(topic, document)
        ts = int(record.ts)  # type: ignore[attr-defined]
        if time_checked:
            problem = time_problem(ts, now_ms, limits.max_future_skew_ms)
            if problem is not None:
                return _refused("schema", f"ts: {problem}", document, fallback_ts, fallback_key)
        if signature is not None:
            reason = signature(topic, document, raw if raw is not None else "")
            if reason is not None:
                return _refused("signature", reason, document, fallback_ts, fallback_key)
        return Admitted(record, ts)
    except SchemaError as error:
        return _refused("schema", str(error), document, fallback_ts, fallback_key)
    except Exception as error:  # a bug or a resource failure: dead-letter it, never crash
        message = f"unexpected {type(error).__name__} while admitting the record"
        return _refused("permanent", message, document, fallback_ts, fallback_key)


# Which admitted input moves event time, by the lane it carries (ValidatedTime.java;
# docs/moderation.md, "Time"). Uploads and their evidence hold it while a backlog of them is read:
# a review or appeal must not be applied before the upload it follows is read. Human input
# (reviews, appeals, reports) never holds it, or one producer of back-dated valid records held
# every decision (issue 27); it is still applied at its own ts, and a live one tells a job that
# has read nothing else yet that its input is live (a witness). Re-evaluation never touches it.
TIME_HOLDING_TOPICS = ("content.versions", "detector.results")
WITNESS_TOPICS = ("moderation.reports", "review.decisions", "moderation.appeals")
WITNESS = "~"  # ValidatedTime.WITNESS


def time_lane(topic: str, lane: str) -> str:
    """The lane an admitted record of `topic` (contract name) read from `lane` carries into
    event time: its own, a witness lane, or "" (never moves event time)."""
    if not lane:
        return ""
    if topic in TIME_HOLDING_TOPICS:
        return lane
    if topic in WITNESS_TOPICS:
        return WITNESS + lane
    return ""


def time_problem(ts: int, now_ms: int, max_future_skew_ms: int) -> str | None:
    """Why `ts` cannot be trusted as event time, or None."""
    if ts < EARLIEST_TS:
        return "before 2000-01-01"
    if ts > now_ms + max_future_skew_ms:
        return f"more than {max_future_skew_ms} ms ahead of the processing clock"
    return None


def event_time(document: Any, fallback_ts: int) -> int:
    """The record's own `ts` when it is a usable integer, else the transport's timestamp: the
    time a DLQ record carries. Takes a loaded document, never parses raw text itself."""
    ts = document.get("ts") if isinstance(document, dict) else None
    if isinstance(ts, int) and not isinstance(ts, bool) and 0 <= ts <= _LONG_MAX:
        return ts
    return max(0, fallback_ts)


def document_of(raw: str | bytes | None, limits: Limits | None = None) -> Any:
    """The JSON document of `raw` under the strict rules, or None when it has none."""
    try:
        return load_json("", raw if raw is not None else "", limits or Limits())
    except SchemaError:
        return None


def _refused(
    error_class: str, message: str, document: Any, fallback_ts: int, fallback_key: str | None
) -> Refused:
    content_id = document.get("content_id") if isinstance(document, dict) else None
    usable = (
        isinstance(content_id, str)
        and 0 < len(content_id) <= MAX_ID_CHARS
        and _utf8_safe(content_id)
    )
    key = content_id if usable else fallback_key
    return Refused(error_class, message, event_time(document, fallback_ts), key)


def _utf8_safe(text: str) -> bool:
    """Whether `text` can be a key: a JSON escape can make a lone surrogate, which no UTF-8
    text carries, and a Row holding one fails on its way to the JVM (tests/fuzz)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
