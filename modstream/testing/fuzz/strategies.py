"""Hypothesis strategies for every input topic of the moderation job: valid records, valid but
odd ones (hostile ids, extreme numbers), and one strategy per class of hostile mutation.

A fuzzed record is bytes, as a topic delivers it: some classes (non-UTF-8, a cut inside a
character) are not text at all. Every mutation leaves the record's first field, `event_id`,
intact in the raw bytes, so a test can find the one DLQ row each refused record must produce.
The base records come from modstream/testing/records.py's builders (`upload`, `delete`,
`evidence`) and small builders here for the other topics.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import seed as hypothesis_seed
from hypothesis import strategies as st

from modstream.contract.common import MAX_APPEAL_ID_CHARS
from modstream.contract.registry import NOT_UTF8
from modstream.core.limits import EARLIEST_TS, Limits
from modstream.policy.store import sign
from modstream.testing.policies import KEY, global_document
from modstream.testing.records import SECRET_TEXT, T0, TEST_KEYRING, delete, evidence, upload
from modstream.trust import signing
from modstream.trust.keyring import ROLE_TOPICS
from modstream.trust.two_person import authorship_record

LIMITS = Limits()
LONG_MAX = 2**63 - 1
LONG_MIN = -(2**63)
DAY_MS = 86_400_000
# 2040-01-01: far ahead of any processing clock these tests meet (the issue: "ten years ahead").
FAR_AHEAD_TS = 2_208_988_800_000
SECRET = "SECRET-"  # every string a message must never repeat starts with this

# Field types: how a field may be mutated.
ID, TEXT, STR, INT, VERSION, TS = "id", "text", "str", "int", "version", "ts"
PROB, ENUM, HEX, DICT, PERCENT = "prob", "enum", "hex", "dict", "percent"
NUMERIC = (INT, VERSION, TS, PROB, PERCENT)
INTEGRAL = (INT, VERSION, TS)


@dataclass(frozen=True)
class Kind:
    """One kind of input record: its topic, its fields and their types, the required ones."""

    name: str
    topic: str
    fields: Mapping[str, str]
    optional: frozenset[str] = frozenset()
    enums: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    # "policy": signed with the deployment key (policy.rules); "producer": an authority topic,
    # signed with its producer's key (modstream/trust/signing.py). Valid variants are signed again
    # after a change, so only the mutation under test can make them invalid.
    signed: str = ""

    @property
    def required(self) -> list[str]:
        return [name for name in self.fields if name not in self.optional]

    @property
    def keyed(self) -> bool:
        """Keyed by content version in the moderation job (policy and hash bank are broadcast)."""
        return self.topic not in ("policy.rules", "hash.bank")

    def of_type(self, *types: str) -> list[str]:
        return [name for name, kind in self.fields.items() if kind in types]


OUTCOMES = ("ALLOW", "PROVISIONAL_ALLOW", "PENDING", "RESTRICT", "BLOCK")
_CONTENT = {"event_id": ID, "type": ENUM, "content_id": ID, "content_version": VERSION, "ts": TS}
KINDS: dict[str, Kind] = {
    kind.name: kind
    for kind in (
        Kind(
            "upsert",
            "content.versions",
            {
                **_CONTENT,
                "author_id": ID,
                "modality": ENUM,
                "surface": ID,
                "region": STR,
                "audience": ENUM,
                "account_risk": PROB,
                "size_bytes": INT,
                "mime_type": STR,
                "sha256": HEX,
                "phash": HEX,
                "text": TEXT,
                "media_ref": STR,
                "segments": INT,
            },
            frozenset({"phash", "text", "media_ref", "segments"}),
            {
                "type": ("upsert", "delete"),
                "modality": ("text", "image", "audio", "video"),
                "audience": ("all", "adult", "minor"),
            },
        ),
        Kind("delete", "content.versions", _CONTENT, enums={"type": ("upsert", "delete")}),
        Kind(
            "detector",
            "detector.results",
            {
                "event_id": ID,
                "content_id": ID,
                "content_version": VERSION,
                "detector": ID,
                "model_version": ID,
                "status": ENUM,
                "ts": TS,
                "segment_id": INT,
                "scores": DICT,
                "evidence_ref": STR,
                "signature": STR,
            },
            frozenset({"segment_id", "scores", "evidence_ref", "signature"}),
            {"status": ("ok", "timeout", "error")},
            signed="producer",
        ),
        Kind(
            "policy_version",
            "policy.rules",
            {
                "event_id": ID,
                "policy_id": ID,
                "version": VERSION,
                "parent_version": VERSION,
                "mode": ENUM,
                "canary_percent": PERCENT,
                "author": ID,
                "ts": TS,
                "document": DICT,
                "signature": STR,
            },
            frozenset({"parent_version", "canary_percent"}),
            {"mode": ("active", "shadow", "canary")},
            signed="policy",
        ),
        Kind(
            "policy_control",
            "policy.rules",
            {
                "event_id": ID,
                "policy_id": ID,
                "command": ENUM,
                "version": VERSION,
                "ts": TS,
                "signature": STR,
            },
            frozenset({"version"}),
            {"command": ("rollback", "pause_publication", "resume_publication")},
            signed="policy",
        ),
        Kind(
            "hash_bank",
            "hash.bank",
            {
                "event_id": ID,
                "bank": ID,
                "hash_type": ENUM,
                "hash": HEX,
                "op": ENUM,
                "ts": TS,
                "signature": STR,
            },
            frozenset({"signature"}),
            {"hash_type": ("sha256", "phash"), "op": ("add", "remove")},
            signed="producer",
        ),
        Kind(
            "report",
            "moderation.reports",
            {
                "event_id": ID,
                "report_id": ID,
                "content_id": ID,
                "content_version": VERSION,
                "reporter_id": ID,
                "reason": ID,
                "ts": TS,
            },
        ),
        Kind(
            "review",
            "review.decisions",
            {
                "event_id": ID,
                "task_id": ID,
                "content_id": ID,
                "content_version": VERSION,
                "reviewer_id": ID,
                "outcome": ENUM,
                "reason": TEXT,
                "ts": TS,
                "signature": STR,
            },
            frozenset({"signature"}),
            {"outcome": OUTCOMES},
            signed="producer",
        ),
        Kind(
            "appeal",
            "moderation.appeals",
            {
                "event_id": ID,
                "appeal_id": ID,
                "content_id": ID,
                "content_version": VERSION,
                "decision_revision": VERSION,
                "user_id": ID,
                "ts": TS,
                "signature": STR,
            },
            frozenset({"signature"}),
            signed="producer",
        ),
        Kind(
            "reevaluate",
            "moderation.reevaluate",
            {
                "event_id": ID,
                "content_id": ID,
                "content_version": VERSION,
                "reason": TEXT,
                "ts": TS,
            },
        ),
    )
}
TOPICS = tuple(dict.fromkeys(kind.topic for kind in KINDS.values()))

# Ids a hostile producer would send: key separators, path tricks, look-alikes (Cyrillic 'а'
# and 'с', Greek 'ο', fullwidth digits), invisible characters, control characters.
HOSTILE_IDS = (
    "c\x1f1",
    "c-1\x1f",
    "\x1f",
    "c|1",
    "|",
    "c/1",
    "../../etc/passwd",
    "..",
    "./c-1",
    "..\\..\\c-1",
    "%2e%2e%2fc-1",
    "c-1\x00",
    "c-1\n",
    "c-1 ",
    " c-1",
    "C-1",
    "с-1",  # Cyrillic es
    "c-а",  # Cyrillic a
    "c-１",  # fullwidth one
    "c\u200d-1",  # zero-width joiner
    "c\u200b-1",  # zero-width space
    "\ufeffc-1",  # byte order mark
    "\u202ec-1",  # right-to-left override
    "cafe\u0301",  # e + combining acute (NFD) ...
    "café",  # ... and the precomposed é (NFC)
    "\u2028",
    "\U0001f642",
    "\U0010ffff",
    "a" * 256,
)
HOSTILE_ALPHABET = "".join(sorted(set("".join(HOSTILE_IDS[:-1])))) + "aeo019_-:ο"
ORDINARY_ID = st.from_regex(r"[a-z0-9][a-z0-9_-]{0,15}", fullmatch=True)
HOSTILE_ID = st.one_of(
    st.sampled_from(HOSTILE_IDS),
    st.text(alphabet=HOSTILE_ALPHABET, min_size=1, max_size=40),
)
VALID_TS = st.one_of(st.integers(T0 - 30 * DAY_MS, T0 + DAY_MS), st.just(EARLIEST_TS))
EXTREME_VERSIONS = (1, 2**31, 2**53 + 1, LONG_MAX)
EXTREME_PROBABILITIES = (0.0, -0.0, 5e-324, 0.9999999999999999, 1.0, 0, 1)
EXTREME_TS = (EARLIEST_TS, T0 + DAY_MS)


def _hex(width: int) -> st.SearchStrategy[str]:
    return st.text(alphabet="0123456789abcdef", min_size=width, max_size=width)


def _ids(hostile: bool) -> st.SearchStrategy[str]:
    return HOSTILE_ID if hostile else ORDINARY_ID


def _version(extreme: bool) -> st.SearchStrategy[int]:
    return st.sampled_from(EXTREME_VERSIONS) if extreme else st.integers(1, 5)


def _ts(extreme: bool) -> st.SearchStrategy[int]:
    return st.sampled_from(EXTREME_TS) if extreme else VALID_TS


def _probability(extreme: bool) -> st.SearchStrategy[float]:
    if extreme:
        return st.sampled_from(EXTREME_PROBABILITIES)
    return st.floats(0.0, 1.0, allow_nan=False)


@st.composite
def _upsert(draw: st.DrawFn, hostile: bool, extreme: bool) -> dict[str, Any]:
    content_id = draw(_ids(hostile))
    modality = draw(st.sampled_from(("text", "image", "audio", "video")))
    mime = {"text": "text/plain", "image": "image/jpeg", "audio": "audio/mpeg"}
    record = upload(
        content_id,
        draw(_ts(extreme)),
        event_id=draw(_ids(hostile)),
        content_version=draw(_version(extreme)),
        author_id=draw(_ids(hostile)),
        surface=draw(_ids(hostile)),
        modality=modality,
        mime_type=mime.get(modality, "video/mp4"),
        account_risk=draw(_probability(extreme)),
        size_bytes=draw(st.sampled_from((0, LONG_MAX)) if extreme else st.integers(0, 10**6)),
        sha256=draw(_hex(64)),
    )
    if modality == "text":
        record["text"] = SECRET_TEXT + draw(st.text(max_size=40))
    else:
        del record["text"]
        record["media_ref"] = draw(st.sampled_from(("file:///media/x.jpg", "s3://bucket/x")))
        record["phash"] = draw(st.none() | _hex(16))
    if modality == "video":
        record["segments"] = draw(
            st.sampled_from((1, LIMITS.max_segments)) if extreme else st.integers(1, 4)
        )
    return record


@st.composite
def _delete(draw: st.DrawFn, hostile: bool, extreme: bool) -> dict[str, Any]:
    return delete(
        draw(_ids(hostile)),
        draw(_ts(extreme)),
        event_id=draw(_ids(hostile)),
        content_version=draw(_version(extreme)),
    )


@st.composite
def _detector(draw: st.DrawFn, hostile: bool, extreme: bool) -> dict[str, Any]:
    detector = draw(st.sampled_from(("offensive_text", "nsfw_image", "media_check")))
    labels = {"offensive_text": "offensive", "nsfw_image": "nsfw", "media_check": "malware"}
    status = draw(st.sampled_from(("ok", "ok", "timeout", "error")))
    scores = {labels[detector]: draw(_probability(extreme))}
    if hostile:
        scores.update(
            draw(
                st.dictionaries(
                    HOSTILE_ID.filter(lambda s: len(s) <= 128), st.just(0.5), max_size=3
                )
            )
        )
    record = evidence(
        draw(_ids(hostile)),
        draw(_ts(extreme)),
        event_id=draw(_ids(hostile)),
        content_version=draw(_version(extreme)),
        detector=draw(st.just(detector) | _ids(hostile)),
        model_version=draw(_ids(hostile)),
        status=status,
        segment_id=draw(
            st.sampled_from((None, 0, LIMITS.max_segments - 1))
            if extreme
            else st.none() | st.integers(0, 3)
        ),
        scores=scores if status == "ok" else None,
    )
    if draw(st.booleans()):
        record["evidence_ref"] = draw(_ids(hostile))
    return record


def signed(kind: str, record: dict[str, Any]) -> dict[str, Any]:
    """`record` signed as its producer would sign it (event_id stays the first field)."""
    spec = KINDS[kind]
    if spec.signed == "policy":
        record = {key: value for key, value in record.items() if key != "signature"}
        record["signature"] = sign(record, KEY)
        return record
    if spec.signed == "producer":
        return signing.signed(spec.topic, record, TEST_KEYRING)
    return record


# Fields a valid record carries that the contract does not name: the schema ignores them (the
# policy store reads them from the raw record), so they do not round-trip through the model.
UNNAMED_FIELDS: dict[str, frozenset[str]] = {"policy_version": frozenset({"authorship"})}


@st.composite
def _policy_version(draw: st.DrawFn, hostile: bool, extreme: bool) -> dict[str, Any]:
    version = draw(st.sampled_from(EXTREME_VERSIONS[1:]) if extreme else st.integers(2, 9))
    # Shadow and canary versions need no approval; their document is the global policy's.
    mode = draw(st.sampled_from(("shadow", "canary")))
    record: dict[str, Any] = {
        "event_id": draw(_ids(hostile)),
        "policy_id": "global",
        "version": version,
        "parent_version": 1,
        "mode": mode,
        "author": draw(_ids(hostile)),
        "ts": draw(_ts(extreme)),
        "document": global_document(version),
    }
    if mode == "canary":
        record["canary_percent"] = draw(
            st.sampled_from((0, 100, 5e-324)) if extreme else st.floats(0, 100)
        )
    # Signed by its author with their own key (issue 27, point 5).
    author_key = TEST_KEYRING.key_for(record["author"], "author") or b""
    record["authorship"] = authorship_record(
        record["document"], record["author"], author_key, record["ts"]
    )
    return signed("policy_version", record)


@st.composite
def _policy_control(draw: st.DrawFn, hostile: bool, extreme: bool) -> dict[str, Any]:
    record = {
        "event_id": draw(_ids(hostile)),
        "policy_id": "global",
        "command": draw(st.sampled_from(("pause_publication", "resume_publication"))),
        "ts": draw(_ts(extreme)),
    }
    return signed("policy_control", record)


@st.composite
def _hash_bank(draw: st.DrawFn, hostile: bool, extreme: bool) -> dict[str, Any]:
    hash_type = draw(st.sampled_from(("sha256", "phash")))
    return {
        "event_id": draw(_ids(hostile)),
        "bank": draw(st.sampled_from(("known_bad", "spam_campaign")) | _ids(hostile)),
        "hash_type": hash_type,
        "hash": draw(_hex(64 if hash_type == "sha256" else 16)),
        "op": draw(st.sampled_from(("add", "remove"))),
        "ts": draw(_ts(extreme)),
    }


def _about_a_version(draw: st.DrawFn, hostile: bool, extreme: bool) -> dict[str, Any]:
    return {
        "event_id": draw(_ids(hostile)),
        "content_id": draw(_ids(hostile)),
        "content_version": draw(_version(extreme)),
        "ts": draw(_ts(extreme)),
    }


@st.composite
def _report(draw: st.DrawFn, hostile: bool, extreme: bool) -> dict[str, Any]:
    base = _about_a_version(draw, hostile, extreme)
    return {
        "event_id": base["event_id"],
        "report_id": draw(_ids(hostile)),
        "content_id": base["content_id"],
        "content_version": base["content_version"],
        "reporter_id": draw(_ids(hostile)),
        "reason": draw(st.sampled_from(("spam", "harassment")) | _ids(hostile)),
        "ts": base["ts"],
    }


@st.composite
def _review(draw: st.DrawFn, hostile: bool, extreme: bool) -> dict[str, Any]:
    base = _about_a_version(draw, hostile, extreme)
    return {
        "event_id": base["event_id"],
        "task_id": draw(_ids(hostile)),
        "content_id": base["content_id"],
        "content_version": base["content_version"],
        "reviewer_id": draw(_ids(hostile)),
        "outcome": draw(st.sampled_from(OUTCOMES)),
        "reason": draw(st.sampled_from(("sexual_content", SECRET + "reviewer note"))),
        "ts": base["ts"],
    }


@st.composite
def _appeal(draw: st.DrawFn, hostile: bool, extreme: bool) -> dict[str, Any]:
    base = _about_a_version(draw, hostile, extreme)
    return {
        "event_id": base["event_id"],
        "appeal_id": draw(_ids(hostile).map(lambda appeal_id: appeal_id[:MAX_APPEAL_ID_CHARS])),
        "content_id": base["content_id"],
        "content_version": base["content_version"],
        "decision_revision": draw(_version(extreme)),
        "user_id": draw(_ids(hostile)),
        "ts": base["ts"],
    }


@st.composite
def _reevaluate(draw: st.DrawFn, hostile: bool, extreme: bool) -> dict[str, Any]:
    base = _about_a_version(draw, hostile, extreme)
    return {**base, "reason": SECRET + "re-check after policy v4"}


_BUILDERS: dict[str, Callable[[bool, bool], st.SearchStrategy[dict[str, Any]]]] = {
    "upsert": _upsert,
    "delete": _delete,
    "detector": _detector,
    "policy_version": _policy_version,
    "policy_control": _policy_control,
    "hash_bank": _hash_bank,
    "report": _report,
    "review": _review,
    "appeal": _appeal,
    "reevaluate": _reevaluate,
}


def records(
    kind: str, *, hostile: bool = False, extreme: bool = False
) -> st.SearchStrategy[dict[str, Any]]:
    """Valid records of `kind` (event_id first, signed where the kind is); `hostile` ids,
    `extreme` but valid numbers."""
    return _BUILDERS[kind](hostile, extreme).map(lambda record: signed(kind, record))


# --- Serialization: JSON with the tokens a hostile producer writes -----------------------------


@dataclass(frozen=True)
class Raw:
    """A JSON token written as it is: NaN, 1e999, a 100,000-deep array."""

    text: str


class Pairs(list[Any]):
    """An object written from (name, value) pairs, so a name may appear twice."""


def encode(value: Any, *, ascii_only: bool = False) -> str:
    if isinstance(value, Raw):
        return value.text
    if isinstance(value, Pairs | dict):
        items = value if isinstance(value, Pairs) else value.items()
        return (
            "{"
            + ", ".join(
                json.dumps(name, ensure_ascii=ascii_only)
                + ": "
                + encode(item, ascii_only=ascii_only)
                for name, item in items
            )
            + "}"
        )
    if isinstance(value, list):
        return "[" + ", ".join(encode(item, ascii_only=ascii_only) for item in value) + "]"
    return json.dumps(value, ensure_ascii=ascii_only, allow_nan=False)


def _head_bytes(pairs: list[tuple[str, Any]], ascii_only: bool) -> int:
    """Bytes of `{"event_id": "..."`: the part every mutation leaves intact."""
    return len(encode(Pairs(pairs[:1]), ascii_only=ascii_only)[:-1].encode("utf-8"))


# --- Fuzzed records -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Fuzzed:
    """One input as its topic delivers it, and what it was made from."""

    kind: str
    mutation: str
    raw: bytes
    record: dict[str, Any]  # the valid record it was made from
    parse_valid: bool  # whether the contract's schema accepts it (schemas.parse)
    note: str = ""

    @property
    def topic(self) -> str:
        return KINDS[self.kind].topic

    @property
    def text(self) -> str:
        """What the job's Kafka source hands Python (deploy/flink-ext
        TopicKeyValueDeserializationSchema): the text, or for bytes that are not UTF-8 a marker
        with their sha256 and length, which no JSON can be."""
        try:
            return self.raw.decode("utf-8")
        except UnicodeDecodeError:
            digest = hashlib.sha256(self.raw).hexdigest()
            return f"{NOT_UTF8}{digest}:{len(self.raw)}"

    @property
    def secrets(self) -> list[str]:
        """Strings in the input that no message may repeat."""
        text = self.raw.decode("utf-8", errors="replace")
        found = []
        start = text.find(SECRET)
        while start >= 0:
            found.append(text[start : start + 24])
            start = text.find(SECRET, start + 1)
        return found

    @property
    def expected_class(self) -> str | None:
        """What the moderation job must do with it: None (accepted) or the DLQ error_class."""
        if not self.parse_valid:
            return "schema"
        if self.mutation == "forged_signature":
            return "signature"
        ts = self.record_ts
        if KINDS[self.kind].keyed and ts is not None and not EARLIEST_TS <= ts < FAR_AHEAD_TS:
            return "schema"  # contract v1.1: keyed input too far ahead or before 2000
        return None

    @property
    def record_ts(self) -> int | None:
        try:
            value = json.loads(self.raw)
        except ValueError:
            return None
        ts = value.get("ts") if isinstance(value, dict) else None
        return ts if isinstance(ts, int) and not isinstance(ts, bool) else None


Mutation = Callable[[st.DrawFn, Kind, list[tuple[str, Any]]], tuple[str | bytes, bool, str]]
_MUTATIONS: dict[str, Mutation] = {}


def mutation(name: str) -> Callable[[Mutation], Mutation]:
    def register(function: Mutation) -> Mutation:
        _MUTATIONS[name] = function
        return function

    return register


def _field(
    draw: st.DrawFn, kind: Kind, pairs: list[tuple[str, Any]], *types: str
) -> tuple[list[tuple[str, Any]], int]:
    """A field of one of `types` (never event_id) and its index; an optional field the record
    lacks is added first (with null), so every field of the kind can be hit."""
    names = [name for name in kind.of_type(*types) if name != "event_id"]
    name = draw(st.sampled_from(names))
    present = [field_name for field_name, _ in pairs]
    if name not in present:
        pairs = [*pairs, (name, None)]
        present.append(name)
    return pairs, present.index(name)


def _replace(pairs: list[tuple[str, Any]], index: int, value: Any) -> Pairs:
    return Pairs([*pairs[:index], (pairs[index][0], value), *pairs[index + 1 :]])


@mutation("malformed_json")
def _malformed(draw: st.DrawFn, kind: Kind, pairs: list[tuple[str, Any]]) -> tuple[str, bool, str]:
    body = encode(Pairs(pairs))
    head = _head_bytes(pairs, False)
    variant = draw(
        st.sampled_from(
            (
                "trailing",
                "structural",
                "single_quotes",
                "no_comma",
                "no_colon",
                "garbage",
                "not_an_object",
            )
        )
    )
    if variant == "trailing":
        body += draw(st.sampled_from((" x", "}", ",", "]", " {}", "\x00", " //", "\n{")))
    elif variant == "structural":
        body = "{" + draw(st.sampled_from(",:{[]}")) + body[1:]
    elif variant == "single_quotes":
        body = body.replace('"', "'")
    elif variant == "no_comma":
        body = body[:head] + body[head:].replace(", ", " ", 1)
    elif variant == "no_colon":
        body = body[:head] + body[head:].replace('": ', '" ', 1)
    elif variant == "garbage":
        body = body[:head] + draw(st.text(min_size=1, max_size=200))
        if body.endswith("}"):
            body += "{"
    else:
        first = encode(pairs[0][1])
        body = draw(
            st.sampled_from((f"[{body}]", first, f"[{first}]", f"{{{encode(Pairs(pairs[:1]))[1:]}"))
        )
    return body, False, variant


@mutation("truncated")
def _truncated(
    draw: st.DrawFn, kind: Kind, pairs: list[tuple[str, Any]]
) -> tuple[bytes, bool, str]:
    body = encode(Pairs(pairs)).encode("utf-8")
    cut = draw(st.integers(_head_bytes(pairs, False), len(body) - 1))
    return body[:cut], False, f"cut at {cut} of {len(body)}"


INVALID_UTF8 = (
    b"\xff",
    b"\xfe",
    b"\x80",
    b"\xbf\xbf",
    b"\xc0\xaf",  # overlong '/'
    b"\xc3",  # a lead byte without its continuation
    b"\xe2\x82",
    b"\xed\xa0\x80",  # an encoded surrogate
    b"\xf4\x90\x80\x80",  # beyond U+10FFFF
    b"\xf8\x88\x80\x80\x80",
)


@mutation("non_utf8")
def _non_utf8(
    draw: st.DrawFn, kind: Kind, pairs: list[tuple[str, Any]]
) -> tuple[str | bytes, bool, str]:
    if draw(st.integers(0, 4)) == 0:
        # Valid UTF-8 JSON whose string holds a lone surrogate: no UTF-8 text can carry it.
        pairs, index = _field(draw, kind, pairs, ID)
        surrogate = draw(st.sampled_from(("\\ud800", "\\udfff", "\\udc80x")))
        return encode(_replace(pairs, index, Raw(f'"c{surrogate}"'))), False, "lone surrogate"
    ascii_only = draw(st.booleans())
    body = encode(Pairs(pairs), ascii_only=ascii_only).encode("utf-8")
    at = draw(st.integers(_head_bytes(pairs, ascii_only), len(body)))
    bad = draw(st.sampled_from(INVALID_UTF8))
    raw = body[:at] + bad + body[at:]
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError:
        return raw, False, f"{bad!r} at {at}"
    return raw + b"\xff", False, f"{bad!r} at {at}, then 0xff"


@mutation("deep_nesting")
def _deep(draw: st.DrawFn, kind: Kind, pairs: list[tuple[str, Any]]) -> tuple[str, bool, str]:
    depth = draw(
        st.sampled_from((LIMITS.max_json_depth + 1, 50_000, 100_000))
        | st.integers(LIMITS.max_json_depth + 1, 100_000)
    )
    shape = draw(st.sampled_from(("arrays", "objects", "unclosed", "record")))
    if shape == "arrays":
        nested = Raw("[" * depth + "]" * depth)
    elif shape == "objects":
        nested = Raw('{"a": ' * depth + "1" + "}" * depth)
    elif shape == "unclosed":
        nested = Raw("[" * depth)
    else:
        return f"[{encode(pairs[0][1])}, " + "[" * depth + "]" * depth + "]", False, "record"
    if draw(st.booleans()):
        pairs, index = _field(draw, kind, pairs, *set(kind.fields.values()))
        body = encode(_replace(pairs, index, nested))
    else:
        body = encode(Pairs([*pairs, ("extra", nested)]))  # an unknown field: ignored if valid
    return body, False, f"{shape} {depth} deep"


@mutation("oversize")
def _oversize(draw: st.DrawFn, kind: Kind, pairs: list[tuple[str, Any]]) -> tuple[str, bool, str]:
    limit = LIMITS.max_record_bytes
    base = len(encode(Pairs(pairs)).encode("utf-8"))
    over = draw(st.integers(1, 65_536))
    # ASCII padding, or two-byte characters: under the limit in characters, over it in bytes.
    char = draw(st.sampled_from(("x", "é", "\U0001f642")))
    width = len(char.encode("utf-8"))
    count = (limit - base + over) // width + 1
    body = encode(Pairs([*pairs, ("padding", char * count)]))
    return body, False, f"{len(body.encode('utf-8'))} bytes of {char!r}"


def _wrong_value(draw: st.DrawFn, field_type: str) -> Any:
    secret = SECRET + str(draw(st.integers(0, 10**6)))
    if field_type in INTEGRAL:
        return draw(st.sampled_from((secret, "1", 1.5, 1000.0, [1], {"v": 1}, None)))
    if field_type in (PROB, PERCENT):
        return draw(st.sampled_from((secret, "0.5", [0.5], {"p": 0.5}, None)))
    if field_type == DICT:
        return draw(st.sampled_from((secret, [secret], 1, None)))
    return draw(st.sampled_from((123, 1.5, [secret], {secret: secret}, None, False)))


@mutation("wrong_type")
def _wrong_type(draw: st.DrawFn, kind: Kind, pairs: list[tuple[str, Any]]) -> tuple[str, bool, str]:
    pairs, index = _field(draw, kind, pairs, *set(kind.fields.values()))
    name = pairs[index][0]
    if name in kind.required and draw(st.integers(0, 5)) == 0:
        return encode(Pairs(pairs[:index] + pairs[index + 1 :])), False, f"{name} missing"
    value = _wrong_value(draw, kind.fields[name])
    if value is None and name in kind.optional:
        value = [None]
    return encode(_replace(pairs, index, value)), False, f"{name} as {type(value).__name__}"


@mutation("bool_for_int")
def _bool_for_int(
    draw: st.DrawFn, kind: Kind, pairs: list[tuple[str, Any]]
) -> tuple[str, bool, str]:
    pairs, index = _field(draw, kind, pairs, *NUMERIC)
    value = draw(st.booleans())
    return encode(_replace(pairs, index, value)), False, f"{pairs[index][0]} = {value}"


NON_FINITE = ("NaN", "Infinity", "-Infinity", "1e999", "-1e999", "1E400", "nan", "inf")


@mutation("nan_infinity")
def _nan(draw: st.DrawFn, kind: Kind, pairs: list[tuple[str, Any]]) -> tuple[str, bool, str]:
    token = Raw(draw(st.sampled_from(NON_FINITE)))
    if draw(st.integers(0, 3)) == 0:
        return encode(Pairs([*pairs, ("extra", [token])])), False, f"extra {token.text}"
    pairs, index = _field(draw, kind, pairs, *NUMERIC)
    return encode(_replace(pairs, index, token)), False, f"{pairs[index][0]} = {token.text}"


@mutation("bad_version")
def _bad_version(
    draw: st.DrawFn, kind: Kind, pairs: list[tuple[str, Any]]
) -> tuple[str, bool, str]:
    pairs, index = _field(draw, kind, pairs, VERSION)
    value = draw(st.sampled_from((0, -1, 2**70, -(2**70), 2**63, LONG_MIN)))
    return encode(_replace(pairs, index, value)), False, f"{pairs[index][0]} = {value}"


def _with_ts(kind: Kind, pairs: list[tuple[str, Any]], ts: int) -> Pairs:
    index = [name for name, _ in pairs].index("ts")
    return Pairs(signed(kind.name, dict(_replace(pairs, index, ts))).items())


@mutation("ts_far_ahead")
def _far_ahead(draw: st.DrawFn, kind: Kind, pairs: list[tuple[str, Any]]) -> tuple[str, bool, str]:
    ts = draw(st.sampled_from((FAR_AHEAD_TS, LONG_MAX)) | st.integers(FAR_AHEAD_TS, LONG_MAX))
    return encode(_with_ts(kind, pairs, ts)), True, f"ts = {ts}"


@mutation("ts_far_behind")
def _far_behind(draw: st.DrawFn, kind: Kind, pairs: list[tuple[str, Any]]) -> tuple[str, bool, str]:
    ts = draw(
        st.sampled_from((0, 1, EARLIEST_TS - 1, -1, LONG_MIN))
        | st.integers(0, EARLIEST_TS - 1)
        | st.integers(LONG_MIN, -1)
    )
    return encode(_with_ts(kind, pairs, ts)), ts >= 0, f"ts = {ts}"


@mutation("ts_beyond_long")
def _beyond_long(
    draw: st.DrawFn, kind: Kind, pairs: list[tuple[str, Any]]
) -> tuple[str, bool, str]:
    ts = draw(
        st.sampled_from((2**63, 2**64, 2**70, 10**30, LONG_MIN - 1))
        | st.integers(2**63, 2**80)
        | st.integers(-(2**80), LONG_MIN - 1)
    )
    return encode(_with_ts(kind, pairs, ts)), False, f"ts = {ts}"


@mutation("duplicate_field")
def _duplicate(draw: st.DrawFn, kind: Kind, pairs: list[tuple[str, Any]]) -> tuple[str, bool, str]:
    where = draw(st.sampled_from(("top", "ts", "nested")))
    if where == "nested":
        name = draw(st.sampled_from(kind.of_type(DICT) or ["extra"]))
        inner = Pairs([("label", 0.1), ("label", draw(st.sampled_from((0.1, 0.9))))])
        if name == "extra":
            return encode(Pairs([*pairs, ("extra", inner)])), False, "extra.label twice"
        index = [field_name for field_name, _ in pairs].index(name)
        return encode(_replace(pairs, index, inner)), False, f"{name}.label twice"
    if where == "ts":
        # The attack of the issue: a second `ts` that a lenient reader would take.
        second = draw(st.sampled_from((FAR_AHEAD_TS, 0, dict(pairs)["ts"])))
        return encode(Pairs([*pairs, ("ts", second)])), False, f"ts twice, then {second}"
    index = draw(st.integers(0, len(pairs) - 1))
    name, value = pairs[index]
    return encode(Pairs([*pairs, (name, value)])), False, f"{name} twice"


@mutation("unknown_enum")
def _unknown_enum(
    draw: st.DrawFn, kind: Kind, pairs: list[tuple[str, Any]]
) -> tuple[str, bool, str]:
    pairs, index = _field(draw, kind, pairs, ENUM)
    name, current = pairs[index]
    allowed = kind.enums[name]
    value = draw(
        st.sampled_from(
            (
                current.lower() if current.isupper() else current.upper(),
                current + " ",
                current + "\x00",
                current.replace("a", "а").replace("A", "А").replace("o", "ο") + "\u200d",
                SECRET + "ENUM",
                "",
            )
        )
        | st.text(max_size=20)
    )
    if value in allowed:
        value += "?"
    return encode(_replace(pairs, index, value)), False, f"{name} = {value!r}"


@mutation("forged_signature")
def _forged(draw: st.DrawFn, kind: Kind, pairs: list[tuple[str, Any]]) -> tuple[str, bool, str]:
    """A record of an authority topic (or a policy record) whose signature does not hold:
    signed with a key the deployment does not have, by another producer, with its producer's
    key of another role (issue 27), tampered with after signing, unsigned or malformed. The
    schema accepts it; the signature check must not."""
    record = dict(pairs)
    variants = ["wrong_key", "tampered"]
    if kind.signed == "producer":
        variants += ["unsigned", "malformed", "other_role"]
        if kind.name != "appeal":  # appeals have one fixed producer
            variants.append("other_producer")
    variant = draw(st.sampled_from(variants))
    body = {name: value for name, value in record.items() if name != "signature"}
    if variant == "wrong_key":
        body["signature"] = sign(body, b"not-a-key-this-deployment-has")
    elif variant == "other_producer":
        body["signature"] = sign(body, TEST_KEYRING.key_for("someone-else", "detector") or b"")
    elif variant == "other_role":
        producer = signing.AUTHORITY_TOPICS[kind.topic].of(body) or ""
        role = draw(
            st.sampled_from(sorted(r for r, t in ROLE_TOPICS.items() if kind.topic not in t))
        )
        body["signature"] = sign(body, TEST_KEYRING.key_for(producer, role) or b"")
    elif variant == "tampered":
        body = dict(record, ts=record["ts"] + 1)
    elif variant == "malformed":
        body["signature"] = draw(st.sampled_from(("hmac-sha256:zz", "md5:00", "", SECRET)))
    return encode(Pairs(body.items())), True, variant


def _valid(name: str) -> Mutation:
    def same(draw: st.DrawFn, kind: Kind, pairs: list[tuple[str, Any]]) -> tuple[str, bool, str]:
        return encode(Pairs(pairs), ascii_only=draw(st.booleans())), True, name

    return same


# Classes whose records are valid: what the schema and the job must accept.
VALID_CLASSES = ("valid", "hostile_ids", "extreme_numbers")
for _name in VALID_CLASSES:
    _MUTATIONS[_name] = _valid(_name)
REFUSED_CLASSES = tuple(name for name in _MUTATIONS if name not in VALID_CLASSES)
MUTATIONS = (*VALID_CLASSES, *REFUSED_CLASSES)


def applicable(kind: str, mutation_name: str) -> bool:
    """Whether `kind` has a field the mutation works on (a hash-bank entry has no version)."""
    spec = KINDS[kind]
    if mutation_name == "forged_signature":
        return bool(spec.signed)
    needs = {"bad_version": (VERSION,), "unknown_enum": (ENUM,), "bool_for_int": NUMERIC}
    return not needs.get(mutation_name) or bool(
        set(spec.of_type(*needs[mutation_name])) - {"event_id"}
    )


def fuzzed(
    kind: str, mutation_name: str, base: st.SearchStrategy[dict[str, Any]] | None = None
) -> st.SearchStrategy[Fuzzed]:
    """Records of `kind` with one mutation of class `mutation_name` applied to a valid record
    (`base`, by default one with ordinary ids, or hostile ids / extreme numbers for those
    classes)."""
    if base is None:
        base = records(
            kind,
            hostile=mutation_name == "hostile_ids",
            extreme=mutation_name == "extreme_numbers",
        )
    spec = KINDS[kind]
    mutate = _MUTATIONS[mutation_name]

    @st.composite
    def build(draw: st.DrawFn) -> Fuzzed:
        record = draw(base)
        raw, parse_valid, note = mutate(draw, spec, list(record.items()))
        data = raw.encode("utf-8", errors="surrogatepass") if isinstance(raw, str) else raw
        return Fuzzed(kind, mutation_name, data, record, parse_valid, note)

    return build()


def any_fuzzed(
    mutations: tuple[str, ...] = MUTATIONS, kinds: tuple[str, ...] = tuple(KINDS)
) -> st.SearchStrategy[Fuzzed]:
    return st.one_of(
        [fuzzed(kind, name) for name in mutations for kind in kinds if applicable(kind, name)]
    )


def sample(strategy: st.SearchStrategy[Any], count: int, seed: int) -> list[Any]:
    """`count` examples of `strategy`, the same ones for the same seed (census, replay)."""
    found: list[Any] = []

    @settings(
        max_examples=count,
        database=None,
        deadline=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @hypothesis_seed(seed)
    @given(strategy)
    def collect(example: Any) -> None:
        found.append(example)

    collect()
    return found


# The tags of tagged unions (content.versions `type`, policy.rules records): a location may
# start with one.
TAGS = {"upsert", "delete", "version", "control"}


def named_field(message: str, kind: Kind) -> bool:
    """Whether the message starts with a location: `<record>` or a field of the record."""
    location = message.split(":", 1)[0].strip()
    parts = [part for part in location.split(".") if part]
    if parts and parts[0] in TAGS and len(parts) > 1:
        parts = parts[1:]
    return location == "<record>" or (bool(parts) and parts[0] in {*kind.fields, *TAGS})
