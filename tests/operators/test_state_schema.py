"""Keyed state schema versions: every earlier shape migrates, a later one is refused."""

from __future__ import annotations

import copy
import json
import math
from typing import Any

import msgspec
import pytest

from modstream.core import jsonio
from modstream.moderation.rules.human_input import human_id
from modstream.moderation.state import (
    LastDecision,
    VersionState,
    event_digest,
    from_document,
    to_document,
)
from modstream.moderation.state_schema import (
    KINDS,
    SCHEMA_FIELD,
    STATE_SCHEMA,
    StateTooNew,
    dump,
    dump_version,
    load,
    load_version,
    migrate,
    schema_of,
)
from modstream.moderation.step import TOMBSTONE_KEEPS, new_state
from modstream.testing import stored_states as schema_4_scenarios
from modstream.testing.records import T0, delete
from modstream.testing.stored_states import (
    IMAGE,
    PRE_ISSUE_12_IMAGE,
    PRE_ISSUE_12_IMAGE_NOW,
    PRE_ISSUE_12_TIMERS,
    PRE_ISSUE_12_TOMBSTONE,
)
from modstream.testing.versions import Version, review

ONE_HOUR = 3_600_000


def failed_gate_then_expiry(version: Version) -> list[Any]:
    """The gate detector fails one second after the upload, then an hour and more passes."""
    version.outputs.clear()
    version.evidence(
        detector="media_check", model_version="mc-1", status="error", scores=None, at=T0 + 1000
    )
    version.fire_until(T0 + 2 * ONE_HOUR)
    return version.outputs


def restored(state: VersionState) -> Version:
    version = Version()
    version.state = copy.deepcopy(state)
    version.timers = set(PRE_ISSUE_12_TIMERS)
    return version


def test_a_pre_issue_12_document_decides_as_a_fresh_state_once_migrated() -> None:
    fresh = Version()
    fresh.upload(**IMAGE)
    expected = failed_gate_then_expiry(fresh)
    migrated = from_document(migrate(PRE_ISSUE_12_IMAGE_NOW, "version"))
    assert failed_gate_then_expiry(restored(migrated)) == expected
    # What that is: the failed gate decides at once (the model is withheld, UNKNOWN): media
    # whose checks could not answer stays PENDING and a reviewer is asked (`unknown-media`).
    decisions = [
        (o["outcome"], o["state"], o["matched_rules"])
        for t, _, o in expected
        if t == "moderation.decisions"
    ]
    assert decisions == [("PENDING", "pending_review", ["unknown-media"])]
    # Read as it is (without the `scan` its migration infers), it does not decide the same.
    as_it_is = copy.deepcopy(migrated)
    as_it_is.scan = None
    assert failed_gate_then_expiry(restored(as_it_is)) != expected


def test_a_pre_issue_12_document_has_schema_0_and_gains_todays_fields() -> None:
    original = copy.deepcopy(PRE_ISSUE_12_IMAGE)
    migrated = migrate(PRE_ISSUE_12_IMAGE, "version")
    assert schema_of(PRE_ISSUE_12_IMAGE, "version") == 0
    assert original == PRE_ISSUE_12_IMAGE  # the stored document is never changed in place
    assert migrated[SCHEMA_FIELD] == STATE_SCHEMA and migrated["scan"] == "models"
    state = from_document(migrated)
    assert (state.content_id, state.content_version, state.decision_revision) == ("c-1", 1, 1)
    assert state.last_decision == LastDecision("PROVISIONAL_ALLOW", None, "scanning", "public")
    assert state.content is not None and state.content.sha256 == "ab" * 32
    assert state.events == {event_digest("ev-c-1-1764460800000"): 1} and state.human_ids == []
    assert (state.deadline, state.ttl, state.deadline_timer) == (1764460830000, 1767052800000, None)
    assert load_version(msgspec.msgpack.encode(PRE_ISSUE_12_IMAGE)) == state


def test_a_pre_issue_12_tombstone_loses_the_content_and_still_ignores_late_input() -> None:
    migrated = from_document(migrate(PRE_ISSUE_12_TOMBSTONE, "version"))
    assert migrated.content is None and migrated.deleted is True
    kept = {name: getattr(migrated, name) for name in TOMBSTONE_KEEPS}
    assert kept == {
        "content_id": "c-1",
        "content_version": 1,
        "events": {event_digest(event_id): 1 for event_id in PRE_ISSUE_12_TOMBSTONE["events"]},
        "decision_revision": 2,
        "last_decision": LastDecision("PROVISIONAL_ALLOW", None, "deleted", "hidden"),
        "appeal_id": None,
        "deleted": True,
        "ttl": PRE_ISSUE_12_TOMBSTONE["ttl"],
        "ttl_timer": PRE_ISSUE_12_TOMBSTONE["ttl_timer"],
        "waiting_reviews": [],
        "review_wait_timer": None,
    }
    fresh = new_state("c-1", 1)
    changed = {n for n in fresh.__struct_fields__ if getattr(migrated, n) != getattr(fresh, n)}
    assert changed <= set(TOMBSTONE_KEEPS)
    version = restored(migrated)
    version.send("content.versions", delete(at=T0 + 200))
    version.evidence(at=T0 + 300)
    assert version.outputs == [] and version.state is not None
    assert version.state.deleted is True


def schema_4_cases() -> list[list[Any]]:
    """[name, bytes the schema 4 job stored, its timers, its outputs after `continuation`
    (JSON text), its dead letters]: tests/operators/schema_4_scenarios.py."""
    return list(msgspec.msgpack.decode(schema_4_scenarios.FIXTURE.read_bytes()))


def test_a_schema_4_savepoint_restores_and_decides_as_the_schema_4_job_did() -> None:
    """Issue 26 point 1: bytes the schema 4 job stored (a full state with evidence and a lease,
    one waiting for its deadline, a retired record with a review, a tombstone, one with shadow
    candidates) load into `VersionState` and go on exactly as that job went on with them."""
    cases = schema_4_cases()
    assert [case[0] for case in cases] == list(schema_4_scenarios.SCENARIOS)
    for name, stored, timers, outputs, letters in cases:
        assert msgspec.msgpack.decode(stored)[SCHEMA_FIELD] == 4, name
        state = load_version(stored)
        assert isinstance(state, VersionState) and state.schema == STATE_SCHEMA, name
        assert load_version(dump_version(copy.deepcopy(state))) == state, name
        ctx = schema_4_scenarios.SCENARIOS[name]().ctx
        version = Version(ctx)
        version.state = state
        version.timers = set(timers)
        schema_4_scenarios.continuation(version)
        expected = [outputs, [tuple(letter) for letter in letters]]
        assert schema_4_scenarios.observed(version) == expected, name


def test_schema_4_documents_keep_every_field_under_its_new_name() -> None:
    for name, stored, *_ in schema_4_cases():
        document = msgspec.msgpack.decode(stored)
        state = load_version(stored)
        assert state is not None
        assert (state.content_id, state.content_version) == (document["cid"], document["ver"])
        assert state.decision_revision == document["rev"], name
        assert state.appeal_id == document.get("appeal")
        events = {event_digest(event_id): 1 for event_id in document.get("events", {})}
        assert state.events == events, name
        assert state.human_ids == document.get("human_ids", []), name
        last = document.get("last")
        if last is not None:
            assert state.last_decision is not None
            assert state.last_decision.outcome == last["outcome"]
            assert state.last_decision.evidence_refs == last.get("refs"), name
        if document.get("human") is not None:
            assert state.human is not None and state.human.digest == document["human"]["id"]
        assert {key: held.reviewer_id for key, held in state.leases.items()} == {
            key: held[0] for key, held in document.get("leases", {}).items()
        }
        assert {key: kept.decision_revision for key, kept in state.shadow.items()} == {
            key: kept[3] for key, kept in document.get("shadow", {}).items()
        }
        assert sorted(state.evidence) == sorted(document["evidence"]), name
        assert bool(state.retired) == bool(document.get("retired")), name


def test_unversioned_issue_12_documents_are_schema_1_and_migrate_as_schema_4_ones() -> None:
    """Schema 1 (issue 12, unversioned): the schema 4 fixture's documents without what came
    later (`schema`, `human_ids`) read as they do with it."""
    for name, stored, *_ in schema_4_cases():
        document = msgspec.msgpack.decode(stored)
        if document.get("human") is not None:
            continue  # a schema 1 human decision had no digest
        unversioned = {k: v for k, v in document.items() if k not in (SCHEMA_FIELD, "human_ids")}
        assert schema_of(unversioned, "version") == 1, name
        assert load_version(jsonio.dumps(unversioned)) == load_version(stored), name


@pytest.mark.parametrize("kind", KINDS)
def test_every_written_document_carries_the_schema_and_reads_back_the_same(kind: str) -> None:
    document = {"first": T0, "recent": [T0], "last": T0}
    stored = dump(document)
    assert json.loads(stored)[SCHEMA_FIELD] == STATE_SCHEMA
    assert load(stored, kind) == {**document, SCHEMA_FIELD: STATE_SCHEMA}
    assert load(None, kind) is None


@pytest.mark.parametrize("kind", KINDS)
def test_a_newer_schema_is_refused_naming_both_versions_and_what_to_do(kind: str) -> None:
    newer = {SCHEMA_FIELD: STATE_SCHEMA + 1, "cid": "c-1", "ver": 1}
    with pytest.raises(StateTooNew) as refused:
        migrate(newer, kind)
    message = str(refused.value)
    assert f"schema {STATE_SCHEMA + 1}" in message and f"schema {STATE_SCHEMA} " in message
    assert "restore with the code that wrote it" in message and kind in message
    assert newer == {SCHEMA_FIELD: STATE_SCHEMA + 1, "cid": "c-1", "ver": 1}


def test_a_newer_version_state_is_refused_and_its_appended_fields_do_not_break_the_read() -> None:
    """A later schema appends fields to the array: this code reads its schema and refuses."""
    packed = msgspec.msgpack.decode(dump_version(new_state("c-1", 1)))
    newer = msgspec.msgpack.encode([STATE_SCHEMA + 1, *packed[1:], "a later field", [1]])
    with pytest.raises(StateTooNew) as refused:
        load_version(newer)
    assert f"schema {STATE_SCHEMA + 1}" in str(refused.value)


@pytest.mark.parametrize("kind", KINDS)
def test_every_schema_from_the_oldest_unversioned_one_has_a_step_up(kind: str) -> None:
    """Raising STATE_SCHEMA without a migration step fails here, not at a restore."""
    oldest = 0 if kind == "version" else 1
    _, stored, *_ = schema_4_cases()[1]
    schema_4 = msgspec.msgpack.decode(stored)
    for schema in range(oldest, STATE_SCHEMA + 1):
        document = {**schema_4, SCHEMA_FIELD: schema}
        migrated = migrate(document, kind)
        assert migrated[SCHEMA_FIELD] == STATE_SCHEMA
        if kind == "version" and schema < STATE_SCHEMA:
            assert from_document(migrated) == load_version(stored)


def test_state_json_keeps_non_ascii_and_floats_and_falls_back_where_orjson_refuses() -> None:
    """Stored with orjson (UTF-8, exact floats); what it cannot write or read (NaN, integers
    beyond 64 bits, as json wrote them) goes through json, so every stored document loads."""
    document = {"cid": "c-é✓", "weight": 0.1 + 0.2, "tiny": 1e-05, "events": {"ev-ü": 1}}
    stored = dump(document)
    assert "é✓" in stored and json.loads(stored) == {**document, SCHEMA_FIELD: STATE_SCHEMA}
    assert load(stored, "reporter") == {**document, SCHEMA_FIELD: STATE_SCHEMA}
    huge = {"count": 2**70}
    assert load(dump(huge), "reporter") == {**huge, SCHEMA_FIELD: STATE_SCHEMA}
    written_by_json = json.dumps({"weight": float("nan"), SCHEMA_FIELD: STATE_SCHEMA})
    loaded = load(written_by_json, "reporter")
    assert loaded is not None and math.isnan(loaded["weight"])


def todays_states() -> list[VersionState]:
    """A full state, a tombstone and a retired record, as today's step leaves them."""
    full = Version()
    full.upload()
    full.evidence(at=T0 + 500)
    gone = Version()
    gone.upload()
    gone.send("content.versions", delete(at=T0 + 100))
    retired = Version()
    retired.upload()
    retired.evidence(at=T0 + 500)
    retired.fire_until(T0 + 40 * 86_400_000)
    assert retired.state is not None and retired.state.retired
    return [state for state in (full.state, gone.state, retired.state) if state is not None]


def test_the_version_state_is_packed_as_an_array_and_reads_back_the_same() -> None:
    """Schema 5: a MessagePack array in the fields' order (no names), read back equal (exact
    floats, UTF-8), in fewer bytes than its named document's JSON; that JSON (what is stored
    where MessagePack cannot hold a value) reads back the same."""
    odd = new_state("c-é✓", 2**62)
    odd.report_weight = 0.1 + 0.2
    for state in [*todays_states(), odd]:
        packed = dump_version(state)
        assert packed[:1] == b"\xdc" and msgspec.msgpack.decode(packed)[0] == STATE_SCHEMA
        assert load_version(packed) == state
        as_json = jsonio.dumps(to_document(state))
        assert len(packed) * 2 < len(as_json.encode())
        assert load_version(as_json) == state and load_version(as_json.encode()) == state


def test_a_version_state_msgpack_cannot_hold_is_stored_as_json_bytes() -> None:
    huge = new_state("c-1", 1)
    huge.decision_revision = 2**70
    stored = dump_version(huge)
    assert stored.startswith(b"{")
    assert load_version(stored) == huge


def test_schema_3_documents_gain_human_ids_and_a_retired_one_still_takes_reviews() -> None:
    """The schema 4 fixture's retired record with a review, as schema 3 stored it (without
    `human_ids` and the digest of the review in force)."""
    name, stored, *_ = schema_4_cases()[2]
    assert name == "reviewed_then_retired"
    document = msgspec.msgpack.decode(stored)
    old = {k: v for k, v in document.items() if k != "human_ids"}
    old["human"] = {k: v for k, v in old["human"].items() if k != "id"}
    retired = load_version(msgspec.msgpack.encode({**old, SCHEMA_FIELD: 3}))
    assert retired is not None and retired.retired and retired.human_ids == []
    assert retired.human is not None and retired.human.digest is None
    version = Version()
    version.state = retired
    revision = retired.decision_revision
    older = review("t-0", "ALLOW", at=T0 + 900)  # before the BLOCK in force: refused
    version.send("review.decisions", older)
    assert version.outputs == [] and [c for c, _ in version.dead_letters] == ["stale"]
    tie = review("t-tie", "BLOCK", at=T0 + 1000)  # at its ts: comes after it, and applies
    version.send("review.decisions", tie)
    assert version.state is not None and version.state.human is not None
    assert version.state.human.digest == human_id(tie["event_id"])
    newer = review("t-2", "ALLOW", at=T0 + 40 * 86_400_000)
    version.send("review.decisions", newer)
    assert (version.last["outcome"], version.last["decision_revision"]) == ("ALLOW", revision + 1)
    assert version.state is not None
    assert version.state.human_ids == [human_id(tie["event_id"]), human_id(newer["event_id"])]
    count = len(version.outputs)
    version.send("review.decisions", newer)  # remembered from now on
    assert len(version.outputs) == count


def test_the_schema_4_names_of_todays_state_read_back_as_the_same_state() -> None:
    """`schema_4_scenarios.as_schema_4` (what the other tests make earlier documents with)
    is `_version_4_to_5` backwards on the fixture's real documents."""
    for name, stored, *_ in schema_4_cases():
        state = load_version(stored)
        assert state is not None
        again = load_version(msgspec.msgpack.encode(schema_4_scenarios.as_schema_4(state)))
        # The digests stand for the event ids in the schema 4 document: digested again.
        events = {event_digest(digest): 1 for digest in state.events}
        assert again == msgspec.structs.replace(state, events=events), name
