"""The `when` language: every construct, every error path, and hostile text refused unrun."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from modstream.policy.evaluate import ContentFacts, EvidenceView, load_policy
from modstream.policy.expr import (
    FIELD_TYPES,
    EvalContext,
    ExpressionError,
    compile_expression,
)
from modstream.testing.policies import minimal_document
from modstream.testing.records import T0

CONTEXT = EvalContext(
    modality="image",
    surface="public_post",
    region="DE",
    audience="minor",
    mime_type="image/jpeg",
    account_risk=0.4,
    size_bytes=2048,
    report_count=2,
    language="de",
    scores={("nsfw_image", "nsfw"): 0.91, ("offensive_text", "offensive"): 0.2},
    unknown=frozenset({"media_check"}),
    hash_matches=frozenset({"known_bad"}),
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("true", True),
        ("false", False),
        ("not false", True),
        ("true and false", False),
        ("true or false", True),
        ("true and true and false", False),
        ("false or false or true", True),
        ("score('nsfw_image', 'nsfw') >= 0.9", True),
        ("score('nsfw_image', 'nsfw') > 0.95", False),
        ("score('nsfw_image', 'absent') == 0", True),  # a missing label scores 0
        ("score('no_detector', 'x') < 0.1", True),
        ("0.9 <= score('nsfw_image', 'nsfw') < 0.95", True),
        ("0.95 <= score('nsfw_image', 'nsfw') < 0.99", False),
        ("unknown('media_check')", True),
        ("unknown('nsfw_image')", False),
        ("hash_match('known_bad')", True),
        ("hash_match('other')", False),
        ("surface in ('public_post', 'profile')", True),
        ("surface not in ('public_post',)", False),
        ("region == 'DE' and audience != 'all'", True),
        ("modality == 'image'", True),
        ("mime_type in ('image/png', 'image/jpeg')", True),
        ("account_risk >= 0.4", True),
        ("account_risk < -1", False),
        ("size_bytes > 1e3", True),
        ("report_count >= 3", False),
        ("report_count in (1, 2, 3)", True),
        ("language in ('en', 'de')", True),  # issue 28 item 3
        ("language == 'und'", False),
        ("language not in ('de',)", False),
        ("unknown('media_check') == true", True),
        ("not (score('nsfw_image', 'nsfw') >= 0.5 and surface == 'dm')", True),
        ("(modality == 'video' or modality == 'image') and not hash_match('x')", True),
    ],
)
def test_constructs_evaluate_as_documented(text: str, expected: bool) -> None:
    assert compile_expression(text, known_banks=None).evaluate(CONTEXT) is expected


@pytest.mark.parametrize(
    ("text", "message", "column"),
    [
        ("", "empty condition", 1),
        ("score('a', 'b') >=", "syntax error", None),
        ("__import__('os').system('true')", "attribute access not allowed", 1),
        ("open('/etc/passwd')", "only score(), unknown() and hash_match()", 1),
        ("surface.upper() == 'X'", "attribute access not allowed", 1),
        ("surface[0] == 'p'", "subscripts not allowed", 1),
        ("[x for x in ()]", "comprehensions not allowed", 1),
        ("(lambda: true)()", "only score(), unknown() and hash_match()", 1),
        ("lambda: true", "lambdas not allowed", 1),
        ("account_risk + 1 > 2", "arithmetic not allowed", 1),
        ("true if true else false", "if-expressions not allowed", 1),
        ("(x := 1)", "assignments not allowed", 2),
        ("f'{surface}' == 'a'", "f-strings not allowed", 1),
        ("surface in ['a']", "`in` needs a literal tuple", 12),
        ("surface in 'public_post'", "`in` needs a literal tuple", 12),
        ("surface in (region,)", "tuple elements must be literals", 13),
        ("surface in (1, 2)", "a number in a tuple tested against a text", 13),
        ("language >= 'de'", "`>=` needs numbers, got a text", 13),
        ("surface in ('a',) == true", "cannot be chained", 1),
        ("score('a') > 1", "score() takes 2 arguments, got 1", 1),
        ("unknown('a', 'b')", "unknown() takes 1 argument, got 2", 1),
        ("score(detector='a', label='b') > 0", "takes no keyword arguments", 1),
        ("score(surface, 'b') > 0", "must be non-empty string literals", 7),
        ("score('', 'b') > 0", "must be non-empty string literals", 7),
        ("hash_match('nope')", "unknown hash bank 'nope'", 12),
        ("colour == 'red'", "unknown name 'colour'", 1),
        ("True", "write true / false", 1),
        ("surface == None", "None is not allowed", 12),
        ("surface > 'a'", "`>` needs numbers, got a text", 11),
        ("surface == 1", "cannot compare a text with a number", 12),
        ("score('a', 'b')", "the condition is a number", 1),
        ("surface", "the condition is a text", 1),
        ("score('a', 'b') > 0 and surface", "expected a condition, got a text", 25),
        ("not account_risk", "expected a condition, got a number", 5),
        ("-surface == 'a'", "only `not`, and a sign before a number", 1),
        ("surface is 'a'", "`is` / `is not` are not allowed", 1),
        ("b'x' == b'x'", "bytes literals are not allowed", 1),
        ("1e400 > 0", "numbers must be finite", 1),
        ("x" * 5000, "longer than 4000 characters", 1),
        ("not " * 600 + "true", "more than 400 syntax nodes", 1),
        ("(" * 300 + "true" + ")" * 300, "", None),
    ],
)
def test_errors_say_what_and_where(text: str, message: str, column: int | None) -> None:
    with pytest.raises(ExpressionError) as caught:
        compile_expression(text, known_banks={"known_bad"})
    assert message in str(caught.value)
    if column is not None:
        assert caught.value.line == 1
        assert caught.value.column == column, str(caught.value)


# Random expressions from the grammar.
_strings = st.sampled_from(["public_post", "dm", "image", "DE", "", "é", "x' or '1"])
_numbers = st.floats(min_value=-2, max_value=2, allow_nan=False) | st.integers(-5, 10**9)
_detectors = st.sampled_from(["nsfw_image", "offensive_text", "media_check", "new_one"])
_labels = st.sampled_from(["nsfw", "offensive", "malware", "other"])
_text_fields = [name for name, kind in FIELD_TYPES.items() if kind == "text"]
_number_fields = [name for name, kind in FIELD_TYPES.items() if kind == "number"]


def _number_term() -> st.SearchStrategy[str]:
    return st.one_of(
        st.sampled_from(_number_fields),
        st.builds(lambda d, lab: f"score({d!r}, {lab!r})", _detectors, _labels),
        _numbers.map(repr),
    )


_ops = st.sampled_from(["<", "<=", ">", ">=", "==", "!="])
_atoms = st.one_of(
    st.sampled_from(["true", "false"]),
    st.builds(lambda a, op, b: f"{a} {op} {b}", _number_term(), _ops, _number_term()),
    st.builds(
        lambda f, op, s: f"{f} {op} {s!r}",
        st.sampled_from(_text_fields),
        st.sampled_from(["==", "!="]),
        _strings,
    ),
    st.builds(
        lambda f, neg, vals: f"{f} {'not in' if neg else 'in'} ({', '.join(map(repr, vals))},)",
        st.sampled_from(_text_fields),
        st.booleans(),
        st.lists(_strings, min_size=1, max_size=3),
    ),
    st.builds(lambda d: f"unknown({d!r})", _detectors),
    st.just("hash_match('known_bad')"),
)
_expressions = st.recursive(
    _atoms,
    lambda inner: st.one_of(
        inner.map(lambda e: f"not ({e})"),
        st.builds(
            lambda a, b, op: f"({a}) {op} ({b})", inner, inner, st.sampled_from(["and", "or"])
        ),
    ),
    max_leaves=12,
)
_contexts = st.builds(
    EvalContext,
    modality=_strings,
    surface=_strings,
    region=_strings,
    audience=_strings,
    mime_type=_strings,
    language=_strings,
    account_risk=st.floats(allow_nan=True, allow_infinity=True),
    size_bytes=st.integers(0, 10**10),
    report_count=st.integers(0, 100),
    scores=st.dictionaries(
        st.tuples(_detectors, _labels), st.floats(allow_nan=True, allow_infinity=True), max_size=6
    ),
    unknown=st.frozensets(_detectors),
    hash_matches=st.frozensets(st.just("known_bad")),
)


@settings(max_examples=400, deadline=None)
@given(text=_expressions, context=_contexts)
def test_grammar_expressions_compile_and_evaluate_without_raising(
    text: str, context: EvalContext
) -> None:
    compiled = compile_expression(text, known_banks={"known_bad"})
    assert isinstance(compiled.evaluate(context), bool)


@settings(max_examples=300, deadline=None)
@given(text=_expressions, context=_contexts)
def test_index_guards_never_hide_a_match(text: str, context: EvalContext) -> None:
    """When a rule is true, one of its guards (its cheap necessary condition) holds."""
    compiled = compile_expression(text, known_banks={"known_bad"})
    clean = {k: v for k, v in context.scores.items() if math.isfinite(v)}
    context.scores = clean
    if compiled.guards is None or not compiled.evaluate(context):
        return

    def holds(guard: tuple) -> bool:
        if guard[0] == "score":
            return context.scores.get(guard[1], 0.0) >= guard[2]
        if guard[0] == "modality":
            return context.modality == guard[1]
        return guard[1] in context.hash_matches

    assert any(holds(guard) for guard in compiled.guards), (text, compiled.guards)


_SIDE_EFFECTS: list[str] = []


def _snippet_calls() -> st.SearchStrategy[str]:
    names = st.sampled_from(
        [
            "print",
            "exec",
            "eval",
            "open",
            "getattr",
            "globals",
            "vars",
            "__import__",
            "compile",
            "breakpoint",
            "input",
            "_record",
        ]
    )
    return st.builds(lambda f, arg: f"{f}({arg!r})", names, st.text(max_size=8))


_python_outside = st.one_of(
    _snippet_calls(),
    st.builds(lambda a: f"({a}).__class__.__mro__", _snippet_calls()),
    st.builds(lambda a: f"[{a} for _ in range(3)]", _snippet_calls()),
    st.builds(lambda a: f"lambda: {a}", _snippet_calls()),
    st.builds(lambda a, b: f"{a} + {b}", st.integers(), st.integers()),
    st.builds(lambda a: f"surface[{a}] == 'x'", st.integers()),
    st.builds(lambda a: f"{{'k': {a}}}", _snippet_calls()),
    st.builds(lambda a: f"(yield {a})", _snippet_calls()),
)


@settings(max_examples=300, deadline=None)
@given(text=_python_outside)
def test_python_outside_the_grammar_is_refused_without_running(text: str) -> None:
    import builtins

    calls: list[str] = []
    original = builtins.print
    builtins._record = lambda *a: calls.append("recorded")  # type: ignore[attr-defined]
    builtins.print = lambda *a, **k: calls.append("printed")  # type: ignore[assignment]
    try:
        with pytest.raises(ExpressionError):
            compile_expression(text)
    finally:
        builtins.print = original
        del builtins._record  # type: ignore[attr-defined]
    assert calls == []


def test_guards_pick_the_most_selective_conjunct() -> None:
    compiled = compile_expression(
        "surface == 'dm' and score('a', 'x') >= 0.5 and score('b', 'y') >= 0.9"
    )
    assert compiled.guards == (("score", ("b", "y"), 0.9),)
    either = compile_expression("score('a', 'x') >= 0.5 or hash_match('bank')")
    assert either.guards == (("score", ("a", "x"), 0.5), ("bank", "bank"))
    assert compile_expression("score('a', 'x') >= 0").guards is None  # always a candidate
    assert compile_expression("not score('a', 'x') >= 0.5").guards is None
    assert compile_expression("0.7 < score('a', 'x')").guards == (("score", ("a", "x"), 0.7),)
    # A threshold on the left of > or >= is an upper bound on the score: no guard.
    assert compile_expression("1 > score('a', 'x')").guards is None
    assert compile_expression("0.5 >= score('a', 'x')").guards is None


def test_an_upper_bound_rule_matches_content_without_that_score() -> None:
    """Found by Hypothesis: `1 > score(...)` was indexed as `score > 1` and never ran."""
    document = minimal_document(
        rules=[{"id": "low", "when": "1 > score('nsfw_image', 'nsfw')", "outcome": "BLOCK"}]
    )
    policy = load_policy(document)
    facts = ContentFacts("image", "comment", "DE", "all", 0.1, 10, "image/png", 0)
    verdict = policy.evaluate(facts, EvidenceView.from_segments({}), ts=T0)
    assert verdict.matched_rules == ("low",)
