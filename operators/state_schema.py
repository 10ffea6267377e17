"""Schema versions of the moderation job's keyed state documents, and their migrations.

A checkpoint outlives the code that wrote it: a job restored after a change of its state's shape
reads documents of an earlier shape. Every document the job stores (the version's state, full,
tombstone or retired; the reporter's; the author's; the hash key's retro join in
jobs/hash_retro.py) carries `schema`; every read goes through
`migrate`, which upgrades an earlier shape one step at a time to `STATE_SCHEMA`. A document of a
later schema than this code knows is refused (`StateTooNew`): the job sets the input aside to the
DLQ and leaves the stored state as it is, instead of misreading it or crash-looping on it.
docs/moderation.md, "State schema".

Schemas (the `version` document; `reporter` and `account` kept one shape since 32d9481, `retro`
came with issue 12: their unversioned shape is schema 1):
  0  before issue 12 (commit 32d9481): no `schema`, no `deadline_timer`, `asked_at`, `expiry`,
     `expiry_timer`, `provisional_expired` or `scan`; `last` without `reasons` and `refs`;
     evidence entries without `ts`; tombstones that kept the content's facts.
  1  issue 12's shape, still without `schema` (retired records and tombstones included).
  2  the same shape with `schema: 2`.
  3  the same shape; the `version` document stored as MessagePack bytes (`dump_version`, msgspec:
     about four fifths of its JSON's bytes, written in three fifths of the time), its Flink
     value bytes too (jobs/moderation_moderate.py, `VERSION_STATE`). The other kinds stay JSON.
  4  issue 27 point 4: the `version` document gains `human_ids`, digests of the reviews' and
     appeals' event ids applied (operators/human.py), kept by retired records too, and `human`
     gains `id`, the digest of the review in force. An earlier document gains an empty list
     (`_version_3_to_4`); a `human` without `id` comes before any review at its `ts`. The other
     kinds keep their shape.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import msgspec
import orjson

from operators import jsonio
from operators.moderation import TOMBSTONE_KEEPS, new_state

STATE_SCHEMA = 4
SCHEMA_FIELD = "schema"
# The keyed documents (their ValueState names in jobs/moderation_*.py and jobs/hash_retro.py).
KINDS = ("version", "reporter", "account", "retro")

Document = dict[str, Any]

# Fields the version document gained in issue 12, at their defaults (operators/version_state.py's
# `new_state`): a deadline not waiting for the detectors, no provisional expiry tracked.
_ISSUE_12_DEFAULTS: dict[str, Any] = {
    "deadline_timer": None,
    "asked_at": None,
    "expiry": None,
    "expiry_timer": None,
    "provisional_expired": False,
}


class StateTooNew(Exception):
    """A stored document written by a later version of the job than this one."""

    def __init__(self, kind: str, found: int) -> None:
        super().__init__(refusal(kind, found))
        self.kind = kind
        self.found = found


def refusal(kind: str, found: int) -> str:
    """The DLQ message for a document this code cannot read: both versions and what to do."""
    return (
        f"moderation: keyed state `{kind}` has schema {found}, newer than the schema "
        f"{STATE_SCHEMA} this job knows; input set aside, the stored state left as it is: "
        "restore with the code that wrote it (or newer)"
    )


def schema_of(doc: Document, kind: str) -> int:
    """The document's schema: its `schema` field, else the unversioned shape it has."""
    if SCHEMA_FIELD in doc:
        return int(doc[SCHEMA_FIELD])
    if kind == "version" and not doc.get("retired") and "deadline_timer" not in doc:
        return 0
    return 1


def _version_0_to_1(doc: Document) -> Document:
    """Before issue 12 every required detector was asked at the upload (no cost ordering), so a
    version with content has asked its models (`scan: models`, as today's state for a policy
    that gates nothing). A provisional expiry is not tracked: the old document does not hold
    the decision's `expires_ts`, so such a version is decided again only by its next input or
    deadline. An appeal of a decision made before the upgrade shows its reviewer the reason
    `appeal` until a new revision stores the reasons (the old `last` has none)."""
    upgraded = {**_ISSUE_12_DEFAULTS, **doc}
    if upgraded.get("deleted"):
        # Tombstones kept the content's facts then; today's keep nothing of the content.
        kept = {key: upgraded[key] for key in TOMBSTONE_KEEPS if key in upgraded}
        return {**new_state(upgraded["cid"], upgraded["ver"]), **kept}
    if upgraded.get("content") is not None:
        upgraded.setdefault("scan", "models")
    return upgraded


def _version_3_to_4(doc: Document) -> Document:
    """No document before schema 4 says which of its event ids were reviews or appeals: a full
    state or tombstone gains an empty `human_ids` (its `events` still makes a re-sent input a
    duplicate until it retires); a retired record stays without it (`timers.expanded` restores
    it, empty). Such a version's earlier human inputs are then refused after retirement only by
    the newest-`ts` rule (docs/moderation.md, "Human input: replays and order")."""
    if not doc.get("retired"):
        doc.setdefault("human_ids", [])
    return doc


def _same_shape(doc: Document) -> Document:
    return doc


# (kind, from schema) -> the step to the next schema.
_STEPS: dict[tuple[str, int], Callable[[Document], Document]] = {
    ("version", 0): _version_0_to_1,
    ("version", 1): _same_shape,
    ("reporter", 1): _same_shape,
    ("account", 1): _same_shape,
    ("retro", 1): _same_shape,
    # Schema 3 changed how the version document is stored, not its shape.
    ("version", 2): _same_shape,
    ("reporter", 2): _same_shape,
    ("account", 2): _same_shape,
    ("retro", 2): _same_shape,
    ("version", 3): _version_3_to_4,
    ("reporter", 3): _same_shape,
    ("account", 3): _same_shape,
    ("retro", 3): _same_shape,
}
_PACK = msgspec.msgpack.Encoder().encode
_UNPACK = msgspec.msgpack.Decoder().decode


def migrate(doc: Document, kind: str) -> Document:
    """`doc` upgraded step by step to `STATE_SCHEMA` (a new dict; `doc` is not changed).
    Raises StateTooNew for a later schema, ValueError for a schema no step starts from."""
    found = schema_of(doc, kind)
    if found > STATE_SCHEMA:
        raise StateTooNew(kind, found)
    upgraded = dict(doc)
    for schema in range(found, STATE_SCHEMA):
        step = _STEPS.get((kind, schema))
        if step is None:
            raise ValueError(f"moderation: keyed state `{kind}`: no migration from schema {schema}")
        upgraded = step(upgraded)
    upgraded[SCHEMA_FIELD] = STATE_SCHEMA
    return upgraded


def load(raw: str | bytes | None, kind: str) -> Document | None:
    """A stored document (None: no state), migrated to `STATE_SCHEMA`: MessagePack bytes
    (`dump_version`) or JSON text (every kind before schema 3, and the kinds other than
    `version` since). orjson reads JSON in a third of json's time; a document it refuses (NaN
    or a huge integer, which json writes and earlier code may have stored) is read by json."""
    if not raw:
        return None
    if isinstance(raw, bytes) and not raw.startswith(b"{"):
        doc = _UNPACK(raw)  # a JSON document starts with `{`, a MessagePack map never does
    else:
        try:
            doc = orjson.loads(raw)
        except orjson.JSONDecodeError:
            doc = json.loads(raw)
    if isinstance(doc, dict) and doc.get(SCHEMA_FIELD) == STATE_SCHEMA:
        return doc  # current already (every document this code wrote): nothing to copy
    return migrate(doc, kind)


def dump(state: Document) -> str:
    """The document as stored, stamped with `STATE_SCHEMA`: compact JSON (operators/jsonio.py,
    non-ASCII kept as UTF-8, which json.loads reads as it read json's escapes)."""
    return jsonio.dumps({**state, SCHEMA_FIELD: STATE_SCHEMA})


def dump_version(state: Document) -> bytes:
    """The version document as stored since schema 3: MessagePack, read back by `load` as the
    same document its JSON would give (string keys only, no NaN: tests/operators). A value
    MessagePack cannot hold (an integer beyond 64 bits) is stored as JSON text, which `load`
    reads as well."""
    doc = {**state, SCHEMA_FIELD: STATE_SCHEMA}
    try:
        return _PACK(doc)
    except (OverflowError, TypeError):
        return jsonio.dumps(doc).encode()
