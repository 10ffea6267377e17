"""The language of a content version (modstream/moderation/language.py): named by its text results,
kept on the version, read by policy rules (`language in (...)`) and written on decisions, their
provenance and moderation.index."""

from __future__ import annotations

import msgspec
from hypothesis import given, settings
from hypothesis import strategies as st

from modstream.contract import parse
from modstream.moderation.language import UNDETERMINED, of_evidence
from modstream.moderation.state import Evidence
from modstream.testing.records import T0
from modstream.testing.versions import Version, context

# Route German text to reviewers who read it: the kind of rule the fact is for.
GERMAN_REVIEW = {
    "id": "german-review",
    "when": "modality == 'text' and language in ('de',)",
    "outcome": "PENDING",
    "reason": "needs_german_reviewer",
    "review": {"queue": "german", "priority": 3},
}


def german_context() -> object:
    from modstream.testing.policies import global_document

    rules = global_document()["rules"]
    return context(rules=[*rules, GERMAN_REVIEW])


def result(
    language: str | None, confidence: float | None = None, status: str = "ok", segment: int = 0
) -> Evidence:
    return Evidence(
        "offensive_text", "m-1", segment, status, {"offensive": 0.1}, None, T0, language, confidence
    )


def test_the_surest_ok_result_names_the_version_language() -> None:
    assert of_evidence({}) == UNDETERMINED
    assert of_evidence({"a": result(None)}) == UNDETERMINED
    surest = {"a": result("en", 0.6), "b": result("de", 0.9), "c": result("fr", 0.99, "error")}
    assert of_evidence(surest) == "de"  # a failed result names nothing
    assert of_evidence({"b": result("de", 0.7), "a": result("nl", 0.7)}) == "nl"  # key order


@settings(max_examples=50, deadline=None)
@given(st.permutations([("a", "en", 0.6), ("b", "de", 0.8), ("c", "nl", 0.8), ("d", None, None)]))
def test_the_version_language_does_not_depend_on_arrival_order(
    named: list[tuple[str, str | None, float | None]],
) -> None:
    evidence = {key: result(code, confidence) for key, code, confidence in named}
    assert of_evidence(evidence) == "de"


def test_evidence_stored_before_languages_were_kept_loads_without_one() -> None:
    """The version state is stored as arrays (modstream/moderation/state_schema.py): an Evidence
    stored by the job before issue 28 item 3 has two fields fewer and loads with none named."""
    before = ["offensive_text", "m-1", 0, "ok", {"offensive": 0.1}, None, T0]
    stored = msgspec.msgpack.encode(before)
    loaded = msgspec.msgpack.decode(stored, type=Evidence)
    assert loaded.language is None and loaded.language_confidence is None
    assert of_evidence({"k": loaded}) == UNDETERMINED


def text_result(language: str | None, at: int, **fields: object) -> dict[str, object]:
    record: dict[str, object] = {
        "event_id": f"det-{language}-{at}",
        "content_id": "c-1",
        "content_version": 1,
        "detector": "offensive_text",
        "model_version": "profanity-1-a1+py3langid-0.4.0",
        "status": "ok",
        "ts": at,
        "segment_id": None,
        "scores": {"offensive": 0.12},
        **fields,
    }
    if language is not None:
        record |= {"language": language, "language_confidence": 0.93}
    return record


def test_a_rule_reads_the_language_its_text_result_named() -> None:
    version = Version(german_context())  # type: ignore[arg-type]
    version.upload()
    gate = version.last
    assert gate["language"] == UNDETERMINED  # no text result yet: the rule sees `und`
    assert "german-review" not in gate["matched_rules"]
    version.send("detector.results", text_result("de", T0 + 100))
    decided = version.last
    assert decided["outcome"] == "PENDING" and decided["matched_rules"] == ["german-review"]
    assert decided["language"] == "de"
    assert decided["evidence"][0]["language"] == "de"  # which result named it
    [task] = version.of("review.tasks")
    assert task["queue"] == "german"
    index = version.of("moderation.index")[-1]
    assert index["language"] == "de"
    for topic, record in (("moderation.decisions", decided), ("moderation.index", index)):
        parse(topic, msgspec.json.encode(record))  # the written records keep their schema


def test_a_version_whose_text_names_no_language_is_und_and_the_rule_does_not_match() -> None:
    for named in ("en", None):
        version = Version(german_context())  # type: ignore[arg-type]
        version.upload()
        version.send("detector.results", text_result(named, T0 + 100))
        assert version.last["outcome"] == "ALLOW" and version.last["matched_rules"] == []
        assert version.last["language"] == (named or UNDETERMINED)
        assert "language" not in version.last["evidence"][0] or named is not None
        assert version.of("review.tasks") == []


def test_the_delete_decision_still_names_the_language() -> None:
    version = Version()
    version.upload()
    version.send("detector.results", text_result("de", T0 + 100))
    assert version.of("moderation.index")[-1]["language"] == "de"
    version.send("content.versions", {
        "event_id": "del-1", "type": "delete", "content_id": "c-1", "content_version": 1,
        "ts": T0 + 200,
    })  # fmt: skip
    assert version.last["state"] == "deleted" and version.last["language"] == "de"
    assert version.of("moderation.index")[-1]["language"] == "de"
