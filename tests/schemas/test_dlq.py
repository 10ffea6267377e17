"""dead_letter: one function turns any rejected input into a valid, sanitized DLQ record."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from schemas import SchemaError, dead_letter, parse
from schemas.dlq import RAW_LIMIT_BYTES, WORKFLOW_VERSION, DlqRecord, cap_utf8
from tests.conftest import SECRET_TEXT, T0, upload


def rejected(raw: str) -> SchemaError:
    with pytest.raises(SchemaError) as caught:
        parse("content.versions", raw)
    return caught.value


def test_dlq_record_names_topic_key_class_and_field() -> None:
    raw = json.dumps(upload(modality="smell"))
    letter = dead_letter("content.versions", "c-1", raw, rejected(raw), ts=T0)
    assert letter.source_topic == "content.versions"
    assert letter.key == "c-1"
    assert letter.error_class == "schema"
    assert "modality" in letter.message
    assert letter.attempts == 1
    assert letter.workflow_version == WORKFLOW_VERSION
    assert letter.raw == raw
    assert letter.ts == T0


def test_message_never_contains_content_text_but_raw_keeps_it() -> None:
    raw = json.dumps(upload(content_version="one"))
    letter = dead_letter("content.versions", None, raw, rejected(raw), ts=T0)
    assert SECRET_TEXT not in letter.message
    assert SECRET_TEXT in letter.raw


def test_raw_is_capped_at_4_kib_on_a_character_boundary() -> None:
    raw = json.dumps(upload(text="é" * 10_000, modality="smell"))
    letter = dead_letter("content.versions", None, raw, rejected(raw), ts=T0)
    assert len(letter.raw.encode("utf-8")) <= RAW_LIMIT_BYTES
    assert raw.startswith(letter.raw)
    assert "raw cut from" in letter.message


def test_bytes_that_are_not_utf8_still_make_a_record() -> None:
    letter = dead_letter("content.versions", None, b"\xff\xfe{", "not UTF-8", ts=0)
    assert letter.raw.startswith("\ufffd")


def test_the_record_round_trips_through_its_own_schema() -> None:
    raw = "{broken"
    letter = dead_letter("content.versions", None, raw, rejected(raw), ts=5)
    assert parse("moderation.dlq", letter.model_dump_json()) == letter


@given(text=st.text(max_size=6000), limit=st.integers(min_value=0, max_value=5000))
def test_cap_utf8_never_exceeds_the_limit_and_keeps_a_prefix(text: str, limit: int) -> None:
    capped, size = cap_utf8(text, limit)
    assert len(capped.encode("utf-8")) <= limit
    assert text.startswith(capped)
    assert size == len(text.encode("utf-8", errors="replace"))


@given(raw=st.binary(max_size=9000), key=st.none() | st.text(max_size=40))
def test_any_bytes_become_a_valid_dlq_record(raw: bytes, key: str | None) -> None:
    try:
        parse("content.versions", raw)
    except SchemaError as error:
        letter = dead_letter("content.versions", key, raw, error, ts=T0)
        assert DlqRecord.model_validate_json(letter.model_dump_json()) == letter
        assert len(letter.raw.encode("utf-8")) <= RAW_LIMIT_BYTES
