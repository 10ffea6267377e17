"""Schema versions of the moderation job's keyed state documents, and their migrations.

A checkpoint outlives the code that wrote it: a job restored after a change of its state's shape
reads documents of an earlier shape. Every document the job stores (the version's state, full,
tombstone or retired; the reporter's; the author's; the hash key's retro join in
modstream/jobs/moderation/hash_retro.py) carries `schema`; every read goes through
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
     value bytes too (modstream/jobs/moderation/moderate.py, `VERSION_STATE`). The other kinds stay
     JSON.
  4  issue 27 point 4: the `version` document gains `human_ids`, digests of the reviews' and
     appeals' event ids applied (modstream/moderation/appeals_and_reviews.py), kept by retired
     records too, and `human` gains `id`, the digest of the review in force. An earlier document
     gains an empty list (`_version_3_to_4`); a `human` without `id` comes before any review at its
     `ts`. The other kinds keep their shape.
  5  issue 26 point 1: the `version` document is a typed structure (modstream/moderation/state.py
     `VersionState`, msgspec) with the contract's names (`content_id`, `content_version`,
     `decision_revision`, `last_decision`, `appeal_id`; `last_decision.evidence_refs`,
     `human.digest`), its nested parts typed too (content, evidence results, the last and the
     human decision, shadow candidates, leases, the brigading window), stored as a MessagePack
     array in its fields' order (`dump_version`): no field names in the bytes. `schema` is
     its first element; a later schema appends fields, never reorders them. `events` keeps
     16-hex-digit digests of the event ids (`version_state.event_digest`, as `human_ids`). Read
     straight into the structure (`load_version`); every earlier document (a map, or JSON text)
     migrates to schema 4 step by step and then into it (`_version_4_to_5` renames and digests,
     `version_state.from_document`).
     Tombstones and retired records are the same structure, every field they do not keep at
     its default (a retired record is no longer stored without them: `timers.expanded` went).
     (One type for every reader, at one byte per defaulted field, rather than a second type
     every reader would have to tell apart.) A full state or tombstone from before keeps its
     `events` (digested); a retired one gains an empty `human_ids`. The other kinds keep their
     shape.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import msgspec
import orjson

from modstream.core import jsonio

# STATE_SCHEMA re-exported: the job's savepoint label reads it here (jobs/moderation/job.py).
from modstream.moderation.state import STATE_SCHEMA as STATE_SCHEMA
from modstream.moderation.state import (
    VersionState,
    event_digest,
    from_document,
    to_document,
)

SCHEMA_FIELD = "schema"
# The keyed documents (their ValueState names in jobs/moderation_*.py and
# modstream/jobs/moderation/hash_retro.py).
KINDS = ("version", "reporter", "account", "retro")

Document = dict[str, Any]

# Fields the version document gained in issue 12, at their defaults (modstream/moderation/state.py's
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
        kept = {key: upgraded[key] for key in _TOMBSTONE_KEPT_THEN if key in upgraded}
        return {**_schema_4_defaults(), "cid": upgraded["cid"], "ver": upgraded["ver"], **kept}
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


# What a tombstone kept from issue 12 to schema 4 (`timers.TOMBSTONE_KEEPS`, by then names).
_TOMBSTONE_KEPT_THEN = ("events", "rev", "last", "appeal", "deleted", "ttl", "ttl_timer")


def _schema_4_defaults() -> Document:
    """A schema 4 full state's fields at their defaults, but its identity (`new_state` then)."""
    return {
        "content": None, "events": {}, "evidence": {}, "reporters": {}, "report_weight": 0.0,
        "burst": [], "burst_new": 0, "human": None, "human_ids": [], "appeal": None, "rev": 0,
        "last": None, "tasks": [], "open_tasks": [], "deadline": None, "deleted": False,
        "shadow": {}, "ttl": None, "ttl_timer": None, **_ISSUE_12_DEFAULTS,
    }  # fmt: skip


# Schema 4 names -> `VersionState`'s (schema 5).
_RENAMED = {
    "cid": "content_id",
    "ver": "content_version",
    "rev": "decision_revision",
    "last": "last_decision",
    "appeal": "appeal_id",
}


def _version_4_to_5(doc: Document) -> Document:
    """Schema 4's names to the contract's; `events` keeps digests of the event ids
    (`version_state.event_digest`, as `human_ids` does); `last.refs` is `evidence_refs`,
    `human.id` is `digest`, a shadow candidate's and a lease's lists name their fields, and a
    burst entry `[ts, new_reporter]` too. Fields schema 5 does not have (`schema` aside) are
    dropped; `version_state.from_document` fills the defaults of those absent."""
    upgraded = {_RENAMED.get(key, key): value for key, value in doc.items()}
    upgraded["events"] = {event_digest(event_id): 1 for event_id in upgraded.get("events") or {}}
    last = upgraded.get("last_decision")
    if last is not None:
        last = {**last, "evidence_refs": last.get("refs")}
        last.pop("refs", None)
        upgraded["last_decision"] = last
    human = upgraded.get("human")
    if human is not None:
        human = {**human, "digest": human.get("id")}
        human.pop("id", None)
        upgraded["human"] = human
    upgraded["shadow"] = {
        key: dict(zip(("outcome", "restriction", "state", "decision_revision"), kept, strict=True))
        for key, kept in (upgraded.get("shadow") or {}).items()
    }
    upgraded["leases"] = {
        task_id: {"reviewer_id": held[0], "expires_ts": held[1]}
        for task_id, held in (upgraded.get("leases") or {}).items()
    }
    upgraded["burst"] = [
        {"ts": seen[0], "new_reporter": seen[1]} for seen in upgraded.get("burst") or []
    ]
    return upgraded


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
    ("version", 4): _version_4_to_5,
    ("reporter", 4): _same_shape,
    ("account", 4): _same_shape,
    ("retro", 4): _same_shape,
}
_PACK = msgspec.msgpack.Encoder().encode
_UNPACK = msgspec.msgpack.Decoder().decode
# Schema 5 and later: the `VersionState` array (a later schema's appended fields are skipped).
_UNPACK_VERSION = msgspec.msgpack.Decoder(VersionState).decode
# The first byte of a MessagePack array: fixarray, array 16, array 32.
_ARRAY_HEADS = frozenset([*range(0x90, 0xA0), 0xDC, 0xDD])


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
    (the `version` document from schema 3 to 4) or JSON text (every kind before schema 3, and
    the kinds other than `version` since). orjson reads JSON in a third of json's time; a
    document it refuses (NaN or a huge integer, which json writes and earlier code may have
    stored) is read by json. The `version` document of schema 5 is `load_version`'s."""
    if not raw:
        return None
    doc = _document(raw)
    if isinstance(doc, dict) and doc.get(SCHEMA_FIELD) == STATE_SCHEMA:
        return doc  # current already (every document this code wrote): nothing to copy
    return migrate(doc, kind)


def _document(raw: str | bytes) -> Any:
    if isinstance(raw, bytes) and not raw.startswith(b"{"):
        return _UNPACK(raw)  # a JSON document starts with `{`, a MessagePack map never does
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        return json.loads(raw)


def load_version(raw: str | bytes | None) -> VersionState | None:
    """The version's stored state (None: no state) as `VersionState`: schema 5 bytes decoded
    straight into it (in C: no dict, no copy); any earlier document (a MessagePack map, JSON
    text or bytes, schema 0 to 4) migrated step by step, then into it. Raises StateTooNew
    for a later schema."""
    if not raw:
        return None
    if isinstance(raw, bytes) and raw[0] in _ARRAY_HEADS:
        state = _UNPACK_VERSION(raw)
        if state.schema > STATE_SCHEMA:
            raise StateTooNew("version", state.schema)
        return state
    return from_document(migrate(_document(raw), "version"))


def dump(state: Document) -> str:
    """The document as stored, stamped with `STATE_SCHEMA`: compact JSON (modstream/core/jsonio.py,
    non-ASCII kept as UTF-8, which json.loads reads as it read json's escapes)."""
    return jsonio.dumps({**state, SCHEMA_FIELD: STATE_SCHEMA})


def dump_version(state: VersionState) -> bytes:
    """The version's state as stored since schema 5: `VersionState` as a MessagePack array in
    its fields' order, stamped with `STATE_SCHEMA`. A value MessagePack cannot hold (an
    integer beyond 64 bits, which an upload's `size_bytes` or a detector's score may be) is
    stored as the JSON text of its named document (`version_state.to_document`), which
    `load_version` reads as well."""
    state.schema = STATE_SCHEMA
    try:
        return _PACK(state)
    except (OverflowError, TypeError):
        return jsonio.dumps(to_document(state)).encode()


class DecodedStates:
    """The version states this process stored last, kept decoded by their stored bytes, so the
    next firing of a version reads its state without decoding it again (issue 26: decoding was
    about 13% of the per-version code).

    The stored bytes stay the truth. A state is taken out only for bytes equal to those it was
    stored as (a restored checkpoint, a peer's copy, another key: not equal, decoded), and
    taken out once (`load` removes it): the step changes the structure it is given, so a run
    again after a failed input decodes the stored bytes afresh. Only the MessagePack form is
    kept; a state that `dump_version` had to write as JSON is decoded when read, as before.
    At most `capacity` states, the oldest stored dropped first (0: none kept)."""

    def __init__(self, capacity: int) -> None:
        if capacity < 0:
            raise ValueError(f"state cache: capacity {capacity} is below 0")
        self.capacity = capacity
        self._kept: dict[bytes, VersionState] = {}
        self.hits = 0
        self.misses = 0

    def __len__(self) -> int:
        return len(self._kept)

    def __reduce__(self) -> tuple[Any, tuple[int]]:
        """Pickled (PyFlink ships its functions pickled) as its capacity alone: a copy keeps
        no state, so it starts empty."""
        return DecodedStates, (self.capacity,)

    def load(self, raw: str | bytes | None) -> VersionState | None:
        """`load_version(raw)`, from the states kept where `raw` is one's stored bytes."""
        if not raw:
            return None
        if isinstance(raw, bytes):
            kept = self._kept.pop(raw, None)
            if kept is not None:
                self.hits += 1
                return kept
        self.misses += 1
        return load_version(raw)

    def dump(self, state: VersionState) -> bytes:
        """`dump_version(state)`, the state kept by those bytes: the caller changes it no more."""
        raw = dump_version(state)
        if self.capacity and raw[0] in _ARRAY_HEADS:
            kept = self._kept
            kept[raw] = state
            if len(kept) > self.capacity:
                del kept[next(iter(kept))]
        return raw

    def counted(self) -> tuple[int, int]:
        """(hits, misses) since the last call: the reads taken from the kept states, and those
        decoded (a state none kept: stored before this instance started, or dropped)."""
        counts = (self.hits, self.misses)
        self.hits = self.misses = 0
        return counts
