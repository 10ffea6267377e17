"""Policy versions over time: every version seen, which is active, shadow or canary when, and
whether publication is paused; HMAC verification (modstream/trust/signing.py), the two-person
approval of active versions and the contract's rejection rules.

Contract: docs/CONTRACT.md, "policy.rules (key: `policy_id`; broadcast to every evaluator)":
"A version whose signature does not verify is rejected to the DLQ with `error_class:
"signature"`; one whose document does not validate, or whose version is not greater than the
active one (except through `rollback`), with `error_class: "policy"`. Either way the active
policy stays." Control records: `rollback`, `pause_publication` | `resume_publication` ("while
paused, every new decision is at least PENDING"). "Time": "A policy version, control record or
hash-bank change takes effect for input whose `ts` is at or after its own `ts`."

Proved by:
    tests/operators/test_policy_store.py::test_altered_resigned_with_another_key_and_older_versions_are_rejected
    tests/operators/test_policy_store.py::test_an_invalid_document_or_a_mismatched_version_is_a_policy_rejection
    tests/operators/test_policy_store.py::test_a_version_applies_from_its_ts_on_whatever_the_arrival_order
    tests/operators/test_policy_store.py::test_rollback_to_an_older_seen_version_only
    tests/operators/test_policy_store.py::test_shadow_and_canary_candidates
    tests/operators/test_policy_store.py::test_rejections_become_dlq_records_of_their_class
    tests/operators/test_moderation.py::test_pause_floors_new_decisions_at_pending

This is what the moderation job keeps in broadcast state (as the list of accepted records,
`to_records` / `from_records`). Event time rules: a version or control record takes effect for
input whose `ts` is at or after its own `ts`, whatever order records arrive in.
"""

from __future__ import annotations

import json
from bisect import bisect_right
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Final

from modstream.contract import SchemaError, dead_letter, parse
from modstream.contract.policy import PolicyControl, PolicyVersion
from modstream.core.ids import SHA256
from modstream.core.values import Value
from modstream.policy.evaluate import CompiledPolicy, PolicyError, load_policy
from modstream.trust import two_person
from modstream.trust.signing import (
    SIGNATURE_PREFIX,
    Keyring,
    approver_key,
    canonical_json,
    sign,
    valid_approvals,
    verify,
)


def canary_bucket(content_id: str) -> int:
    """A stable bucket 0..9999 for a content id: canary_percent 5 takes buckets 0..499."""
    digest: bytes = SHA256(content_id.encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") % 10_000


class Rejected(Exception):
    """A policy record the store refused; `error_class` is the DLQ class."""

    def __init__(self, error_class: str, message: str) -> None:
        super().__init__(message)
        self.error_class = error_class


@dataclass(frozen=True)
class Snapshot:
    """Which versions apply from `ts` on (until the next snapshot)."""

    ts: int
    active: int | None = None
    shadow: int | None = None
    canary: int | None = None
    canary_percent: float = 0.0
    paused: bool = False


class Resolution(Value):
    """For one input: the policy that decides it and the candidates evaluated in shadow."""

    FIELDS = ("decide", "shadows", "paused")

    def __init__(
        self, decide: CompiledPolicy | None, shadows: tuple[CompiledPolicy, ...], paused: bool
    ) -> None:
        self.decide: Final = decide
        self.shadows: Final = shadows
        self.paused: Final = paused


@dataclass
class _Policy:
    versions: dict[int, CompiledPolicy] = field(default_factory=dict)
    records: dict[int, dict[str, Any]] = field(default_factory=dict)
    # (ts, arrival sequence, record) of every accepted version and control record.
    events: list[tuple[int, int, dict[str, Any]]] = field(default_factory=list)
    snapshots: list[Snapshot] = field(default_factory=list)

    def rebuild(self) -> None:
        state = Snapshot(ts=0)
        snapshots: list[Snapshot] = []
        for ts, _, record in sorted(self.events, key=lambda event: (event[0], event[1])):
            state = _next(state, record, ts)
            if snapshots and snapshots[-1].ts == ts:
                snapshots[-1] = state
            else:
                snapshots.append(state)
        self.snapshots = snapshots

    def at(self, ts: int) -> Snapshot | None:
        position = bisect_right(self.snapshots, ts, key=_snapshot_ts)
        return self.snapshots[position - 1] if position else None

    def span(self, ts: int) -> tuple[int, int]:
        """The event times [start, end) around `ts` that `at` answers alike: from the snapshot
        in force at `ts` (or the earliest time) to the next one (or the latest time)."""
        position = bisect_right(self.snapshots, ts, key=_snapshot_ts)
        start = self.snapshots[position - 1].ts if position else _EARLIEST
        end = self.snapshots[position].ts if position < len(self.snapshots) else _LATEST
        return start, end

    def latest(self) -> Snapshot | None:
        return self.snapshots[-1] if self.snapshots else None


# Bounds of event time (a signed 64-bit `ts`, as Flink's timestamps) for `_Policy.span`.
_EARLIEST = -(2**63)
_LATEST = 2**63


def _snapshot_ts(snapshot: Snapshot) -> int:
    return snapshot.ts


def _next(state: Snapshot, record: Mapping[str, Any], ts: int) -> Snapshot:
    command = record.get("command")
    if command == "pause_publication":
        return replace(state, ts=ts, paused=True)
    if command == "resume_publication":
        return replace(state, ts=ts, paused=False)
    if command == "rollback":
        version = int(record["version"])
        return replace(
            state,
            ts=ts,
            active=version,
            shadow=None if state.shadow == version else state.shadow,
            canary=None if state.canary == version else state.canary,
            canary_percent=0.0 if state.canary == version else state.canary_percent,
        )
    version = int(record["version"])
    mode = record.get("mode")
    if mode == "shadow":
        return replace(state, ts=ts, shadow=version)
    if mode == "canary":
        return replace(
            state, ts=ts, canary=version, canary_percent=float(record.get("canary_percent") or 0.0)
        )
    # An active version retires candidates it supersedes.
    shadow = state.shadow if state.shadow is not None and state.shadow > version else None
    canary = state.canary if state.canary is not None and state.canary > version else None
    return replace(
        state,
        ts=ts,
        active=version,
        shadow=shadow,
        canary=canary,
        canary_percent=state.canary_percent if canary is not None else 0.0,
    )


class PolicyStore:
    """Every policy version seen, per policy_id, and which applies at which event time.

    `keyring` holds the people's keys (modstream/trust/two_person.py): every version is accepted
    only with its author's signature, and an active one only with an approval of its exact document
    by someone other than its author and a signed activation (a promoted candidate, or a reason),
    unless the keyring says `require_approval=False`. Without a keyring no person's signature
    verifies, so every pushed version is refused."""

    def __init__(self, keyring: Keyring | None = None) -> None:
        self.keyring = keyring if keyring is not None else Keyring()
        self._policies: dict[str, _Policy] = {}
        self._event_ids: set[str] = set()
        self._sequence = 0
        # The last resolution that does not depend on the content id (no canary), with what it
        # holds for: (records accepted then, policy id, from ts, until ts). Each input and
        # timer of the moderation job asks (`resolve`), nearly all within one policy snapshot.
        self._held: tuple[int, str, int, int, Resolution] | None = None

    # What the moderation job asks.
    def resolve(self, policy_id: str, ts: int, content_id: str) -> Resolution:
        """The policy that decides `content_id` at event time `ts` and those it is compared
        with in shadow. Kept between calls for the span of event time it holds for (no record
        accepted since, no canary: a canary splits by content id, so that is resolved anew)."""
        held = self._held
        if (
            held is not None
            and held[0] == self._sequence
            and held[2] <= ts < held[3]
            and held[1] == policy_id
        ):
            return held[4]
        policy = self._policies.get(policy_id)
        snapshot = policy.at(ts) if policy else None
        if policy is None or snapshot is None:
            return Resolution(None, (), False)
        active = policy.versions.get(snapshot.active) if snapshot.active else None
        decide = active
        shadows: list[CompiledPolicy] = []
        if snapshot.canary is not None:
            canary = policy.versions[snapshot.canary]
            if canary_bucket(content_id) < round(snapshot.canary_percent * 100):
                decide = canary
            else:
                shadows.append(canary)
        if snapshot.shadow is not None:
            shadows.append(policy.versions[snapshot.shadow])
        resolution = Resolution(decide, tuple(shadows), snapshot.paused)
        if snapshot.canary is None:
            start, end = policy.span(ts)
            self._held = (self._sequence, policy_id, start, end, resolution)
        return resolution

    def snapshot(self, policy_id: str, ts: int | None = None) -> Snapshot | None:
        policy = self._policies.get(policy_id)
        if policy is None:
            return None
        return policy.latest() if ts is None else policy.at(ts)

    def version(self, policy_id: str, version: int) -> CompiledPolicy | None:
        policy = self._policies.get(policy_id)
        return policy.versions.get(version) if policy else None

    def records(self, policy_id: str) -> list[dict[str, Any]]:
        """Accepted records of one policy in event-time order (the audit trail)."""
        policy = self._policies.get(policy_id)
        if policy is None:
            return []
        return [record for _, _, record in sorted(policy.events, key=lambda e: (e[0], e[1]))]

    def policy_ids(self) -> list[str]:
        return sorted(self._policies)

    # How records get in.
    def install(self, document: Mapping[str, Any], ts: int = 0) -> CompiledPolicy:
        """Trust a document without a signature (replay's --policy file, tests): active from ts."""
        compiled = _compile(document)
        record = {
            "event_id": f"installed:{compiled.policy_id}:{compiled.version}",
            "policy_id": compiled.policy_id,
            "version": compiled.version,
            "mode": "active",
            "ts": ts,
            "document": dict(document),
        }
        self._accept(record, compiled)
        return compiled

    def apply(self, raw: bytes | str | Mapping[str, Any], key: bytes | None) -> bool:
        """Apply one policy.rules record. True when it changed the store, False for a duplicate
        event_id. Raises SchemaError (DLQ class schema) or Rejected (signature / policy)."""
        record, parsed = _read(raw)
        if parsed.event_id in self._event_ids:
            return False
        if key is None or not verify(record, key):
            raise Rejected(
                "signature",
                f"policy.rules: signature of {parsed.policy_id} "
                f"record {parsed.event_id!r} does not verify",
            )
        policy = self._policies.get(parsed.policy_id)
        current = policy.latest() if policy else None
        active = current.active if current else None
        if isinstance(parsed, PolicyControl):
            _check_control(parsed, policy, active)
            self._accept(record, None)
            return True
        compiled = _compile_version(parsed)
        _check_version(parsed, policy, active)
        if self.keyring.require_approval:
            self._check_two_persons(record, parsed, policy)
        self._accept(record, compiled)
        return True

    def _check_two_persons(
        self, record: Mapping[str, Any], parsed: PolicyVersion, policy: _Policy | None
    ) -> None:
        """Every version is signed by its author's own key (class `signature`); an active one
        also needs someone else's approval and a signed activation (class `policy`)."""
        refusal = two_person.authorship_refusal(record, self.keyring)
        if refusal is not None:
            raise Rejected("signature", refusal)
        if parsed.mode != "active":
            return
        self._check_approval(record, parsed)
        promotes = policy is not None and _promotes(parsed, policy)
        refusal = two_person.promotion_refusal(record, self.keyring, promotes=promotes)
        if refusal is not None:
            raise Rejected("policy", refusal)

    def _check_approval(self, record: Mapping[str, Any], parsed: PolicyVersion) -> None:
        """An active version needs an approval of its exact document, by someone other than
        its author, that verifies with the approver's key (class `policy` otherwise)."""
        approvals = record.get("approvals")
        found = valid_approvals(
            parsed.document,
            parsed.author,
            approvals if isinstance(approvals, list) else [],
            approver_key(self.keyring),
        )
        if not found:
            raise Rejected(
                "policy",
                f"policy_store: {parsed.policy_id} v{parsed.version} mode active has no "
                f"approval (field approvals) of this document by someone other than its "
                f"author that verifies with the approver's key",
            )

    def _accept(self, record: dict[str, Any], compiled: CompiledPolicy | None) -> None:
        policy = self._policies.setdefault(str(record["policy_id"]), _Policy())
        if compiled is not None:
            policy.versions[compiled.version] = compiled
            policy.records[compiled.version] = record
        self._sequence += 1
        policy.events.append((int(record["ts"]), self._sequence, record))
        policy.rebuild()
        self._event_ids.add(str(record["event_id"]))

    # Broadcast state: the accepted records, re-applied without re-verification.
    def to_records(self) -> list[dict[str, Any]]:
        everything = [
            (seq, record) for policy in self._policies.values() for _, seq, record in policy.events
        ]
        return [record for _, record in sorted(everything, key=lambda item: item[0])]

    @classmethod
    def from_records(
        cls,
        records: list[dict[str, Any]],
        trusted: Mapping[str, Any] | None = None,
        keyring: Keyring | None = None,
    ) -> PolicyStore:
        """Rebuild from `to_records()`; a `trusted` document is installed first (active from
        ts 0), so signed records on the topic build on it. `keyring` checks later `apply`s."""
        store = cls(keyring)
        if trusted is not None:
            store.install(trusted, ts=0)
        for record in records:
            if str(record["event_id"]) in store._event_ids:
                continue
            compiled = _compile(record["document"]) if "document" in record else None
            store._accept(dict(record), compiled)
        return store


def _read(
    raw: bytes | str | Mapping[str, Any],
) -> tuple[dict[str, Any], PolicyVersion | PolicyControl]:
    """The record as a dict (what the signature covers) and as validated by the contract."""
    if isinstance(raw, Mapping):
        record = dict(raw)
        text = json.dumps(record)
    else:
        text = raw.decode("utf-8", errors="replace") if isinstance(raw, bytes) else raw
        record = None
    parsed = parse("policy.rules", text)
    if record is None:
        record = json.loads(text)
    assert isinstance(parsed, PolicyVersion | PolicyControl)
    return record, parsed


def _check_control(parsed: PolicyControl, policy: _Policy | None, active: int | None) -> None:
    """A rollback goes to a version seen before and older than the active one."""
    if parsed.command != "rollback":
        return
    assert parsed.version is not None
    if policy is None or parsed.version not in policy.versions:
        raise Rejected(
            "policy",
            f"rollback of {parsed.policy_id} to version {parsed.version}, which was never seen",
        )
    if active is not None and parsed.version >= active:
        raise Rejected(
            "policy",
            f"rollback of {parsed.policy_id} to version "
            f"{parsed.version}: not older than active {active}",
        )


def _compile_version(parsed: PolicyVersion) -> CompiledPolicy:
    """The record's document compiled; it must be the version the record says it is."""
    try:
        compiled = _compile(parsed.document)
    except PolicyError as error:
        raise Rejected(
            "policy",
            f"policy {parsed.policy_id} v{parsed.version}: {'; '.join(error.problems)[:700]}",
        ) from None
    if (compiled.policy_id, compiled.version) != (parsed.policy_id, parsed.version):
        raise Rejected(
            "policy",
            f"record says {parsed.policy_id} v{parsed.version} but its "
            f"document says {compiled.policy_id} v{compiled.version}",
        )
    return compiled


def _check_version(parsed: PolicyVersion, policy: _Policy | None, active: int | None) -> None:
    """A version is new and greater than the active one (versions only go forward), or the
    promotion of a shadow or canary candidate to active (`_promotes`)."""
    if policy is not None and parsed.version in policy.versions and not _promotes(parsed, policy):
        raise Rejected("policy", f"{parsed.policy_id} v{parsed.version} was already seen")
    if active is not None and parsed.version <= active:
        raise Rejected(
            "policy",
            f"{parsed.policy_id} v{parsed.version} is not greater than the active version {active}",
        )


def _promotes(parsed: PolicyVersion, policy: _Policy) -> bool:
    """An active record of a version last seen as shadow or canary, carrying exactly the same
    document: the candidate that was evaluated becomes active (`modstream policy promote`).
    A version once active (even if rolled back since) is never activated again this way."""
    seen = policy.records.get(parsed.version)
    return (
        parsed.mode == "active"
        and seen is not None
        and seen.get("mode") in ("shadow", "canary")
        and canonical_json(seen.get("document") or {}) == canonical_json(parsed.document)
    )


def _compile(document: Mapping[str, Any]) -> CompiledPolicy:
    return load_policy(document)


__all__ = [
    "SIGNATURE_PREFIX",
    "Keyring",
    "PolicyStore",
    "Rejected",
    "Resolution",
    "SchemaError",
    "Snapshot",
    "canary_bucket",
    "canonical_json",
    "sign",
    "verify",
]


def dead_letter_for(
    raw: bytes | str,
    error: Rejected | SchemaError,
    *,
    ts: int,
    key: str | None = None,
    source_topic: str = "policy.rules",
) -> Any:
    """The DLQ record for a policy record the store refused (class schema, signature or policy)."""
    error_class = error.error_class if isinstance(error, Rejected) else "schema"
    # A Rejected carries a message the store wrote (policy id, version, field), safe to keep;
    # passed as an exception, `describe` would reduce it to "unexpected Rejected".
    return dead_letter(
        source_topic,
        key,
        raw,
        str(error) if isinstance(error, Rejected) else error,
        ts=ts,
        error_class=error_class,  # type: ignore[arg-type]
        operator="policy_store",
    )
