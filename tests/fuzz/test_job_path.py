"""Fuzzed records of every input topic through the moderation job's own adapters (decode,
broadcast, report gate, combine, moderate, sanctions; modstream/testing/fuzz/pipeline.py, no
JVM), delivered
as the Kafka source delivers them. A refused record gets exactly one DLQ row with its class and
a message that names a field and repeats no content, and nothing else; a valid one gets no DLQ
row and outputs that follow the contract; nothing crashes."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from modstream.contract import SchemaError, parse
from modstream.contract.common import MAX_APPEAL_ID_CHARS, MAX_ID_CHARS
from modstream.testing.fuzz.pipeline import Outcome, Pipeline, run_one
from modstream.testing.fuzz.strategies import (
    KINDS,
    MUTATIONS,
    Fuzzed,
    applicable,
    fuzzed,
    named_field,
    signed,
)
from modstream.testing.records import SECRET_TEXT, appeal_record, upload

JOB = settings(
    max_examples=20,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
# What a message may name besides a field: the signature check and the policy store name
# the producer, the key or the version they refused.
SIGNATURE_WORDS = ("signature", "signing", "signed")


def through_the_job(fuzz: Fuzzed) -> Outcome:
    outcome = run_one(fuzz.topic, fuzz.text, fuzz.record)
    if outcome.crashed is not None:
        raise outcome.crashed
    return outcome


def assert_handled(fuzz: Fuzzed, outcome: Outcome) -> None:
    expected = fuzz.expected_class
    if expected is None:
        assert outcome.letters == [], (fuzz.note, outcome.letters)
        for topic, _, value in outcome.outputs:
            parse(topic, json.dumps(value))
        return
    assert len(outcome.letters) == 1, (fuzz.note, outcome.error_classes)
    assert outcome.outputs == outcome.baseline  # nothing else changes
    letter = outcome.letters[0]
    parse("moderation.dlq", json.dumps(letter))
    assert letter["error_class"] == expected, (fuzz.note, letter["message"])
    message = letter["message"].split(" record: ", 1)[-1]
    names = named_field(message, KINDS[fuzz.kind]) or any(
        word in message for word in SIGNATURE_WORDS
    )
    assert names, (fuzz.note, letter["message"])
    for secret in fuzz.secrets:
        assert secret not in letter["message"], (fuzz.note, letter["message"])
    assert SECRET_TEXT not in letter["raw"], "DLQ raw keeps no content text"


@pytest.mark.parametrize("mutation", MUTATIONS)
@JOB
@given(data=st.data())
def test_every_class_is_handled_by_the_job(mutation: str, data: st.DataObject) -> None:
    kinds = [kind for kind in KINDS if applicable(kind, mutation)]
    fuzz = data.draw(st.one_of([fuzzed(kind, mutation) for kind in kinds]))
    assert_handled(fuzz, through_the_job(fuzz))


@settings(max_examples=40, deadline=None)
@given(fuzz=st.one_of([fuzzed(kind, "hostile_ids") for kind in ("report", "review", "detector")]))
def test_input_with_hostile_ids_reaches_its_own_version_only(fuzz: Fuzzed) -> None:
    pipeline = Pipeline()
    record = fuzz.record
    if fuzz.topic == "review.decisions":
        pipeline.grant(record["reviewer_id"])
    first = upload(
        record["content_id"],
        record["ts"],
        event_id="first",
        content_version=record["content_version"],
    )
    assert pipeline.prepare(json.dumps(first), record["content_id"], record["ts"]).letters == []
    outcome = pipeline.send(fuzz.topic, record["content_id"], fuzz.text, record["ts"])
    assert outcome.crashed is None and outcome.letters == []
    key = f"{record['content_id']}\x1f{record['content_version']}"
    # One version, one key: the report went through the reporter gate and the report
    # combiner (keyed `version\x1fshard`) and came back to exactly this version's state.
    stored = pipeline.moderate.function.packed.values
    assert set(stored) <= {key}
    assert all(value["content_id"] == record["content_id"] for _, _, value in outcome.outputs)


@pytest.mark.parametrize("field_name", ["content_id", "event_id", "author_id"])
def test_a_lone_surrogate_id_is_dead_lettered_with_a_key_the_jvm_can_carry(
    field_name: str,
) -> None:
    # `"content_id": "c\ud800"` is valid JSON, but no UTF-8 text can carry the character: a
    # DLQ row keyed by it failed on its way to the JVM and took the replay (and the job) down.
    text = json.dumps(upload()).replace(f'"{field_name}": "', f'"{field_name}": "\\ud800', 1)
    outcome = run_one("content.versions", text, upload())
    assert outcome.crashed is None, outcome.crashed
    assert [letter["error_class"] for letter in outcome.letters] == ["schema"]
    assert outcome.letters[0]["key"] == "c-1"  # the transport's key, not the record's


def test_the_longest_appeal_id_opens_its_task_and_one_longer_is_refused_at_admission() -> None:
    """Found by the fuzz suite: a 256-character appeal_id passed admission, then its task id
    `appeal-<appeal_id>` was too long for the contract and the moderate step refused it. The
    contract now bounds appeal_id so that its task id fits, and admission refuses a longer one."""
    longest = signed("appeal", appeal_record(appeal_id="a" * MAX_APPEAL_ID_CHARS))
    opened = run_one("moderation.appeals", json.dumps(longest), longest)
    assert opened.crashed is None and opened.letters == []
    tasks = [value for topic, _, value in opened.outputs if topic == "review.tasks"]
    assert [task["task_id"] for task in tasks] == [f"appeal-{'a' * MAX_APPEAL_ID_CHARS}"]
    assert len(tasks[0]["task_id"]) == MAX_ID_CHARS
    longer = signed("appeal", appeal_record(appeal_id="a" * (MAX_APPEAL_ID_CHARS + 1)))
    refused = run_one("moderation.appeals", json.dumps(longer), longer)
    assert refused.error_classes == ["schema"]
    assert "appeal_id" in refused.letters[0]["message"]
    with pytest.raises(SchemaError):  # the contract itself refuses it, before any state
        parse("moderation.appeals", json.dumps(longer))
    assert refused.outputs == refused.baseline
