"""modstream/core/jsonio.py: orjson's compact text, json's where orjson cannot write the value."""

from __future__ import annotations

import json

from modstream.core import jsonio


def test_records_are_written_as_compact_utf8_json_with_the_same_values() -> None:
    record = {"outcome": "BLOCK", "reason": "é\u2028", "scores": {"nsfw": 0.00001}, "n": [1, None]}
    text = jsonio.dumps(record)
    assert text.startswith('{"outcome":"BLOCK","reason":"é\u2028"')
    assert json.loads(text) == record


def test_values_orjson_refuses_are_written_by_json() -> None:
    assert jsonio.dumps({"id": 2**70}) == '{"id":1180591620717411303424}'


def test_nan_is_written_as_null() -> None:
    assert jsonio.dumps({"score": float("nan"), "weight": float("inf")}) == (
        '{"score":null,"weight":null}'
    )
