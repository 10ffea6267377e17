"""dead_letter: one function turns any rejected input into a valid, sanitized DLQ record that
keeps no content text."""

from __future__ import annotations

import hashlib
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from modstream.contract import SchemaError, dead_letter, parse
from modstream.contract.dlq import (
    CONTENT_FIELDS,
    MESSAGE_LIMIT_CHARS,
    RAW_LIMIT_BYTES,
    REDACTED_MARKER,
    WORKFLOW_VERSION,
    DlqRecord,
    cap_utf8,
)
from modstream.testing.records import SECRET_TEXT, T0, evidence, upload


def rejected(raw: str | bytes, topic: str = "content.versions") -> SchemaError:
    with pytest.raises(SchemaError) as caught:
        parse(topic, raw)
    return caught.value


def ref(text: str) -> str:
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


def test_dlq_record_names_topic_key_class_and_field() -> None:
    raw = json.dumps(evidence(status="smell"))
    letter = dead_letter("detector.results", "c-1", raw, rejected(raw, "detector.results"), ts=T0)
    assert letter.source_topic == "detector.results"
    assert letter.key == "c-1"
    assert letter.error_class == "schema"
    assert "status" in letter.message
    assert letter.attempts == 1
    assert letter.workflow_version == WORKFLOW_VERSION
    assert letter.raw == raw  # no content field: kept as received
    assert letter.ts == T0


def test_content_text_and_media_ref_are_kept_only_as_their_sha256() -> None:
    record = upload(content_version="one", media_ref="/media/SECRET-photo.jpg")
    raw = json.dumps(record)
    letter = dead_letter("content.versions", None, raw, rejected(raw), ts=T0)
    assert SECRET_TEXT not in letter.message and SECRET_TEXT not in letter.raw
    assert "SECRET-photo" not in letter.raw
    kept = json.loads(letter.raw)
    assert kept["text"] == ref(SECRET_TEXT)
    assert kept["media_ref"] == ref("/media/SECRET-photo.jpg")
    assert kept[REDACTED_MARKER] == ["media_ref", "text"]
    # Everything else is kept for diagnosis, and the message says what was replaced.
    assert {k: v for k, v in kept.items() if k not in ("text", "media_ref", REDACTED_MARKER)} == {
        k: v for k, v in record.items() if k not in ("text", "media_ref")
    }
    assert "media_ref, text kept as sha256" in letter.message


def test_content_fields_are_hashed_at_any_depth_and_whatever_their_type() -> None:
    raw = json.dumps(
        {
            "content_id": "c-1",
            "caption": SECRET_TEXT,
            "extra": [{"title": SECRET_TEXT}, {"body": {"deep": SECRET_TEXT}}],
            "description": ["a", SECRET_TEXT],
        }
    )
    letter = dead_letter("content.versions", "c-1", raw, "bad", ts=T0)
    assert SECRET_TEXT not in letter.raw
    kept = json.loads(letter.raw)
    assert kept["content_id"] == "c-1"
    assert kept["extra"][0]["title"] == ref(SECRET_TEXT)
    assert kept["extra"][1]["body"].startswith("sha256:")
    assert kept[REDACTED_MARKER] == ["body", "caption", "description", "title"]


def test_a_duplicated_content_field_keeps_neither_value() -> None:
    raw = '{"content_id":"c-1","text":"' + SECRET_TEXT + '","t\\u0065xt":"decoy"}'
    letter = dead_letter("content.versions", "c-1", raw, rejected(raw), ts=T0)
    assert SECRET_TEXT not in letter.raw and "decoy" not in letter.raw


def test_a_reviewers_free_text_reason_is_hashed_but_a_report_reason_code_is_kept() -> None:
    decision = {"event_id": "e", "task_id": "t", "reason": "the author is SECRET-PERSON"}
    letter = dead_letter("p.review.decisions", "c-1", json.dumps(decision), "bad", ts=T0)
    assert "SECRET-PERSON" not in letter.raw
    assert json.loads(letter.raw)["reason"] == ref(decision["reason"])
    report = {"event_id": "e", "reason": "spam"}
    kept = dead_letter("moderation.reports", "c-1", json.dumps(report), "bad", ts=T0)
    assert kept.raw == json.dumps(report)


@pytest.mark.parametrize(
    "raw",
    [
        "{broken " + SECRET_TEXT,
        json.dumps(SECRET_TEXT),  # valid JSON, not an object
        json.dumps([{"note": SECRET_TEXT}]),
        "[" * 50_000 + "]" * 50_000,
        '{"a":' * 40 + json.dumps(SECRET_TEXT) + "}" * 40,  # deeper than the depth limit
        (json.dumps({"note": SECRET_TEXT})[:-1] + ',"n":' + "9" * 5000 + "}"),
        b"\xff\xfe" + SECRET_TEXT.encode(),
    ],
)
def test_input_that_is_not_a_json_object_is_kept_only_as_its_digest(raw: str | bytes) -> None:
    letter = dead_letter("content.versions", None, raw, "not a record", ts=0)
    data = raw if isinstance(raw, bytes) else raw.encode("utf-8")
    assert letter.raw == "sha256:" + hashlib.sha256(data).hexdigest()
    assert f"raw kept as its sha256 only ({len(data)} bytes)" in letter.message
    assert SECRET_TEXT not in letter.message


def test_a_record_over_the_size_limit_is_kept_only_as_its_digest() -> None:
    raw = json.dumps(upload(mime_type="x" * 2_000_000))
    letter = dead_letter("content.versions", None, raw, "too big", ts=0)
    assert letter.raw.startswith("sha256:") and len(letter.raw) == 71


def test_raw_is_capped_at_4_kib_on_a_character_boundary() -> None:
    raw = json.dumps(upload(text="é" * 10_000, surface="é" * 5_000, modality="smell"))
    letter = dead_letter("content.versions", None, raw, rejected(raw), ts=T0)
    assert len(letter.raw.encode("utf-8")) <= RAW_LIMIT_BYTES
    assert "é" * 100 in letter.raw
    assert "raw cut from" in letter.message


def test_the_message_keeps_its_notes_when_the_description_is_long() -> None:
    raw = json.dumps(upload(modality="smell"))
    letter = dead_letter("content.versions", None, raw, "x" * 5_000, ts=T0)
    assert len(letter.message) <= MESSAGE_LIMIT_CHARS
    assert letter.message.endswith("(text kept as sha256)")


def test_an_unexpected_exception_is_described_by_its_type_only() -> None:
    letter = dead_letter("x", None, "{}", KeyError(SECRET_TEXT), ts=0, error_class="permanent")
    assert SECRET_TEXT not in letter.message
    assert "unexpected KeyError" in letter.message


def test_bytes_that_are_not_utf8_still_make_a_record() -> None:
    letter = dead_letter("content.versions", None, b"\xff\xfe{", "not UTF-8", ts=0)
    assert letter.raw == "sha256:" + hashlib.sha256(b"\xff\xfe{").hexdigest()


def test_the_record_round_trips_through_its_own_schema() -> None:
    raw = "{broken"
    letter = dead_letter("content.versions", None, raw, rejected(raw), ts=5)
    assert parse("moderation.dlq", letter.model_dump_json()) == letter


def test_the_content_field_list_covers_the_brief() -> None:
    assert {"text", "caption", "media_ref"} <= CONTENT_FIELDS


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


@given(
    fields=st.dictionaries(
        st.sampled_from(sorted(CONTENT_FIELDS)) | st.text(max_size=8),
        st.text(max_size=50) | st.integers() | st.none(),
        max_size=8,
    ),
    secret=st.text(min_size=12, max_size=40),
)
def test_no_content_value_survives_in_raw(fields: dict[str, object], secret: str) -> None:
    record = {**fields, "text": secret, "content_id": "c-1"}
    letter = dead_letter("content.versions", "c-1", json.dumps(record), "bad", ts=T0)
    assert DlqRecord.model_validate_json(letter.model_dump_json()) == letter
    kept = json.loads(letter.raw)
    for name in CONTENT_FIELDS & set(record):
        assert kept[name].startswith("sha256:")
    assert (
        kept["text"]
        == "sha256:" + hashlib.sha256(secret.encode("utf-8", "surrogatepass")).hexdigest()
    )


def test_a_redacted_or_digest_only_raw_says_it_is_not_replayable() -> None:
    from modstream.contract.dlq import is_redacted

    hashed = dead_letter("content.versions", None, json.dumps(upload()), "bad", ts=T0)
    digest = dead_letter("content.versions", None, "{broken", "bad", ts=T0)
    kept = dead_letter("detector.results", None, json.dumps(evidence()), "bad", ts=T0)
    assert is_redacted(hashed.raw) and is_redacted(digest.raw)
    assert not is_redacted(kept.raw) and not is_redacted("")


@pytest.mark.parametrize(
    ("source_topic", "error_class", "job", "owner"),
    [
        ("p.detector.results", "signature", "moderation", "security"),  # class before topic
        ("p.policy.rules", "signature", "policy_store", "security"),
        ("p.policy.rules", "schema", "policy_store", "policy-authors"),  # topic before job
        ("content.versions", "policy", "moderation", "policy-authors"),
        ("p.review.decisions", "stale", "moderation", "review-ops"),
        ("p.review.leases", "conflict", "moderation", "review-ops"),
        ("moderation.appeals", "stale", "moderation", "review-ops"),
        ("p.hash.bank", "schema", "moderation", "hash-banks"),
        ("p.moderation.actions", "transient_exhausted", "enforce", "enforcement"),
        ("p.content.visibility", "schema", "reconciler", "enforcement"),
        ("p.scan.requests.image", "permanent", "scan", "detection"),
        ("p.content.versions", "schema", "ingest_check", "ingest"),
        ("p.detector.results", "schema", "moderation", "moderation"),
        ("p.moderation.timers", "permanent", "moderation", "moderation"),
        ("p.detector.results", "stale", "dlq-replay", "platform"),  # no rule: the default
        ("p.xhash.bank", "schema", "moderation", "moderation"),  # a suffix, not a topic
    ],
)
def test_every_record_has_the_owner_the_one_map_gives(
    source_topic: str, error_class: str, job: str, owner: str
) -> None:
    from modstream.contract.dlq import owner_of

    assert owner_of(source_topic, error_class, job) == owner
    letter = dead_letter(
        source_topic, "c-1", "{}", "bad", ts=T0, error_class=error_class, operator=job
    )  # type: ignore[arg-type]
    assert (letter.owner, letter.job, letter.history) == (owner, job, [])


def test_a_record_written_before_owners_reads_with_its_derived_owner() -> None:
    letter = dead_letter("p.review.decisions", "c-1", "{}", "bad", ts=T0, error_class="stale")
    before = json.loads(letter.model_dump_json())
    for field in ("owner", "job", "history"):
        del before[field]
    read = DlqRecord.model_validate_json(json.dumps(before))
    assert (read.owner, read.job, read.history) == ("review-ops", "unknown", [])
    with pytest.raises(ValueError):  # a written owner must be one of the teams
        DlqRecord.model_validate_json(json.dumps({**before, "owner": "nobody", "job": "x"}))


def test_history_is_bounded_to_the_newest_attempts() -> None:
    from modstream.contract.dlq import HISTORY_LIMIT, with_attempt

    first = dead_letter("detector.results", "c-1", "{}", "first", ts=T0)
    history = []
    for number in range(HISTORY_LIMIT + 3):
        earlier = first.attempt().model_copy(update={"message": f"attempt {number}"})
        history = with_attempt(history, earlier)
    assert len(history) == HISTORY_LIMIT
    assert history[-1].message == f"attempt {HISTORY_LIMIT + 2}"
    letter = dead_letter("detector.results", "c-1", "{}", "again", ts=T0, history=history)
    assert DlqRecord.model_validate_json(letter.model_dump_json()).history == history
    too_long = json.loads(letter.model_dump_json())
    too_long["history"].append(too_long["history"][0])
    with pytest.raises(ValueError):
        DlqRecord.model_validate_json(json.dumps(too_long))


def test_every_dead_letter_in_shipped_code_names_a_job_the_owner_map_knows() -> None:
    """A producer that left `operator` out would file its records under `ingest`."""
    import ast
    from pathlib import Path

    from modstream.contract.dlq import OWNER_BY_JOB

    root = Path(__file__).resolve().parents[2]
    jobs: dict[str, str] = {}
    for package in ("modstream",):
        for path in sorted((root / package).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "dead_letter":
                    named = {k.arg: k.value for k in node.keywords}
                    job = named.get("operator")
                    where = f"{path.relative_to(root)}:{node.lineno}"
                    assert isinstance(job, ast.Constant), where
                    jobs[where] = job.value
    assert len(jobs) >= 10  # every producer of the tree, found
    assert set(jobs.values()) <= {*OWNER_BY_JOB, "dlq-replay"}, jobs
