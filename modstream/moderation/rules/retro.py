"""Bank retroaction: a `hash.bank` addition at `ts` B (issue 12, item 3; contract v1.1)
re-decides the retained versions uploaded before B whose sha256 equals the banked hash or whose
phash is within the policy's distance.

Contract: docs/CONTRACT.md, "v1.1 additions", "Bank additions reach content already decided":
"A hash added to a bank re-decides live versions whose `sha256` equals it, or whose `phash` is
within the policy's distance, at the bank record's `ts` (`trigger: policy_change`), as far back
as versions are retained."

Proved by:
    tests/operators/test_retro.py::test_an_addition_after_the_upload_re_decides_it_in_either_arrival_order
    tests/operators/test_retro.py::test_an_upload_at_or_after_the_addition_is_not_re_decided
    tests/operators/test_retro.py::test_a_removal_ends_the_addition_for_registrations_that_come_after_it
    tests/operators/test_retro.py::test_a_phash_pair_is_emitted_once_and_only_within_the_index_bound
    tests/operators/test_retro.py::test_the_step_blocks_an_allowed_version_at_the_bank_ts_with_policy_change
    tests/operators/test_retro.py::test_the_step_leaves_a_version_that_does_not_match_at_the_bank_ts_alone
    tests/operators/test_retro.py::test_the_step_creates_nothing_for_a_version_it_does_not_hold

PyFlink has no `applyToKeyedState` (a broadcast element cannot visit every version's keyed
state), so the join runs the other way round, keyed by hash: every upload registers
`(content_id, content_version, upload ts, hash)` under its hash keys (`sha256:<hex>`, and
`phash:<band>:<bits>` for each of the 8 bands of modstream/trust/hashbank.py), and every bank record
goes to the same keys. Whichever arrives first waits in the key's state, so the join is
symmetric. A match emits one internal `moderation.retro` record per (version, bank add), keyed
to the version, at ts B; the version's own operator re-decides then (`trigger: policy_change`),
with its bank matches computed by HashBanks at B from the stored content. The real phash
distance is the policy's, unknown here: this operator forwards every candidate within the band
index's bound (`PHASH_MAX_DISTANCE`), and the moderation step re-decides only when the version
really matches the bank at B.

Bounds (docs/moderation.md, "Hash banks and retroaction"): registrations are kept as long as
the moderation state keeps a version (`STATE_TTL_MS` after the newest upload seen at the key),
at most `MAX_VERSIONS_PER_KEY` per key (the newest). An addition waits only until event time
reaches its ts (by then every registration uploaded before it has arrived, unless late), at most
`MAX_ADDS_PER_KEY` per key. One timer per key at a time; the key is cleared when empty.

Pure Python over plain dict state; time is passed in. The Flink adapter is
modstream/jobs/moderation/hash_retro.py. The version side is `on_retro`, which
modstream/moderation/step.py sends a `moderation.retro` record to before any state is made.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from modstream.moderation.decide import decide
from modstream.moderation.state import (
    RETRO,
    STATE_TTL_MS,
    Context,
    StepResult,
    VersionState,
    event_digest,
)
from modstream.scanning.plan import sha256_hex
from modstream.trust.hashbank import BANDS, PHASH_MAX_DISTANCE, band_values

RETENTION_MS = STATE_TTL_MS
MAX_VERSIONS_PER_KEY = 512
MAX_ADDS_PER_KEY = 512

State = dict[str, Any]


@dataclass(frozen=True)
class RetroRecord:
    """The internal `moderation.retro` record: the version to re-decide at `ts` (the bank
    add's), and the addition that caused it."""

    event_id: str
    content_id: str
    content_version: int
    bank: str
    hash_type: str
    hash: str
    bank_event_id: str
    ts: int

    @classmethod
    def from_dict(cls, document: dict[str, Any]) -> RetroRecord:
        return cls(**{name: document[name] for name in cls.__dataclass_fields__})


@dataclass
class RetroResult:
    state: State | None
    outputs: list[dict[str, Any]] = field(default_factory=list)
    timers: list[int] = field(default_factory=list)


def _phash_keys(phash: int) -> list[str]:
    return [f"phash:{band}:{value:02x}" for band, value in enumerate(band_values(phash))]


def registration_keys(sha256: str | None, phash: str | None) -> list[str]:
    """The hash keys an upload registers under."""
    keys = [f"sha256:{sha256.lower()}"] if sha256 else []
    return keys + (_phash_keys(int(phash, 16)) if phash else [])


def bank_keys(hash_type: str, hash_hex: str) -> list[str]:
    """The hash keys a bank record goes to."""
    if hash_type == "sha256":
        return [f"sha256:{hash_hex.lower()}"]
    return _phash_keys(int(hash_hex, 16))


def new_state() -> State:
    # versions: [upload ts, content_id, content_version, sha256, phash]
    # adds: [ts, bank event id, bank, hash_type, hash]
    return {"versions": [], "adds": [], "latest": None, "timer": None}


def _matches(key: str, version: list[Any], add: list[Any]) -> bool:
    """Whether a registration and a bank add at this key are a candidate pair. A phash pair is
    reported at the lowest band it shares only, so it is emitted once, not once per band."""
    _, _, _, sha256, phash = version
    _, _, _, hash_type, banked = add
    if key.startswith("sha256:"):
        return hash_type == "sha256" and sha256 is not None and sha256.lower() == banked.lower()
    if hash_type != "phash" or phash is None:
        return False
    mine, theirs = int(phash, 16), int(banked, 16)
    if (mine ^ theirs).bit_count() > PHASH_MAX_DISTANCE:
        return False
    shared = [
        b
        for b, (x, y) in enumerate(zip(band_values(mine), band_values(theirs), strict=True))
        if x == y
    ]
    return int(key.split(":")[1]) == shared[0] if shared else False


def _retro(version: list[Any], add: list[Any]) -> dict[str, Any]:
    upload_ts, content_id, content_version, _, _ = version
    bank_ts, bank_event_id, bank, hash_type, banked = add
    del upload_ts
    return {
        "event_id": f"retro-{sha256_hex(content_id, content_version, bank_event_id)[:32]}",
        "content_id": content_id,
        "content_version": content_version,
        "bank": bank,
        "hash_type": hash_type,
        "hash": banked.lower(),
        "bank_event_id": bank_event_id,
        "ts": bank_ts,
    }


def on_registration(state: State | None, key: str, upload: dict[str, Any]) -> RetroResult:
    """An upload at `upload["ts"]`: re-decide it for every held addition after its ts, and keep
    it (within retention and the per-key bound) for additions still to come."""
    state = state or new_state()
    version = [
        upload["ts"],
        upload["content_id"],
        upload["content_version"],
        upload.get("sha256"),
        upload.get("phash"),
    ]
    if any(v[1] == version[1] and v[2] == version[2] for v in state["versions"]):
        return RetroResult(state)  # the same version registered twice
    outputs = [
        _retro(version, add)
        for add in state["adds"]
        if version[0] < add[0] and _matches(key, version, add)
    ]
    state["latest"] = max(state["latest"] or version[0], version[0])
    state["versions"].append(version)
    state["versions"].sort(key=lambda v: (v[0], v[1], v[2]))
    return RetroResult(state, outputs, _prune(state))


def on_bank(state: State | None, key: str, entry: dict[str, Any]) -> RetroResult:
    """A bank record at `entry["ts"]`: an `add` re-decides every held registration uploaded
    before it and is kept for registrations still to come; a `remove` ends the held additions
    of the same bank and hash at or before its ts (it re-decides nothing)."""
    state = state or new_state()
    bank_ts, bank, hash_type, banked = entry["ts"], entry["bank"], entry["hash_type"], entry["hash"]
    if entry["op"] == "remove":
        state["adds"] = [
            a
            for a in state["adds"]
            if not (a[2] == bank and a[4].lower() == banked.lower() and a[0] <= bank_ts)
        ]
        return _maybe_empty(state)
    add = [bank_ts, entry["event_id"], bank, hash_type, banked]
    if any(a[1] == add[1] for a in state["adds"]):
        return RetroResult(state)  # the same addition again
    outputs = [
        _retro(version, add)
        for version in state["versions"]
        if version[0] < bank_ts and _matches(key, version, add)
    ]
    state["adds"].append(add)
    state["adds"].sort(key=lambda a: (a[0], a[1]))
    return RetroResult(state, outputs, _prune(state))


def on_timer(state: State | None, ts: int) -> RetroResult:
    """The key's timer at event time `ts`: additions at or before `ts` are done (every
    registration uploaded before them has arrived, unless late); registrations older than the
    retention go. The key is cleared when nothing is left; else one timer is re-armed."""
    if state is None:
        return RetroResult(None)
    state["timer"] = None
    state["adds"] = [a for a in state["adds"] if a[0] > ts]
    state["versions"] = [v for v in state["versions"] if v[0] + RETENTION_MS >= ts]
    return RetroResult(state, timers=_prune(state)) if _held(state) else RetroResult(None)


def _held(state: State) -> bool:
    return bool(state["versions"] or state["adds"])


def _maybe_empty(state: State) -> RetroResult:
    return RetroResult(state) if _held(state) else RetroResult(None)


def _prune(state: State) -> list[int]:
    """Keep registrations within retention of the newest upload seen here, at most the
    per-key bounds (the newest); return the one timer to arm, if an earlier one is needed:
    the first pending addition's ts, or when the newest registration ages out."""
    latest = state["latest"]
    if latest is not None:
        horizon = latest - RETENTION_MS
        state["versions"] = [v for v in state["versions"] if v[0] >= horizon]
    del state["versions"][:-MAX_VERSIONS_PER_KEY]
    del state["adds"][:-MAX_ADDS_PER_KEY]
    candidates = [a[0] for a in state["adds"][:1]]
    if state["versions"]:
        candidates.append(state["versions"][-1][0] + RETENTION_MS + 1)
    if not candidates:
        return []
    due = min(candidates)
    if state["timer"] is None or state["timer"] > due:
        state["timer"] = due
        return [due]
    return []


def version_key(record: dict[str, Any]) -> str:
    """The moderation operator's key for a retro record: `content_id \\x1f content_version`."""
    return f"{record['content_id']}\x1f{record['content_version']}"


__all__ = [
    "BANDS",
    "RETRO",
    "RetroRecord",
    "bank_keys",
    "on_bank",
    "on_registration",
    "on_timer",
    "registration_keys",
    "version_key",
]


def on_retro(state: VersionState | None, record: Any, ts: int, ctx: Context) -> StepResult:
    """A bank addition at `ts` for a version uploaded before it (contract v1.1): decide again at
    `ts` (`trigger: policy_change`) when the version, as stored, matches the added bank then
    (`ctx.hash_matches`: HashBanks at `ts`, the policy's phash distance). A version without
    content, deleted or expired is left alone; nothing of it is created, its TTL does not move."""
    if state is None or state.deleted or state.content is None:
        return StepResult(state)
    seen = event_digest(record.event_id)
    if seen in state.events:
        return StepResult(state)
    state.events[seen] = 1
    if record.bank not in ctx.hash_matches:
        return StepResult(state)
    return StepResult(state, outputs=decide(state, ctx, ts, "policy_change"))
