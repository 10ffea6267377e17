"""The contract's input records: what validates, and what is rejected with which field."""

from __future__ import annotations

import contextlib
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from modstream.contract import SchemaError, parse
from modstream.contract.common import MAX_RECORD_BYTES
from modstream.contract.content import ContentDelete, ContentUpsert
from modstream.contract.policy import PolicyControl, PolicyVersion
from modstream.testing.records import T0, delete, evidence, upload, without

SIG = "hmac-sha256:" + "0" * 64


def policy_version(**overrides: Any) -> dict[str, Any]:
    record: dict[str, Any] = {
        "event_id": "pol-1",
        "policy_id": "global",
        "version": 3,
        "parent_version": 2,
        "mode": "active",
        "author": "alice",
        "ts": T0,
        "signature": SIG,
        "document": {
            "policy_id": "global",
            "version": 3,
            "detectors": {},
            "rules": [],
            "default": "ALLOW",
        },
    }
    record.update(overrides)
    return record


VALID: list[tuple[str, dict[str, Any]]] = [
    ("content.versions", upload()),
    ("content.versions", upload(phash="0123456789abcdef", segments=4, media_ref="file:///x")),
    ("content.versions", upload(account_risk=1)),  # an integer is a number
    ("content.versions", delete()),
    ("detector.results", evidence()),
    ("detector.results", evidence(status="timeout", scores=None)),
    ("detector.results", evidence(segment_id=3, evidence_ref="s3://e/1")),
    ("policy.rules", policy_version()),
    ("policy.rules", policy_version(mode="canary", canary_percent=5)),
    (
        "policy.rules",
        {
            "event_id": "c1",
            "policy_id": "global",
            "command": "rollback",
            "version": 2,
            "ts": T0,
            "signature": SIG,
        },
    ),
    (
        "policy.rules",
        {
            "event_id": "c2",
            "policy_id": "global",
            "command": "pause_publication",
            "ts": T0,
            "signature": SIG,
        },
    ),
    (
        "hash.bank",
        {
            "event_id": "h1",
            "bank": "known_bad",
            "hash_type": "phash",
            "hash": "00ff00ff00ff00ff",
            "op": "add",
            "ts": T0,
        },
    ),
    (
        "moderation.reports",
        {
            "event_id": "r1",
            "report_id": "r1",
            "content_id": "c-1",
            "content_version": 1,
            "reporter_id": "u9",
            "reason": "spam",
            "ts": T0,
        },
    ),
    (
        "review.decisions",
        {
            "event_id": "v1",
            "task_id": "t1",
            "content_id": "c-1",
            "content_version": 1,
            "reviewer_id": "rev",
            "outcome": "BLOCK",
            "reason": "sexual_content",
            "ts": T0,
        },
    ),
    (
        "moderation.appeals",
        {
            "event_id": "a1",
            "appeal_id": "a1",
            "content_id": "c-1",
            "content_version": 1,
            "decision_revision": 2,
            "user_id": "author-1",
            "ts": T0,
        },
    ),
    (
        "moderation.reevaluate",
        {
            "event_id": "x1",
            "content_id": "c-1",
            "content_version": 1,
            "reason": "policy v4",
            "ts": T0,
        },
    ),
]


@pytest.mark.parametrize(("topic", "record"), VALID)
def test_valid_records_parse(topic: str, record: dict[str, Any]) -> None:
    parsed = parse(topic, json.dumps(record))
    assert parsed.event_id == record["event_id"]  # type: ignore[attr-defined]


def test_upsert_and_delete_are_told_apart_and_defaults_filled() -> None:
    assert isinstance(parse("content.versions", json.dumps(upload())), ContentUpsert)
    assert isinstance(parse("content.versions", json.dumps(delete())), ContentDelete)
    assert parse("content.versions", json.dumps(upload())).segments == 1  # type: ignore[attr-defined]


def test_policy_versions_and_controls_are_told_apart() -> None:
    assert isinstance(parse("policy.rules", json.dumps(policy_version())), PolicyVersion)
    control = {
        "event_id": "c",
        "policy_id": "p",
        "command": "resume_publication",
        "ts": T0,
        "signature": SIG,
    }
    assert isinstance(parse("policy.rules", json.dumps(control)), PolicyControl)


def test_unknown_fields_are_ignored() -> None:
    parsed = parse("content.versions", json.dumps(upload(extra_field={"nested": [1, 2]})))
    assert "extra_field" not in parsed.model_dump()


INVALID: list[tuple[str, str, str]] = [
    # (topic, raw JSON, a field name or phrase the error must name)
    ("content.versions", json.dumps(without(upload(), "author_id")), "author_id"),
    ("content.versions", json.dumps(without(upload(), "ts")), "ts"),
    ("content.versions", json.dumps(without(delete(), "content_id")), "content_id"),
    ("content.versions", json.dumps(upload(content_version="1")), "content_version"),
    ("content.versions", json.dumps(upload(content_version=0)), "content_version"),
    ("content.versions", json.dumps(upload(content_version=1.5)), "content_version"),
    ("content.versions", json.dumps(upload(account_risk=True)), "account_risk"),
    ("content.versions", json.dumps(upload(account_risk=1.5)), "account_risk"),
    ("content.versions", json.dumps(upload(modality="smell")), "modality"),
    ("content.versions", json.dumps(upload(audience="everyone")), "audience"),
    ("content.versions", json.dumps(upload(type="patch")), "type"),
    ("content.versions", json.dumps(upload(region="Germany")), "region"),
    ("content.versions", json.dumps(upload(sha256="xyz")), "sha256"),
    ("content.versions", json.dumps(upload(phash="123")), "phash"),
    ("content.versions", json.dumps(upload(segments=0)), "segments"),
    ("content.versions", json.dumps(upload(content_id="c" * 300)), "content_id"),
    ("content.versions", "{not json", "Invalid JSON"),
    ("content.versions", "", "Invalid JSON"),
    ("content.versions", "[1, 2, 3]", "<record>"),
    ("content.versions", json.dumps(upload(text="x" * MAX_RECORD_BYTES)), "byte"),
    ("detector.results", json.dumps(evidence(scores=None)), "scores"),
    ("detector.results", json.dumps(evidence(scores={"nsfw": 1.2})), "scores"),
    ("detector.results", json.dumps(evidence(status="maybe")), "status"),
    ("policy.rules", json.dumps(policy_version(signature="md5:abc")), "signature"),
    ("policy.rules", json.dumps(policy_version(mode="canary")), "canary_percent"),
    (
        "policy.rules",
        json.dumps(
            {"event_id": "c", "policy_id": "p", "command": "rollback", "ts": T0, "signature": SIG}
        ),
        "version",
    ),
    (
        "hash.bank",
        json.dumps(
            {
                "event_id": "h",
                "bank": "b",
                "hash_type": "sha256",
                "hash": "00ff00ff00ff00ff",
                "op": "add",
                "ts": T0,
            }
        ),
        "hash",
    ),
    (
        "review.decisions",
        json.dumps(
            {
                "event_id": "v",
                "task_id": "t",
                "content_id": "c",
                "content_version": 1,
                "reviewer_id": "r",
                "outcome": "MAYBE",
                "reason": "x",
                "ts": T0,
            }
        ),
        "outcome",
    ),
]


@pytest.mark.parametrize(("topic", "raw", "names"), INVALID)
def test_invalid_records_are_rejected_naming_the_field(topic: str, raw: str, names: str) -> None:
    with pytest.raises(SchemaError) as caught:
        parse(topic, raw)
    assert names in str(caught.value)


def test_error_messages_never_repeat_content_text() -> None:
    secret = "SECRET-Ω-text"
    for raw in [
        json.dumps(upload(text=secret, modality=secret)),
        json.dumps(upload(text=secret, type=secret)),
        json.dumps(upload(text=secret, region=secret)),
        json.dumps(upload(text=secret * 20_000)),
    ]:
        with pytest.raises(SchemaError) as caught:
            parse("content.versions", raw)
        assert secret not in str(caught.value)


def test_unknown_topic_is_a_schema_error() -> None:
    with pytest.raises(SchemaError, match="no schema"):
        parse("no.such.topic", "{}")


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children, max_size=6)
    ),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(
    topic=st.sampled_from(sorted({topic for topic, _ in VALID})),
    mutation=st.dictionaries(
        st.sampled_from(
            [
                "type",
                "content_version",
                "ts",
                "modality",
                "status",
                "scores",
                "command",
                "segments",
                "hash",
                "outcome",
                "event_id",
            ]
        ),
        json_values,
        max_size=3,
    ),
)
def test_any_mutation_either_parses_or_raises_schema_error(
    topic: str, mutation: dict[str, Any]
) -> None:
    base = next(record for name, record in VALID if name == topic)
    with contextlib.suppress(SchemaError):
        parse(topic, json.dumps({**base, **mutation}))
