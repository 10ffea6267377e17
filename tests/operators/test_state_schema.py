"""Keyed state schema versions: every earlier shape migrates, a later one is refused."""

from __future__ import annotations

import copy
import json
import math
from typing import Any

import msgspec
import pytest

from operators.human import human_id
from operators.moderation import TOMBSTONE_KEEPS, new_state
from operators.state_schema import (
    KINDS,
    SCHEMA_FIELD,
    STATE_SCHEMA,
    StateTooNew,
    dump,
    dump_version,
    load,
    migrate,
    schema_of,
)
from tests.conftest import T0, delete
from tests.operators.test_moderation import Version, review

ONE_HOUR = 3_600_000

# Written by the step of commit 32d9481 (before issue 12), as it was: an image upload on a
# comment, decided PROVISIONAL_ALLOW (`scanning`) by the fast gate, both detectors asked.
# Produced by running that commit's tests.operators.test_moderation.Version with
# `upload(modality="image", mime_type="image/jpeg", surface="comment")`.
PRE_ISSUE_12_IMAGE: dict[str, Any] = json.loads(
    '{"cid":"c-1","ver":1,"content":{"ts":1764460800000,"author_id":"author-1",'
    '"modality":"image","surface":"comment","region":"DE","audience":"all","account_risk":0.2,'
    '"size_bytes":52,"mime_type":"image/jpeg","sha256":"abababababababababababababababababab'
    'abababababababababababababab","phash":null,"segments":1},"events":{"ev-c-1-1764460800000":'
    '1},"evidence":{},"reporters":{},"report_weight":0.0,"burst":[],"burst_new":0,"human":null,'
    '"appeal":null,"rev":1,"last":{"outcome":"PROVISIONAL_ALLOW","restriction":null,"state":'
    '"scanning","visibility":"public"},"tasks":[],"open_tasks":[],"deadline":1764460830000,'
    '"deleted":false,"shadow":{},"ttl":1767052800000,"ttl_timer":1767052800000}'
)
# The same document with the fast gate's decision today's shipped policy makes: media stays
# PENDING until its integrity gate passed (issue 27, point 9), so a fresh upload compares.
PRE_ISSUE_12_IMAGE_NOW: dict[str, Any] = {
    **PRE_ISSUE_12_IMAGE,
    "last": {
        "outcome": "PENDING",
        "restriction": None,
        "state": "scanning",
        "visibility": "pending",
    },
}
# The timers that commit's job had registered for it (restored with the checkpoint).
PRE_ISSUE_12_TIMERS = {1764460830000, 1767052800000}
# The same commit's tombstone of a text upload deleted 100 ms later: it kept the content.
PRE_ISSUE_12_TOMBSTONE: dict[str, Any] = json.loads(
    '{"cid":"c-1","ver":1,"content":{"ts":1764460800000,"author_id":"author-1","modality":'
    '"text","surface":"comment","region":"DE","audience":"all","account_risk":0.2,"size_bytes":'
    '52,"mime_type":"text/plain","sha256":"abababababababababababababababababababababababababab'
    'ababababababab","phash":null,"segments":1},"events":{"ev-c-1-1764460800000":1,'
    '"del-c-1-1764460800100":1},"evidence":{},"reporters":{},"report_weight":0.0,"burst":[],'
    '"burst_new":0,"human":null,"appeal":null,"rev":2,"last":{"outcome":"PROVISIONAL_ALLOW",'
    '"restriction":null,"state":"deleted","visibility":"hidden"},"tasks":[],"open_tasks":[],'
    '"deadline":1764460805000,"deleted":true,"shadow":{},"ttl":1764547200100,"ttl_timer":'
    "1764547200100}"
)
IMAGE = {"modality": "image", "mime_type": "image/jpeg", "surface": "comment"}


def failed_gate_then_expiry(version: Version) -> list[Any]:
    """The gate detector fails one second after the upload, then an hour and more passes."""
    version.outputs.clear()
    version.evidence(
        detector="media_check", model_version="mc-1", status="error", scores=None, at=T0 + 1000
    )
    version.fire_until(T0 + 2 * ONE_HOUR)
    return version.outputs


def restored(state: dict[str, Any]) -> Version:
    version = Version()
    version.state = copy.deepcopy(state)
    version.timers = set(PRE_ISSUE_12_TIMERS)
    return version


def test_a_pre_issue_12_document_decides_as_a_fresh_state_once_migrated() -> None:
    fresh = Version()
    fresh.upload(**IMAGE)
    expected = failed_gate_then_expiry(fresh)
    migrated = restored(migrate(PRE_ISSUE_12_IMAGE_NOW, "version"))
    assert failed_gate_then_expiry(migrated) == expected
    # What that is: the failed gate decides at once (the model is withheld, UNKNOWN): media
    # whose checks could not answer stays PENDING and a reviewer is asked (`unknown-media`).
    decisions = [
        (o["outcome"], o["state"], o["matched_rules"])
        for t, _, o in expected
        if t == "moderation.decisions"
    ]
    assert decisions == [("PENDING", "pending_review", ["unknown-media"])]
    # Read as it is, the old document does not decide as a fresh one does.
    raw = failed_gate_then_expiry(restored(PRE_ISSUE_12_IMAGE_NOW))
    assert raw != expected


def test_a_pre_issue_12_document_has_schema_0_and_gains_todays_fields() -> None:
    original = copy.deepcopy(PRE_ISSUE_12_IMAGE)
    migrated = migrate(PRE_ISSUE_12_IMAGE, "version")
    assert schema_of(PRE_ISSUE_12_IMAGE, "version") == 0
    assert original == PRE_ISSUE_12_IMAGE  # the stored document is never changed in place
    assert set(new_state("c-1", 1)) <= set(migrated)
    assert migrated[SCHEMA_FIELD] == STATE_SCHEMA and migrated["scan"] == "models"
    assert {k: migrated[k] for k in PRE_ISSUE_12_IMAGE} == PRE_ISSUE_12_IMAGE


def test_a_pre_issue_12_tombstone_loses_the_content_and_still_ignores_late_input() -> None:
    migrated = migrate(PRE_ISSUE_12_TOMBSTONE, "version")
    assert migrated["content"] is None and migrated["deleted"] is True
    assert set(migrated) == set(new_state("c-1", 1)) | {SCHEMA_FIELD}
    assert {k: migrated[k] for k in TOMBSTONE_KEEPS} == {
        k: PRE_ISSUE_12_TOMBSTONE[k] for k in TOMBSTONE_KEEPS
    }
    version = restored(migrated)
    version.send("content.versions", delete(at=T0 + 200))
    version.evidence(at=T0 + 300)
    assert version.outputs == [] and version.state is not None
    assert version.state["deleted"] is True


def todays_documents() -> list[dict[str, Any]]:
    """Schema 1 (issue 12, unversioned): a full state, a tombstone and a retired record."""
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
    documents = [full.state, gone.state, retired.state]
    assert retired.state is not None and retired.state.get("retired")
    return [dict(document) for document in documents if document is not None]


def test_unversioned_issue_12_documents_are_schema_1_and_migrate_unchanged() -> None:
    for document in todays_documents():
        assert schema_of(document, "version") == 1
        assert migrate(document, "version") == {**document, SCHEMA_FIELD: STATE_SCHEMA}


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


@pytest.mark.parametrize("kind", KINDS)
def test_every_schema_from_the_oldest_unversioned_one_has_a_step_up(kind: str) -> None:
    """Raising STATE_SCHEMA without a migration step fails here, not at a restore."""
    oldest = 0 if kind == "version" else 1
    for schema in range(oldest, STATE_SCHEMA + 1):
        document = {**new_state("c-1", 1), SCHEMA_FIELD: schema}
        assert migrate(document, kind)[SCHEMA_FIELD] == STATE_SCHEMA


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


def test_the_version_document_is_packed_and_reads_back_as_its_json_would() -> None:
    """Schema 3: MessagePack bytes, read back as the same document as its JSON text (string
    keys, exact floats, UTF-8), in fewer bytes; a schema 2 document (today's JSON text, as
    the job before stored it) reads the same, stamped with today's schema."""
    odd = {**new_state("c-é✓", 2**62), "report_weight": 0.1 + 0.2, "asked_at": 1e-05}
    for document in [*todays_documents(), odd]:
        packed = dump_version(document)
        as_json = json.loads(dump(document))
        assert isinstance(packed, bytes) and not packed.startswith(b"{")
        assert load(packed, "version") == as_json
        assert len(packed) < len(dump(document).encode())
        stamped = f'"schema":{STATE_SCHEMA}'
        schema_2 = dump({**document, SCHEMA_FIELD: 2}).replace(stamped, '"schema":2')
        assert json.loads(schema_2)[SCHEMA_FIELD] == 2
        assert load(schema_2, "version") == as_json
        assert load(schema_2.encode(), "version") == as_json


def test_a_version_document_msgpack_cannot_hold_is_stored_as_json_bytes() -> None:
    huge = {**new_state("c-1", 1), "rev": 2**70}
    stored = dump_version(huge)
    assert stored.startswith(b"{")
    assert load(stored, "version") == {**huge, SCHEMA_FIELD: STATE_SCHEMA}


def schema_3_documents() -> list[dict[str, Any]]:
    """Documents as the schema 3 job stored them: today's shapes without `human_ids` (a full
    state with a review applied, and its retired record), stamped 3 and packed."""
    version = Version()
    version.upload()
    version.evidence(at=T0 + 500)
    version.send("review.decisions", review("t-1", "BLOCK", at=T0 + 1000))
    full = as_schema_3(version.state or {})
    version.fire_until(T0 + 40 * 86_400_000)
    retired = as_schema_3(version.state or {})
    assert retired["retired"] and "events" not in retired and "events" in full
    return [full, retired]


def as_schema_3(document: dict[str, Any]) -> dict[str, Any]:
    """Without what schema 4 added: `human_ids`, and the `id` of the human decision in force."""
    old = {k: v for k, v in document.items() if k != "human_ids"}
    old["human"] = {k: v for k, v in old["human"].items() if k != "id"}
    return {**old, SCHEMA_FIELD: 3}


def test_schema_3_documents_gain_human_ids_and_a_retired_one_still_takes_reviews() -> None:
    packed = [msgspec.msgpack.encode(doc) for doc in schema_3_documents()]  # as schema 3 did
    full, retired = (load(raw, "version") for raw in packed)
    assert full is not None and retired is not None
    assert full["human_ids"] == [] and full[SCHEMA_FIELD] == STATE_SCHEMA
    assert "human_ids" not in retired and retired[SCHEMA_FIELD] == STATE_SCHEMA  # stays compact
    version = Version()
    version.state = retired
    revision = retired["rev"]
    assert "id" not in retired["human"]  # schema 3 kept no digest of the review in force
    older = review("t-0", "ALLOW", at=T0 + 900)  # before the BLOCK in force: refused
    version.send("review.decisions", older)
    assert version.outputs == [] and [c for c, _ in version.dead_letters] == ["stale"]
    tie = review("t-tie", "BLOCK", at=T0 + 1000)  # at its ts: comes after it, and applies
    version.send("review.decisions", tie)
    assert version.state is not None and version.state["human"]["id"] == human_id(tie["event_id"])
    newer = review("t-2", "ALLOW", at=T0 + 40 * 86_400_000)
    version.send("review.decisions", newer)
    assert (version.last["outcome"], version.last["decision_revision"]) == ("ALLOW", revision + 1)
    assert version.state is not None
    assert version.state["human_ids"] == [human_id(tie["event_id"]), human_id(newer["event_id"])]
    count = len(version.outputs)
    version.send("review.decisions", newer)  # remembered from now on
    assert len(version.outputs) == count
