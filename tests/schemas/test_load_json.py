"""`modstream.contract.registry.load_json`: the msgspec fast path (`_plain`) takes only what the
strict parser (`_strict`) takes, as the same document, and every refusal is the strict parser's,
word for word (docs/RELIABILITY.md: duplicated names at any depth, NaN and infinities, integers
beyond a long, lone surrogates)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from modstream.contract import SchemaError
from modstream.contract.registry import _DOUBT, _plain, _strict, load_json

TOPIC = "detector.results"
LONG_MAX = 2**63 - 1


def outcome(load: Any, text: str) -> tuple[str, Any]:
    try:
        return "ok", load(TOPIC, text)
    except SchemaError as error:
        return "refused", str(error)


def strict(text: str) -> tuple[str, Any]:
    return outcome(_strict, text)


REFUSED = [
    ('{"a":1,"a":2}', "duplicated field name 'a'"),
    ('{"x":{"y":[{"a":1,"b":{"c":1,"c":2}}]}}', "duplicated field name 'c'"),
    # A duplicate hidden by an escaped colon in a string: the colon counts agree.
    ('{"a":1,"a":2,"b":"\\u003a"}', "duplicated field name 'a'"),
    ('{"a":"x:y","a":"z"}', "duplicated field name 'a'"),
    ('{"a": NaN}', "is not a JSON number"),
    ('{"a": -Infinity}', "is not a JSON number"),
    ('{"a": 1e400}', "number beyond a 64-bit float"),
    (f'{{"a": {LONG_MAX + 1}}}', "integer beyond a signed 64-bit long"),
    (f'{{"a": [{-(2**63) - 1}]}}', "integer beyond a signed 64-bit long"),
    (f'{{"a": {2**64}}}', "integer beyond a signed 64-bit long"),
    ('{"a": 1' + "0" * 30 + "}", "integer beyond a signed 64-bit long"),
    ('{"a": "\\ud800"}', "lone surrogate"),
    ('{"a": "\\udc00\\ud800"}', "lone surrogate"),
    ('{"a": 1} x', "Invalid JSON"),
    ('{"a": "\x01"}', "Invalid JSON"),
]


@pytest.mark.parametrize(("text", "refusal"), REFUSED)
def test_refused_as_the_strict_parser_words_it(text: str, refusal: str) -> None:
    assert _plain(text) is _DOUBT
    verdict = outcome(load_json, text)
    assert verdict == strict(text)
    assert verdict[0] == "refused" and refusal in verdict[1]


ACCEPTED = [
    '{"a":1}',
    f'{{"a": {LONG_MAX}, "b": {-(2**63)}}}',
    '{"url":"evidence://c/1","t":"10:00:00","n":{"k:1":[1,2,{"x":"::"}]}}',
    '{"a":"\\ud83d\\ude00","b":"é","c":-0.0,"d":5e-324,"e":[]}',
    '{"sha":"1234567890123456789012345"}',  # 19 digits in a string: left to the strict parser
    "[]",
    '"text"',
    "12",
]


@pytest.mark.parametrize("text", ACCEPTED)
def test_accepted_as_the_strict_parser_reads_it(text: str) -> None:
    verdict = outcome(load_json, text)
    assert verdict[0] == "ok"
    assert verdict == strict(text)
    assert json.dumps(verdict[1]) == json.dumps(strict(text)[1])


def test_ordinary_records_take_the_fast_path() -> None:
    record = {
        "event_id": "ev-1",
        "content_id": "c-1",
        "content_version": 1,
        "detector": "nsfw_image",
        "ts": 1_759_999_446_114,
        "scores": {"nsfw": 0.0651},
        "evidence_ref": "evidence://c-1/nsfw_image/1",
    }
    assert _plain(json.dumps(record)) == record


JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**65), max_value=2**65)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(alphabet=st.sampled_from('ab:"\\é\x00😀\u2028'), max_size=6),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(st.text(alphabet="ab:", max_size=3), inner, max_size=4)
    ),
    max_leaves=12,
)


@st.composite
def texts(draw: st.DrawFn) -> str:
    """JSON texts, ordinary and odd: a duplicated name or an escaped character spliced in."""
    text = json.dumps(draw(JSON), ensure_ascii=draw(st.booleans()))
    twist = draw(st.sampled_from(["none", "duplicate", "escaped_colon", "nan", "cut"]))
    if twist == "duplicate" and "{" in text:
        at = text.index("{") + 1
        name = draw(st.sampled_from(['"a"', '"b"', '"a:"']))
        text = text[:at] + f"{name}:1,{name}:2" + ("," if text[at] != "}" else "") + text[at:]
    elif twist == "escaped_colon":
        text = text.replace(":", "\\u003a", 1) if '":' not in text else text + " "
    elif twist == "nan":
        text = text.replace("0", "NaN", 1)
    elif twist == "cut" and len(text) > 1:
        text = text[: draw(st.integers(1, len(text) - 1))]
    return text


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(texts())
def test_the_fast_path_never_differs_from_the_strict_parser(text: str) -> None:
    fast = _plain(text)
    verdict = strict(text)
    if fast is not _DOUBT:
        assert verdict[0] == "ok", text
        assert json.dumps(fast) == json.dumps(verdict[1]), text
    assert outcome(load_json, text) == verdict


NOT_JSON = [
    '{"a":01}', '{"a":1.}', '{"a":.5}', '{"a":+1}', '{"a":1e}', "[1,]", '{"a":1,}', "{'a':1}",
    '{"a":tru}', '{"a":\u00a01}', '\u00a0{"a":1}', '{"a":1}\x00', '{"a":"\\x41"}', '{"a":"\\u12"}',
]  # fmt: skip


@pytest.mark.parametrize("text", NOT_JSON)
def test_what_is_not_json_is_never_taken_by_the_fast_path(text: str) -> None:
    assert _plain(text) is _DOUBT
    verdict = outcome(load_json, text)
    assert verdict == strict(text) and verdict[0] == "refused"
