"""Which model validates which topic, and the one parse function every job uses."""

from __future__ import annotations

import json
import math
import re
from typing import Any

import msgspec
from pydantic import BaseModel, TypeAdapter, ValidationError

from modstream.contract import own
from modstream.contract.content import CONTENT_VERSION_ADAPTER
from modstream.contract.detector import DetectorResult
from modstream.contract.dlq import DlqRecord, describe
from modstream.contract.outputs import (
    AccountAction,
    Action,
    ContentVisibility,
    Decision,
    Discrepancy,
    Exposure,
    IndexEntry,
    Notification,
    ReviewTask,
    ScanRequest,
    ShadowDecision,
)
from modstream.contract.policy import POLICY_RECORD_ADAPTER
from modstream.contract.review import ReviewAccess, ReviewGrant, ReviewLease
from modstream.contract.signals import Appeal, HashBankEntry, Reevaluate, ReviewDecision, UserReport
from modstream.core.limits import Limits

INPUT_TOPICS: dict[str, TypeAdapter[Any]] = {
    "content.versions": CONTENT_VERSION_ADAPTER,
    "detector.results": TypeAdapter(DetectorResult),
    "policy.rules": POLICY_RECORD_ADAPTER,
    "hash.bank": TypeAdapter(HashBankEntry),
    "moderation.reports": TypeAdapter(UserReport),
    "review.decisions": TypeAdapter(ReviewDecision),
    "moderation.appeals": TypeAdapter(Appeal),
    "moderation.reevaluate": TypeAdapter(Reevaluate),
}

OUTPUT_TOPICS: dict[str, TypeAdapter[Any]] = {
    "moderation.decisions": TypeAdapter(Decision),
    "moderation.actions": TypeAdapter(Action),
    "review.tasks": TypeAdapter(ReviewTask),
    "content.visibility": TypeAdapter(ContentVisibility),
    "moderation.discrepancies": TypeAdapter(Discrepancy),
    "account.actions": TypeAdapter(AccountAction),
    "user.notifications": TypeAdapter(Notification),
    "moderation.shadow": TypeAdapter(ShadowDecision),
    "moderation.dlq": TypeAdapter(DlqRecord),
}

# modstream's own topics (not in the contract), validated the same way.
OWN_TOPICS: dict[str, TypeAdapter[Any]] = {
    f"scan.requests.{modality}{lane}": TypeAdapter(ScanRequest)
    for modality in ("text", "image", "video", "audio")
    for lane in ("", ".backfill")
} | {
    "moderation.index": TypeAdapter(IndexEntry),
    "review.grants": TypeAdapter(ReviewGrant),
    "review.leases": TypeAdapter(ReviewLease),
    "review.access": TypeAdapter(ReviewAccess),
    "enforcement.exposure": TypeAdapter(Exposure),
}

TOPIC_MODELS: dict[str, TypeAdapter[Any]] = {**INPUT_TOPICS, **OUTPUT_TOPICS, **OWN_TOPICS}
DEFAULT_LIMITS = Limits()


class SchemaError(ValueError):
    """A record that does not satisfy the contract; its message is safe to log and store."""

    def __init__(self, topic: str, message: str) -> None:
        super().__init__(message)
        self.topic = topic


def parse(topic: str, raw: str | bytes) -> BaseModel:
    """Validate one JSON record of `topic`; raise SchemaError naming the field on any failure."""
    return validate(topic, load_json(topic, raw))


def parse_own(topic: str, raw: str) -> Any:
    """A record this job admitted and wrote back with `model_dump_json` (keyed state, rows
    between operators): read into its Struct (modstream/contract/own.py, no second validation), or,
    for a text that does not decode into it, by pydantic's own JSON parser (the strict loading of
    `load_json` was done on the way in), which raises SchemaError naming the field."""
    read = own.reader(topic)
    if read is not None:
        try:
            return read(raw)
        except msgspec.DecodeError:  # ValidationError included: a field missing
            pass
    try:
        return TOPIC_MODELS[topic].validate_json(raw)
    except ValidationError as error:
        raise SchemaError(topic, describe(error)) from None


def validate(topic: str, document: Any) -> BaseModel:
    """Validate an already loaded JSON document (`load_json`) against `topic`'s model."""
    adapter = TOPIC_MODELS.get(topic)
    if adapter is None:
        raise SchemaError(topic, f"no schema for topic {topic!r}")
    try:
        record: BaseModel = adapter.validate_python(document)
    except ValidationError as error:
        raise SchemaError(topic, describe(error)) from None
    return record


def load_json(topic: str, raw: str | bytes, limits: Limits = DEFAULT_LIMITS) -> Any:
    """Strict JSON for one record, or SchemaError: UTF-8, at most `max_record_bytes`, nesting
    at most `max_json_depth`, no duplicated field name at any depth (the field the watermark
    sees and the one validated must be the same), no NaN or infinity, integers within a signed
    64-bit long (what the JVM side carries). Never raises anything else, whatever `raw` is."""
    text = _text(topic, raw, limits)
    _check_depth(topic, text, limits.max_json_depth)
    document = _plain(text)
    return _strict(topic, text) if document is _DOUBT else document


def _strict(topic: str, text: str) -> Any:
    """`load_json`'s rules checked one by one as the text is parsed (slower than `_plain`):
    what decides a doubtful text and words every refusal."""
    try:
        document = json.loads(
            text,
            object_pairs_hook=_unique_fields,
            parse_constant=_no_constant,
            parse_int=_long,
            parse_float=_finite,
        )
        if _SURROGATE_ESCAPE.search(text) and not _encodable(
            json.dumps(document, ensure_ascii=False)
        ):
            raise _Refused("a string holds a lone surrogate (no UTF-8 text can)")
        return document
    except _Refused as refusal:
        raise SchemaError(topic, f"<record>: {refusal}") from None
    except json.JSONDecodeError as error:
        where = f"line {error.lineno} column {error.colno}"
        raise SchemaError(topic, f"<record>: Invalid JSON at {where}") from None
    except (ValueError, RecursionError, MemoryError) as error:
        raise SchemaError(topic, f"<record>: unreadable JSON ({type(error).__name__})") from None


_DOUBT = object()
_DECODE = msgspec.json.Decoder().decode
_ENCODE = msgspec.json.Encoder().encode
# Every digit as 0: an integer beyond a signed 64-bit long is written with at least 19 digits.
_DIGITS_AS_ZERO = bytes.maketrans(b"123456789", b"000000000")
_NINETEEN_DIGITS = b"0" * 19


def _plain(text: str) -> Any:
    """The document of `text` when it is plainly acceptable, else `_DOUBT`: the strict parser
    then decides and words the refusal. msgspec's decoder is strict JSON (it refuses NaN,
    infinities, numbers beyond a double and lone surrogates itself) in a seventh of the strict
    parser's time; what it lets through and the rules forbid is looked for in the document
    written again: a duplicated field name (written once, so the text had more colons outside
    strings than the document has; an escaped colon, `\\u003a`, is left to the strict parser)
    and a run of 19 digits (an integer that may be beyond a long; rarely a string's digits)."""
    try:
        document = _DECODE(text)
    except (msgspec.DecodeError, UnicodeError, ValueError, RecursionError):
        return _DOUBT
    written = _ENCODE(document)
    if written.count(b":") != text.count(":") or "\\u003" in text:
        return _DOUBT
    if _NINETEEN_DIGITS in written.translate(_DIGITS_AS_ZERO):
        return _DOUBT
    return document


def _text(topic: str, raw: str | bytes, limits: Limits) -> str:
    """The record as UTF-8 text within `max_record_bytes`, or SchemaError: bytes are decoded,
    and a text the Kafka source marked as not UTF-8 (`NOT_UTF8`) is refused by its digest."""
    if isinstance(raw, bytes):
        if len(raw) > limits.max_record_bytes:
            raise _too_large(topic, len(raw), limits)
        try:
            raw = raw.decode("utf-8")
        except UnicodeDecodeError as error:
            raise SchemaError(topic, f"<record>: not UTF-8 (byte {error.start})") from None
    elif raw.startswith(NOT_UTF8):
        digest, _, length = raw[len(NOT_UTF8) :].partition(":")
        raise SchemaError(topic, f"<record>: not UTF-8 ({length} bytes, sha256 {digest[:64]})")
    elif len(raw) > limits.max_record_bytes // 4:
        size = len(raw.encode("utf-8", errors="surrogatepass"))
        if size > limits.max_record_bytes:
            raise _too_large(topic, size, limits)
    if not raw.isascii() and not _encodable(raw):
        raise SchemaError(topic, "<record>: not UTF-8 (a lone surrogate)")
    return raw


class _Refused(ValueError):
    """A JSON text that parses but is not acceptable input (duplicate field, NaN, overflow)."""


_LONG_MIN, _LONG_MAX = -(2**63), 2**63 - 1
# What the Kafka source hands over for a value that is not UTF-8 (no JSON starts with NUL):
# TopicKeyValueDeserializationSchema.NOT_UTF8, then the bytes' sha256 and length.
NOT_UTF8 = "\x00modstream:not-utf-8:"
# A \uD800-\uDFFF escape: only a pair of them is text.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
# A JSON string (with escapes) or a bracket: enough to measure nesting outside strings.
_BRACKETS = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]')


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _too_large(topic: str, size: int, limits: Limits) -> SchemaError:
    return SchemaError(
        topic, f"<record>: {size} bytes, over the {limits.max_record_bytes}-byte limit"
    )


def _check_depth(topic: str, raw: str, max_depth: int) -> None:
    """Refuse nesting deeper than `max_depth` before the parser recurses into it. Cheap for
    ordinary records: only a text with more brackets than the limit is scanned."""
    if raw.count("[") + raw.count("{") <= max_depth:
        return
    depth = 0
    for match in _BRACKETS.finditer(raw):
        token = match.group()
        if token in "[{":
            depth += 1
            if depth > max_depth:
                raise SchemaError(topic, f"<record>: nested deeper than {max_depth} levels")
        elif token in "]}":
            depth -= 1


def _unique_fields(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    document = dict(pairs)
    if len(document) != len(pairs):
        names = [name for name, _ in pairs]
        duplicate = next(name for name in names if names.count(name) > 1)
        shown = duplicate if len(duplicate) <= 64 and duplicate.isidentifier() else "<name>"
        raise _Refused(f"duplicated field name {shown!r}")
    return document


def _no_constant(name: str) -> Any:
    raise _Refused(f"{name} is not a JSON number")


def _long(text: str) -> int:
    if len(text) > 20:
        raise _Refused("integer beyond a signed 64-bit long")
    value = int(text)
    if not _LONG_MIN <= value <= _LONG_MAX:
        raise _Refused("integer beyond a signed 64-bit long")
    return value


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise _Refused("number beyond a 64-bit float")
    return value
