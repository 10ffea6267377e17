"""Fuzzing `schemas.parse` on every input topic: it raises nothing but SchemaError, refuses every
mutated record with a message that names a field (or `<record>`) and never repeats content, and
valid records, however odd their ids or numbers, round-trip."""

from __future__ import annotations

import contextlib
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from modstream.contract import SchemaError, parse
from modstream.testing.fuzz.strategies import (
    KINDS,
    LIMITS,
    MUTATIONS,
    TOPICS,
    UNNAMED_FIELDS,
    VALID_CLASSES,
    Fuzzed,
    applicable,
    fuzzed,
    named_field,
)
from modstream.testing.records import SECRET_TEXT, upload

FUZZ = settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
# A union's tag comes first in pydantic's error location: `upsert.ts`, `control.command`.


def kinds_for(mutation: str) -> st.SearchStrategy[Fuzzed]:
    return st.one_of([fuzzed(kind, mutation) for kind in KINDS if applicable(kind, mutation)])


def assert_refused_safely(fuzz: Fuzzed) -> None:
    with pytest.raises(SchemaError) as refused:
        parse(fuzz.topic, fuzz.raw)
    message = str(refused.value)
    assert named_field(message, KINDS[fuzz.kind]), (fuzz.note, message)
    for secret in fuzz.secrets:
        assert secret not in message, (fuzz.note, message)
    assert refused.value.topic == fuzz.topic


def assert_round_trips(fuzz: Fuzzed) -> None:
    parsed = parse(fuzz.topic, fuzz.raw)
    again = parse(fuzz.topic, parsed.model_dump_json())
    assert again == parsed
    dumped = json.loads(parsed.model_dump_json())
    source = json.loads(fuzz.raw)
    for name in UNNAMED_FIELDS.get(fuzz.kind, frozenset()):
        source.pop(name, None)
    assert {name: dumped[name] for name in source} == source


@pytest.mark.parametrize("mutation", MUTATIONS)
@FUZZ
@given(data=st.data())
def test_parse_refuses_every_mutation_with_a_field_naming_message(
    mutation: str, data: st.DataObject
) -> None:
    fuzz = data.draw(kinds_for(mutation))
    if fuzz.parse_valid:
        assert_round_trips(fuzz)
    else:
        assert_refused_safely(fuzz)


def test_every_class_has_records_the_schema_refuses_or_accepts_as_documented() -> None:
    # The table in docs/RELIABILITY.md, "Fuzzing the inputs", depends on it: every class reaches
    # every topic it applies to, and only the valid classes and the in-range ts classes parse.
    assert set(TOPICS) == {kind.topic for kind in KINDS.values()}
    assert len(TOPICS) == 8
    assert set(VALID_CLASSES) < set(MUTATIONS)
    for mutation in MUTATIONS:
        assert any(applicable(kind, mutation) for kind in KINDS), mutation


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4)
    ),
    max_leaves=20,
)


@FUZZ
@given(topic=st.sampled_from(TOPICS), raw=st.binary(max_size=300) | st.text(max_size=300))
def test_arbitrary_bytes_and_text_raise_nothing_but_schema_error(
    topic: str, raw: bytes | str
) -> None:
    with contextlib.suppress(SchemaError):  # anything else fails the test
        parse(topic, raw)


@settings(max_examples=150, deadline=None)
@given(data=st.data(), kind=st.sampled_from(tuple(KINDS)))
def test_records_of_the_right_shape_with_any_values_raise_nothing_but_schema_error(
    data: st.DataObject, kind: str
) -> None:
    spec = KINDS[kind]
    record = {
        name: data.draw(JSON_VALUES, label=name)
        for name in spec.fields
        if data.draw(st.integers(0, 9), label=f"has {name}") > 0
    }
    try:
        parse(spec.topic, json.dumps(record))  # NaN and Infinity included
    except SchemaError as error:
        assert named_field(str(error), spec), str(error)


def _text(record: dict[str, Any]) -> str:
    return json.dumps(record)


# The issue's list, each one written out once, so a reader sees them without Hypothesis.
HOSTILE: list[tuple[str, str | bytes]] = [
    ("nested 100,000 deep", '{"event_id": "e", "scores": ' + "[" * 100_000 + "]" * 100_000 + "}"),
    ("100,000 open brackets", "[" * 100_000),
    ("50,000 nested objects", '{"a":' * 50_000 + "1" + "}" * 50_000),
    ("truncated", _text(upload())[:-1]),
    ("not UTF-8", _text(upload()).encode()[:40] + b"\xff" + _text(upload()).encode()[40:]),
    ("lone surrogate", _text(upload()).replace('"c-1"', '"c\\ud800"')),
    ("over the size limit", _text(upload(padding="x" * LIMITS.max_record_bytes))),
    ("bool for int", _text(upload(content_version=True))),
    ("string for int", _text(upload(size_bytes="52"))),
    ("NaN", _text(upload()).replace("0.2", "NaN")),
    ("Infinity", _text(upload()).replace("0.2", "Infinity")),
    ("1e999", _text(upload()).replace("0.2", "1e999")),
    ("version 0", _text(upload(content_version=0))),
    ("version -1", _text(upload(content_version=-1))),
    ("version 2^70", _text(upload(content_version=2**70))),
    ("ts beyond a signed long", _text(upload(at=2**63))),
    ("ts negative", _text(upload(at=-1))),
    ("duplicated ts", _text(upload())[:-1] + ', "ts": 4102444800000}'),
    ("duplicated nested name", _text(upload(extra={"a": 1}))[:-2] + ', "a": 2}}'),
    ("unknown enum", _text(upload(modality="hologram"))),
    ("Cyrillic enum", _text(upload(modality="tеxt"))),  # Cyrillic e
]


@pytest.mark.parametrize(("name", "raw"), HOSTILE, ids=[name for name, _ in HOSTILE])
def test_the_issues_hostile_records_are_refused_as_schema_errors(
    name: str, raw: str | bytes
) -> None:
    with pytest.raises(SchemaError) as refused:
        parse("content.versions", raw)
    assert SECRET_TEXT not in str(refused.value)
    assert named_field(str(refused.value), KINDS["upsert"]), str(refused.value)
