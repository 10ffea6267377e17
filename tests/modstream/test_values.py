"""The value classes the per-version code makes per event (modstream/core/values.py): equal by
the fields they name, hashable where those are, and made by a compiled `__init__` wherever the
build compiles their module, which a dataclass's generated one never is."""

from __future__ import annotations

import dataclasses
import importlib
import types

import pytest

from modstream.core import native
from modstream.core.values import Value
from modstream.moderation.admission import Admitted, Refused
from modstream.moderation.evidence_view import Evaluation
from modstream.moderation.ingest import Routed
from modstream.policy.evaluate import ContentFacts, EvidenceView, ReviewAsk, Verdict
from modstream.policy.store import Resolution

PER_EVENT = (Admitted, Refused, Routed, ContentFacts, EvidenceView, ReviewAsk, Verdict, Evaluation)


def test_values_are_equal_by_their_fields_and_hash_alike() -> None:
    facts = ContentFacts("image", "comment", mime_type="image/png")
    assert facts == ContentFacts("image", "comment", "", "all", 0.0, 0, "image/png")
    assert facts != ContentFacts("image", "feed", mime_type="image/png")
    assert hash(facts) == hash(ContentFacts("image", "comment", mime_type="image/png"))
    ask = ReviewAsk("adult", 2, "nsfw")
    assert {ask, ReviewAsk("adult", 2, "nsfw")} == {ask}
    assert Verdict("BLOCK", None, ("nsfw",), ("r1",), (ask,), None) != Verdict(
        "BLOCK", None, ("nsfw",), ("r1",), (), None
    )
    assert Resolution(None, (), False) == Resolution(None, (), False)


def test_a_value_never_equals_another_class_with_the_same_fields() -> None:
    assert Refused("schema", "bad", 1, None) != Routed("schema", "bad", "1", False)
    assert ReviewAsk("q", 1, "r") != ("q", 1, "r")


def test_the_view_leaves_checked_out_of_what_it_says_and_is_not_hashable() -> None:
    scores = {("nsfw_image", "nsfw"): 0.2}
    assert EvidenceView(scores, checked=True) == EvidenceView(scores)
    assert "checked" not in repr(EvidenceView(scores, checked=True))
    assert EvidenceView().scores == {} and EvidenceView() != EvidenceView(outstanding=True)
    with pytest.raises(TypeError):  # its scores are a mapping, as the frozen dataclass's were
        hash(EvidenceView(scores))


def test_repr_names_the_class_and_each_field() -> None:
    assert repr(ReviewAsk("adult", 2, "nsfw")) == (
        "ReviewAsk(queue='adult', priority=2, rule_id='nsfw')"
    )


def test_an_evaluation_builds_its_provenance_once() -> None:
    verdict = Verdict("ALLOW", None, (), (), (), None)
    evaluation = Evaluation(verdict, EvidenceView(), {"required": 0}, [], False)
    assert evaluation.provenance == [] and evaluation.provenance is evaluation.provenance


def test_no_compiled_module_makes_a_per_event_value_with_an_interpreted_init() -> None:
    """A `@dataclass` put back on one of these would make its `__init__` interpreted again
    (about 1.3 µs against 0.07 per instance, docs/BENCHMARKS.md "value classes compiled")."""
    for cls in PER_EVENT:
        assert issubclass(cls, Value) and not dataclasses.is_dataclass(cls), cls
        assert cls.__module__ in native.COMPILED, cls
    compiled = native.in_use() == "compiled"  # else MODSTREAM_NATIVE=0 or no build
    for cls in PER_EVENT:
        init = getattr(importlib.import_module(cls.__module__), cls.__name__).__init__
        assert isinstance(init, types.FunctionType) is not compiled, cls
