"""moderation.dlq: the one way bad input leaves a job, with a class and a sanitized message.

Contract: docs/CONTRACT.md, "moderation.dlq": `{source_topic, key, error_class
(schema|policy|signature|conflict|transient_exhausted|permanent|stale), message (sanitized: no
content text, no tokens), attempts, workflow_version, raw (at most 4 KiB, or a reference), ts}`.
"v1.1 additions", "DLQ key": the "DLQ key is the record's `content_id` when it is known."

Proved by:
    tests/schemas/test_dlq.py::test_dlq_record_names_topic_key_class_and_field
    tests/schemas/test_dlq.py::test_content_text_and_media_ref_are_kept_only_as_their_sha256
    tests/schemas/test_dlq.py::test_raw_is_capped_at_4_kib_on_a_character_boundary
    tests/schemas/test_dlq.py::test_any_bytes_become_a_valid_dlq_record
    tests/schemas/test_dlq.py::test_no_content_value_survives_in_raw
    tests/schemas/test_dlq.py::test_the_record_round_trips_through_its_own_schema

`dead_letter` is the single function that turns any rejected input into a DLQ record. Its
message names the topic and the offending fields and never repeats the input's values: a
rejected record may carry content text or tokens, and the DLQ is read by more people than
the content is. `raw` keeps the input for diagnosis and replay, capped at 4 KiB, but never
content text (docs/retention.md):
- a JSON object keeps its fields, except that the value of every content field
  (`CONTENT_FIELDS` at any depth, plus `FREE_TEXT_FIELDS` of the record's topic) becomes
  `sha256:<hex>` of its UTF-8, and the object gains `"_modstream_redacted": [field, ...]`:
  such a record is not the one that was sent, so `dlq replay` must not send it back;
- anything else (not JSON, not an object, not UTF-8, over the record size or nesting limit)
  is kept only as `sha256:<hex>` of the bytes received; the message gives its size.
An input or message holding one of the deployment's secret values (modstream/core/redaction.py)
keeps neither: the message shows the secret masked, `raw` only the input's digest.

Every record names its `owner`, the team that fixes what it says is wrong (`owner_of`: the one
map from error class, source topic and producing job to a team; docs/OPERATIONS.md, "DLQ"),
the `job` that wrote it, and its `history`: the earlier attempts at the same input (a letter
`dlq replay` sent back and that failed again; modstream/ops/dlq.py), oldest first, at most
`HISTORY_LIMIT`.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from typing import Annotated, Any, Literal

from pydantic import Field, ValidationError, model_validator

from modstream.contract.common import EventTime, Id, OutputRecord
from modstream.contract.workflow import WORKFLOW_VERSION
from modstream.core import redaction
from modstream.core.limits import Limits

ErrorClass = Literal[
    "schema",
    "policy",
    "signature",
    "conflict",
    "transient_exhausted",
    "permanent",
    "stale",
]

RAW_LIMIT_BYTES = 4096
MESSAGE_LIMIT_CHARS = 1024
_MAX_LISTED_ERRORS = 5

# Fields whose values are user content or point to it (the media), on every topic and at any
# depth: an upload's text and media reference, and the names platforms use for captions,
# titles, descriptions and transcripts.
CONTENT_FIELDS = frozenset(
    {
        "text",
        "caption",
        "title",
        "description",
        "body",
        "comment",
        "transcript",
        "alt_text",
        "media_ref",
        "media_url",
        "thumbnail_url",
        "url",
    }
)
# Free text a person wrote, on the topics where the field is free text (elsewhere `reason` is
# a reason code, e.g. on moderation.reports, and is kept).
FREE_TEXT_FIELDS: dict[str, frozenset[str]] = {
    "review.decisions": frozenset({"reason"}),
    "moderation.reevaluate": frozenset({"reason"}),
    "moderation.appeals": frozenset({"reason", "statement"}),
}
# Added to a redacted object: the fields whose values were replaced (sorted, deduplicated).
REDACTED_MARKER = "_modstream_redacted"
# Nesting beyond this is not walked: the whole input is kept only as its digest.
_LIMITS = Limits()
_LONG_MAX = 2**63 - 1

# The teams a DLQ record can be assigned to (docs/OPERATIONS.md, "DLQ": who they are).
Owner = Literal[
    "security",
    "policy-authors",
    "review-ops",
    "hash-banks",
    "enforcement",
    "detection",
    "ingest",
    "moderation",
    "platform",
]
# Who owns a record, first match wins: its class says more than its topic, its topic more than
# the job that refused it. A class or topic names what must be fixed (a key, a policy, a
# reviewer's tooling); otherwise the job that could not handle the input owns it.
OWNER_BY_CLASS: dict[str, Owner] = {"signature": "security", "policy": "policy-authors"}
OWNER_BY_TOPIC: dict[str, Owner] = {
    "policy.rules": "policy-authors",
    "review.decisions": "review-ops",
    "review.grants": "review-ops",
    "review.leases": "review-ops",
    "moderation.appeals": "review-ops",
    "hash.bank": "hash-banks",
}
OWNER_BY_JOB: dict[str, Owner] = {
    "enforce": "enforcement",
    "reconciler": "enforcement",
    "scan": "detection",
    "ingest": "ingest",
    "ingest_check": "ingest",
    "moderation": "moderation",
    "policy_store": "moderation",
}
DEFAULT_OWNER: Owner = "platform"
# Earlier attempts a record carries; older ones are dropped (the count stays in `attempts`).
HISTORY_LIMIT = 8


def _contract_topic(source_topic: str, names: Iterable[str]) -> str | None:
    """The one of `names` that `source_topic` is, with or without a deployment prefix."""
    for name in names:
        if source_topic == name or source_topic.endswith("." + name):
            return name
    return None


def owner_of(source_topic: str, error_class: str, job: str) -> Owner:
    """The team that owns a DLQ record (OWNER_BY_CLASS, then _BY_TOPIC, then _BY_JOB)."""
    if error_class in OWNER_BY_CLASS:
        return OWNER_BY_CLASS[error_class]
    topic = _contract_topic(source_topic, OWNER_BY_TOPIC)
    if topic is not None:
        return OWNER_BY_TOPIC[topic]
    return OWNER_BY_JOB.get(job, DEFAULT_OWNER)


class DlqAttempt(OutputRecord):
    """An earlier attempt at the same input: the record it left (its ts, class, message) and
    the job that wrote it."""

    ts: EventTime
    error_class: ErrorClass
    message: Annotated[str, Field(max_length=MESSAGE_LIMIT_CHARS)]
    job: Id


class DlqRecord(OutputRecord):
    """A rejected input and why it was rejected. `owner`, `job` and `history` are modstream's
    additions (docs/contract-notes.md); a record written before them reads with its owner
    derived from its class and topic, job `unknown` and no history."""

    source_topic: Id
    key: str | None
    error_class: ErrorClass
    message: Annotated[str, Field(max_length=MESSAGE_LIMIT_CHARS)]
    attempts: Annotated[int, Field(ge=1)]
    workflow_version: Annotated[int, Field(ge=1)]
    raw: str = Field(
        description="the input without content text, cut to at most 4096 UTF-8 bytes: a JSON "
        "object with content fields replaced by sha256:<hex>, or sha256:<hex> of the whole input"
    )
    ts: EventTime
    owner: Owner
    job: Id
    history: list[DlqAttempt] = Field(default_factory=list, max_length=HISTORY_LIMIT)

    @model_validator(mode="before")
    @classmethod
    def _written_before_owners(cls, data: Any) -> Any:
        """A record written before `owner` and `job` existed: derived, never refused."""
        if isinstance(data, dict) and ("owner" not in data or "job" not in data):
            data = {"job": "unknown", **data}
            if "owner" not in data:
                topic, error_class = data.get("source_topic"), data.get("error_class")
                if isinstance(topic, str) and isinstance(error_class, str):
                    data["owner"] = owner_of(topic, error_class, str(data["job"]))
        return data

    def attempt(self) -> DlqAttempt:
        """This record as an earlier attempt of the next record for the same input."""
        return DlqAttempt(
            ts=self.ts, error_class=self.error_class, message=self.message, job=self.job
        )


def with_attempt(history: list[DlqAttempt], earlier: DlqAttempt) -> list[DlqAttempt]:
    """`history` and then `earlier`, the newest HISTORY_LIMIT kept."""
    return [*history, earlier][-HISTORY_LIMIT:]


def cap_utf8(text: str, limit_bytes: int) -> tuple[str, int]:
    """Cut `text` to at most `limit_bytes` of UTF-8 on a character boundary; return it and the
    original size in bytes."""
    encoded = text.encode("utf-8", errors="replace")
    if len(encoded) <= limit_bytes:
        return text, len(encoded)
    return encoded[:limit_bytes].decode("utf-8", errors="ignore"), len(encoded)


def sha256_ref(data: bytes) -> str:
    """The reference the DLQ keeps instead of content: `sha256:<hex>`."""
    return "sha256:" + hashlib.sha256(data).hexdigest()


class _Unkept(Exception):
    """The input cannot be kept field by field: keep only its digest."""


def _utf8(text: str) -> bytes:
    return text.encode("utf-8", errors="surrogatepass")


def _hidden(value: Any) -> str:
    if isinstance(value, str):
        return sha256_ref(_utf8(value))
    return sha256_ref(_utf8(json.dumps(value, sort_keys=True, separators=(",", ":"))))


def _redact(value: Any, names: frozenset[str], found: set[str], depth: int) -> Any:
    """`value` with the values of `names` replaced by their digest, at any depth."""
    if depth > _LIMITS.max_json_depth:
        raise _Unkept("nested too deep")
    if isinstance(value, dict):
        redacted = {}
        for name, item in value.items():
            if name in names:
                found.add(name)
                redacted[name] = _hidden(item)
            else:
                redacted[name] = _redact(item, names, found, depth + 1)
        return redacted
    if isinstance(value, list):
        return [_redact(item, names, found, depth + 1) for item in value]
    return value


def _content_names(source_topic: str) -> frozenset[str]:
    names = CONTENT_FIELDS
    for topic, extra in FREE_TEXT_FIELDS.items():
        if source_topic == topic or source_topic.endswith("." + topic):
            names = names | extra
    return names


def kept_raw(source_topic: str, raw: str | bytes | None) -> tuple[str, str | None]:
    """What `raw` of a DLQ record keeps of an input, and a note for the message when that is
    not the input as received (redacted fields, or only a digest)."""
    if raw is None or raw == "" or raw == b"":
        return "", None
    data = raw if isinstance(raw, bytes) else _utf8(raw)
    digest_only = (sha256_ref(data), f"raw kept as its sha256 only ({len(data)} bytes)")
    if len(data) > _LIMITS.max_record_bytes:
        return digest_only
    try:
        text = data.decode("utf-8") if isinstance(raw, bytes) else raw
        document = json.loads(text)
        if not isinstance(document, dict):
            raise _Unkept("not a JSON object")
        found: set[str] = set()
        redacted = _redact(document, _content_names(source_topic), found, 1)
    except (_Unkept, ValueError, RecursionError, MemoryError):
        return digest_only
    if not found:
        try:
            text.encode("utf-8")
            return text, None
        except UnicodeEncodeError:  # lone surrogates: keep the parsed object, escaped
            return json.dumps(redacted, separators=(",", ":")), None
    redacted[REDACTED_MARKER] = sorted(found)
    try:
        kept = json.dumps(redacted, ensure_ascii=False, separators=(",", ":"))
        kept.encode("utf-8")
    except UnicodeEncodeError:
        kept = json.dumps(redacted, separators=(",", ":"))
    return kept, f"{', '.join(sorted(found))} kept as sha256"


def is_redacted(raw: str | None) -> bool:
    """Whether a DLQ record's `raw` is not the input as sent (content fields replaced, or only a
    digest kept): `dlq replay` must not send it back (its `stale` reason: `redacted`)."""
    if not raw:
        return False
    if raw.startswith("sha256:"):
        return True
    return f'"{REDACTED_MARKER}":' in raw


def _location(loc: tuple[int | str, ...]) -> str:
    return ".".join(str(part) for part in loc) if loc else "<record>"


def _sanitized(error: dict[str, Any]) -> str:
    """One pydantic error as `field: message`, with the input's value masked if echoed."""
    if error.get("type") == "union_tag_invalid":
        context = error.get("ctx") or {}
        expected = context.get("expected_tags", "")
        discriminator = str(context.get("discriminator", "the tag")).strip("'")
        return f"{discriminator}: unknown value (expected one of {expected})"
    message = str(error.get("msg", "invalid"))
    value = error.get("input")
    if isinstance(value, str | int | float) and not isinstance(value, bool):
        echoed = str(value)
        if echoed and echoed in message:
            message = message.replace(echoed, "<value>")
    return f"{_location(tuple(error.get('loc', ())))}: {message}"


def describe(error: BaseException | str) -> str:
    """A safe, field-naming description of why a record was rejected."""
    if isinstance(error, str):
        return error
    if isinstance(error, ValidationError):
        details = error.errors(include_url=False)
        parts = [_sanitized(dict(detail)) for detail in details[:_MAX_LISTED_ERRORS]]
        if len(details) > _MAX_LISTED_ERRORS:
            parts.append(f"and {len(details) - _MAX_LISTED_ERRORS} more")
        return "; ".join(parts)
    if isinstance(error, ValueError):
        # SchemaError and the operators' own errors carry messages we wrote, naming fields.
        return str(error)
    # An unexpected exception: its type only. Its text may repeat the input (a KeyError names
    # the missing key, a ValueError from a library its argument).
    return f"unexpected {type(error).__name__}"


def dead_letter(
    source_topic: str,
    key: str | None,
    raw: str | bytes | None,
    error: BaseException | str,
    *,
    ts: int,
    error_class: ErrorClass = "schema",
    attempts: int = 1,
    operator: str = "ingest",
    history: list[DlqAttempt] | None = None,
    owner: Owner | None = None,
) -> DlqRecord:
    """Build the DLQ record for an input that `operator` rejected.

    `ts` is the input's event time when it has one, else the Kafka record's timestamp, so a
    replay of the same input writes the same DLQ record. `owner` defaults to `owner_of`'s;
    `history`: the earlier attempts at this input, oldest first.
    """
    raw_text, note = kept_raw(source_topic, raw)
    redactor = redaction.current()
    if redactor.text(raw_text) != raw_text:  # it holds a secret: keep its digest only
        data = raw if isinstance(raw, bytes) else _utf8(raw or "")
        raw_text, note = sha256_ref(data), "raw kept as its sha256 only (it held a secret)"
    raw_text, raw_size = cap_utf8(raw_text, RAW_LIMIT_BYTES)
    notes = [note] if note else []
    if raw_size > RAW_LIMIT_BYTES:
        notes.append(f"raw cut from {raw_size} to {RAW_LIMIT_BYTES} bytes")
    suffix = f" ({'; '.join(notes)})" if notes else ""
    message = redactor.text(f"{operator} rejected a {source_topic} record: {describe(error)}")
    message, _ = cap_utf8(message, MESSAGE_LIMIT_CHARS - len(suffix))
    message = (message + suffix)[:MESSAGE_LIMIT_CHARS]
    if key is not None:  # a key from a hostile producer may not even be valid UTF-8
        key = key.encode("utf-8", errors="replace").decode("utf-8")
    return DlqRecord(
        source_topic=source_topic,
        key=key,
        error_class=error_class,
        message=message,
        attempts=max(1, attempts),
        workflow_version=WORKFLOW_VERSION,
        raw=raw_text,
        ts=min(max(0, ts), _LONG_MAX),
        owner=owner or owner_of(source_topic, error_class, operator),
        job=operator,
        history=list(history or [])[-HISTORY_LIMIT:],
    )
