"""Policy versions in event time: signatures, monotonic versions, rollback, pause, canary."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from modstream.contract import SchemaError
from modstream.policy.store import (
    PolicyStore,
    Rejected,
    Snapshot,
    canary_bucket,
    canonical_json,
    dead_letter_for,
    sign,
    verify,
)
from modstream.testing.policies import (
    KEY,
    approval,
    control,
    global_document,
    promotion,
    version_record,
)
from modstream.testing.records import ONE_MINUTE_LATER, T0, TEST_KEYRING
from modstream.trust.signing import Keyring


def store_with(*records: dict[str, Any]) -> PolicyStore:
    store = PolicyStore(TEST_KEYRING)
    for record in records:
        store.apply(record, KEY)
    return store


def test_canonical_json_is_sorted_compact_utf8_and_ignores_the_signature() -> None:
    record = {"b": 1, "a": {"é": "ü", "z": [1, 2]}, "signature": "x"}
    assert canonical_json(record) == '{"a":{"z":[1,2],"é":"ü"},"b":1}'.encode()


def test_sign_verify_round_trip_and_tampering() -> None:
    record = version_record(global_document(2))
    assert verify(record, KEY)
    assert not verify(record, b"another-key")
    altered = json.loads(json.dumps(record))
    altered["document"]["rules"][0]["outcome"] = "ALLOW"
    assert not verify(altered, KEY)
    assert not verify({**record, "signature": None}, KEY)
    assert not verify({**record, "signature": "hmac-sha256:" + "0" * 64}, KEY)
    # Known-answer check: the signature is HMAC-SHA256 over the canonical JSON.
    import hashlib
    import hmac

    expected = hmac.new(KEY, canonical_json(record), hashlib.sha256).hexdigest()
    assert record["signature"] == f"hmac-sha256:{expected}"


@given(
    record=st.dictionaries(
        st.text(max_size=5),
        st.one_of(
            st.integers(),
            st.text(max_size=10),
            st.booleans(),
            st.none(),
            st.lists(st.integers(), max_size=3),
        ),
        max_size=6,
    )
)
def test_any_record_signs_and_verifies(record: dict[str, Any]) -> None:
    record = {key: value for key, value in record.items() if key != "signature"}
    record["signature"] = sign(record, KEY)
    assert verify(record, KEY)


def test_altered_resigned_with_another_key_and_older_versions_are_rejected() -> None:
    store = store_with(version_record(global_document(3)))
    altered = version_record(global_document(4), ts=ONE_MINUTE_LATER)
    altered["document"]["default"] = "BLOCK"
    with pytest.raises(Rejected) as caught:
        store.apply(altered, KEY)
    assert caught.value.error_class == "signature"
    with pytest.raises(Rejected) as caught:
        store.apply(version_record(global_document(4), ts=ONE_MINUTE_LATER, key=b"mallory"), KEY)
    assert caught.value.error_class == "signature"
    older = version_record(global_document(2), ts=ONE_MINUTE_LATER)
    with pytest.raises(Rejected, match="not greater than the active version 3") as caught:
        store.apply(older, KEY)
    assert caught.value.error_class == "policy"
    replayed = version_record(global_document(3), ts=ONE_MINUTE_LATER, event_id="again")
    with pytest.raises(Rejected, match="already seen"):
        store.apply(replayed, KEY)
    assert store.snapshot("global").active == 3  # type: ignore[union-attr]


def test_an_invalid_document_or_a_mismatched_version_is_a_policy_rejection() -> None:
    store = PolicyStore()
    broken = global_document(1)
    broken["rules"][0]["when"] = "__import__('os')"
    with pytest.raises(Rejected, match="rule 'malware'") as caught:
        store.apply(version_record(broken), KEY)
    assert caught.value.error_class == "policy"
    mismatched = version_record(global_document(1), event_id="m")
    mismatched["version"] = 2
    mismatched["signature"] = sign(mismatched, KEY)
    with pytest.raises(Rejected, match="record says global v2 but its document says"):
        store.apply(mismatched, KEY)
    assert store.snapshot("global") is None


def test_a_document_publishing_media_before_its_gate_is_refused_and_the_active_stays() -> None:
    """Issue 27, point 9: the job's store refuses it as `policy validate` does, by field."""
    store = store_with(version_record(global_document(1)))
    exposed = global_document(2)
    exposed["detectors"]["image"]["scanning"] = {
        "high_risk": "PENDING",
        "default": "PROVISIONAL_ALLOW",
    }
    with pytest.raises(
        Rejected, match=r"detectors\.image\.scanning\.default: PROVISIONAL_ALLOW"
    ) as caught:
        store.apply(version_record(exposed, ts=T0 + 1), KEY)
    assert caught.value.error_class == "policy"
    assert "public before its integrity gate (media_check)" in str(caught.value)
    snapshot = store.snapshot("global")
    assert snapshot is not None and snapshot.active == 1


def test_schema_errors_and_missing_key() -> None:
    store = PolicyStore()
    with pytest.raises(SchemaError):
        store.apply(b"{not json", KEY)
    with pytest.raises(Rejected) as caught:
        store.apply(version_record(global_document(1)), None)
    assert caught.value.error_class == "signature"


def test_duplicate_event_id_changes_nothing() -> None:
    record = version_record(global_document(1))
    store = store_with(record)
    assert store.apply(record, KEY) is False
    assert len(store.records("global")) == 1


def test_a_version_applies_from_its_ts_on_whatever_the_arrival_order() -> None:
    v1 = version_record(global_document(1), ts=T0)
    v2 = version_record(global_document(2), ts=T0 + 1000)
    store = store_with(v1, v2)
    assert store.resolve("global", T0 - 1, "c").decide is None
    assert store.resolve("global", T0, "c").decide.version == 1  # type: ignore[union-attr]
    assert store.resolve("global", T0 + 999, "c").decide.version == 1  # type: ignore[union-attr]
    assert store.resolve("global", T0 + 1000, "c").decide.version == 2  # type: ignore[union-attr]
    pause = control("pause_publication", ts=T0 + 500)
    store.apply(pause, KEY)  # arrives late, applies from its own ts
    assert not store.resolve("global", T0 + 499, "c").paused
    assert store.resolve("global", T0 + 500, "c").paused
    assert store.resolve("global", T0 + 1000, "c").paused  # v2 does not end the pause
    store.apply(control("resume_publication", ts=T0 + 2000), KEY)
    assert not store.resolve("global", T0 + 2000, "c").paused


def test_rollback_to_an_older_seen_version_only() -> None:
    store = store_with(
        version_record(global_document(1), ts=T0), version_record(global_document(2), ts=T0 + 10)
    )
    with pytest.raises(Rejected, match="never seen") as caught:
        store.apply(control("rollback", version=7, ts=T0 + 20), KEY)
    assert caught.value.error_class == "policy"
    with pytest.raises(Rejected, match="not older than active 2"):
        store.apply(control("rollback", version=2, ts=T0 + 20), KEY)
    store.apply(control("rollback", version=1, ts=T0 + 20), KEY)
    assert store.resolve("global", T0 + 20, "c").decide.version == 1  # type: ignore[union-attr]
    assert store.resolve("global", T0 + 19, "c").decide.version == 2  # type: ignore[union-attr]
    # After a rollback a new version must still be greater than the active one and unseen.
    store.apply(version_record(global_document(3), ts=T0 + 30), KEY)
    assert store.snapshot("global").active == 3  # type: ignore[union-attr]


def test_shadow_and_canary_candidates() -> None:
    store = store_with(
        version_record(global_document(1), ts=T0),
        version_record(global_document(2), ts=T0 + 10, mode="shadow"),
        version_record(global_document(3), ts=T0 + 20, mode="canary", canary_percent=30.0),
    )
    decided = {
        cid: store.resolve("global", T0 + 20, cid) for cid in (f"content-{i}" for i in range(2000))
    }
    in_canary = [cid for cid, r in decided.items() if r.decide.version == 3]  # type: ignore[union-attr]
    assert 0.25 < len(in_canary) / len(decided) < 0.35
    for cid, resolution in decided.items():
        shadow_versions = sorted(p.version for p in resolution.shadows)
        if cid in in_canary:
            assert shadow_versions == [2]
            assert canary_bucket(cid) < 3000
        else:
            assert resolution.decide.version == 1  # type: ignore[union-attr]
            assert shadow_versions == [2, 3]
    # The same content id always lands in the same bucket.
    assert canary_bucket("content-1") == canary_bucket("content-1")
    # Promoting a newer version to active retires the candidates it supersedes.
    store.apply(version_record(global_document(4), ts=T0 + 30), KEY)
    final = store.resolve("global", T0 + 30, "content-1")
    assert (final.decide.version, final.shadows) == (4, ())  # type: ignore[union-attr]


def test_a_shadow_or_canary_candidate_is_promoted_with_its_own_document_only() -> None:
    candidate = global_document(2, default="PENDING")
    store = store_with(
        version_record(global_document(1), ts=T0),
        version_record(candidate, ts=T0 + 10, mode="shadow"),
    )
    # Another document under the candidate's number is not a promotion.
    with pytest.raises(Rejected, match="v2 was already seen") as caught:
        store.apply(version_record(global_document(2), ts=T0 + 20, event_id="other"), KEY)
    assert caught.value.error_class == "policy"
    # Without an approval the promotion is refused like any activation.
    with pytest.raises(Rejected, match="no approval"):
        store.apply(version_record(candidate, ts=T0 + 20, event_id="u", approvals=[]), KEY)
    gated = promotion(candidate, by="bob", role="approver", from_mode="shadow", reason=None)
    promoted = version_record(candidate, ts=T0 + 20, event_id="promote", promotion=gated)
    assert store.apply(promoted, KEY) is True
    assert store.snapshot("global") == Snapshot(ts=T0 + 20, active=2)
    assert store.resolve("global", T0 + 15, "c").decide.version == 1  # type: ignore[union-attr]
    assert store.resolve("global", T0 + 20, "c").decide.version == 2  # type: ignore[union-attr]
    assert store.records("global")[-1]["promotion"] == gated
    # Once active, the version is never activated again (after a rollback: a new number).
    store.apply(control("rollback", version=1, ts=T0 + 30), KEY)
    with pytest.raises(Rejected, match="v2 was already seen"):
        store.apply(version_record(candidate, ts=T0 + 40, event_id="again"), KEY)
    # A canary is promoted the same way; the job's broadcast state keeps both records.
    canary = global_document(3, default="PENDING")
    store.apply(version_record(canary, ts=T0 + 50, mode="canary", canary_percent=5.0), KEY)
    store.apply(version_record(canary, ts=T0 + 60, event_id="promote-3"), KEY)
    copy = PolicyStore.from_records(json.loads(json.dumps(store.to_records())))
    assert copy.snapshot("global") == store.snapshot("global") == Snapshot(ts=T0 + 60, active=3)


def test_broadcast_state_round_trip() -> None:
    store = store_with(
        version_record(global_document(1), ts=T0),
        version_record(global_document(2), ts=T0 + 10, mode="shadow"),
        control("pause_publication", ts=T0 + 5),
    )
    copy = PolicyStore.from_records(json.loads(json.dumps(store.to_records())))
    for ts in (T0, T0 + 5, T0 + 10):
        assert copy.snapshot("global", ts) == store.snapshot("global", ts)
    assert copy.apply(version_record(global_document(1), ts=T0), KEY) is False  # seen event id


def test_installed_policy_needs_no_signature() -> None:
    store = PolicyStore()
    store.install(global_document(5), ts=0)
    assert store.resolve("global", T0, "c").decide.version == 5  # type: ignore[union-attr]


def test_rejections_become_dlq_records_of_their_class() -> None:
    raw = json.dumps(version_record(global_document(1), key=b"wrong"))
    try:
        PolicyStore().apply(raw, KEY)
    except Rejected as error:
        letter = dead_letter_for(raw, error, ts=T0, key="global")
    assert letter.error_class == "signature"
    assert letter.source_topic == "policy.rules"
    assert letter.key == "global"
    assert len(letter.raw.encode()) <= 4096


# Two people publish a policy: the store checks an active version's approval itself.
def _rejection(store: PolicyStore, record: dict[str, Any]) -> Rejected:
    with pytest.raises(Rejected) as caught:
        store.apply(record, KEY)
    return caught.value


def test_an_active_version_needs_an_approval_by_someone_other_than_its_author() -> None:
    store = PolicyStore(TEST_KEYRING)
    document = global_document(2)
    unapproved = version_record(document, approvals=[])
    refused = _rejection(store, unapproved)
    assert refused.error_class == "policy"
    assert "has no approval (field approvals)" in str(refused)
    assert store.snapshot("global") is None  # nothing changed
    by_the_author = version_record(document, approvals=[approval(document, "alice")])
    assert _rejection(store, by_the_author).error_class == "policy"
    of_another_document = approval(global_document(2, default="BLOCK"))
    assert _rejection(store, version_record(document, approvals=[of_another_document]))
    forged = approval(document, "carol")
    forged["signature"] = sign(forged, b"not-carols-key")
    assert _rejection(store, version_record(document, approvals=[forged]))
    not_a_list = version_record(document, approvals={"approver": "bob"})
    assert _rejection(store, not_a_list).error_class == "policy"
    assert store.apply(version_record(document), KEY)  # bob approved, alice authored
    assert store.snapshot("global").active == 2  # type: ignore[union-attr]


def test_shadow_and_canary_need_no_approval_and_a_deployment_may_turn_it_off() -> None:
    store = PolicyStore(TEST_KEYRING)
    assert store.apply(version_record(global_document(2), mode="shadow", approvals=[]), KEY)
    canary = version_record(
        global_document(3), mode="canary", canary_percent=5.0, approvals=[], ts=T0 + 1
    )
    assert store.apply(canary, KEY)
    lenient = PolicyStore(Keyring(require_approval=False))
    assert lenient.apply(version_record(global_document(2), approvals=[]), KEY)


def test_without_a_keyring_no_active_push_is_accepted_but_the_trusted_file_still_is() -> None:
    store = PolicyStore()
    assert _rejection(store, version_record(global_document(2))).error_class == "signature"
    assert store.install(global_document(1)).version == 1  # replay's --policy path
    assert store.snapshot("global").active == 1  # type: ignore[union-attr]


def test_a_rebuilt_store_keeps_checking_approvals() -> None:
    store = store_with(version_record(global_document(2)))
    rebuilt = PolicyStore.from_records(store.to_records(), keyring=TEST_KEYRING)
    assert rebuilt.snapshot("global").active == 2  # type: ignore[union-attr]
    later = version_record(global_document(3), ts=ONE_MINUTE_LATER, approvals=[])
    assert _rejection(rebuilt, later).error_class == "policy"
    assert rebuilt.apply(version_record(global_document(3), ts=ONE_MINUTE_LATER), KEY)


def _resolved(store: PolicyStore, ts: int, content_id: str) -> tuple[Any, ...]:
    resolution = store.resolve("global", ts, content_id)
    decide = resolution.decide.version if resolution.decide is not None else None
    return decide, tuple(p.version for p in resolution.shadows), resolution.paused


@settings(deadline=None, max_examples=100)
@given(
    steps=st.lists(
        st.one_of(
            st.tuples(
                st.just("record"),
                st.integers(0, 60),
                st.sampled_from(["active", "shadow", "canary", "pause", "resume"]),
            ),
            st.tuples(st.just("ask"), st.integers(-10, 80), st.sampled_from(["c-1", "c-2", "c-3"])),
        ),
        max_size=30,
    )
)
def test_a_resolution_kept_between_calls_is_what_a_store_built_anew_resolves(
    steps: list[tuple[Any, ...]],
) -> None:
    """`resolve` keeps its last answer for the event times it holds for: asked at any time,
    before or after any record, it answers as a store that never kept one."""
    store = PolicyStore(TEST_KEYRING)
    accepted: list[dict[str, Any]] = []
    version = 1
    for kind, at, what in steps:
        if kind == "record":
            if what in ("pause", "resume"):
                command = "pause_publication" if what == "pause" else "resume_publication"
                record = control(command, ts=T0 + at)
            else:
                percent = {"canary_percent": 50.0} if what == "canary" else {}
                mode = "active" if what == "active" else what
                record = version_record(global_document(version), ts=T0 + at, mode=mode, **percent)
            try:
                store.apply(record, KEY)
            except Rejected:
                continue
            accepted.append(record)
            version += 1
            continue
        anew = store_with(*accepted)
        assert _resolved(store, T0 + at, what) == _resolved(anew, T0 + at, what)
