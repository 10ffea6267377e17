"""Text read in media, scored: the highest of a reading or its group joined, bounded findings."""

from __future__ import annotations

from collections.abc import Sequence

from modstream.detectors.detector import Evidence, MediaError
from modstream.detectors.language import Language, identifier
from modstream.detectors.text_in_media import MAX_FINDINGS, Reading, evidence_of


def no_language(_text: str) -> Language | None:
    return None


class Scorer:
    """offensive_text's stand-in: 0.9 for a text holding "idiot", else 0.1; counts calls."""

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def __call__(self, texts: Sequence[str]) -> list[float]:
        self.calls.append(list(texts))
        return [0.9 if "idiot" in text else 0.1 for text in texts]


def test_every_items_readings_go_to_the_text_detector_in_one_call() -> None:
    scorer = Scorer()
    items = [
        [Reading("hello", 0.9, where={"box": [0, 0, 5, 5]})],
        MediaError("does not decode"),
        [Reading("you idiot", 0.7, where={"box": [1, 1, 9, 9]})],
        [],
    ]
    first, failed, second, empty = evidence_of(items, scorer, no_language)
    assert len(scorer.calls) == 1
    assert isinstance(first, Evidence) and first.scores == {"offensive": 0.1}
    assert isinstance(failed, MediaError)
    assert isinstance(second, Evidence) and second.scores == {"offensive": 0.9}
    assert second.findings == ({"offensive": 0.9, "confidence": 0.7, "box": [1, 1, 9, 9]},)
    assert isinstance(empty, Evidence) and empty.scores == {"offensive": 0.0}
    assert empty.findings == ()


def test_a_phrase_split_over_readings_of_one_group_is_scored_joined() -> None:
    split = [Reading("you", 0.9, group="frame-1"), Reading("idi", 0.9, group="frame-1")]
    split.append(Reading("ot", 0.9, group="frame-2"))
    scorer = Scorer()
    [evidence] = evidence_of([split], scorer, no_language)
    assert "you idi" in scorer.calls[0] and "idi ot" not in scorer.calls[0]  # per group only
    assert isinstance(evidence, Evidence) and evidence.scores == {"offensive": 0.1}
    joined = [Reading("you", 0.9, group=1), Reading("idiot", 0.9, group=1)]
    [found] = evidence_of([joined], Scorer(), no_language)
    assert isinstance(found, Evidence) and found.scores == {"offensive": 0.9}


def test_findings_are_the_highest_scored_readings_and_bounded() -> None:
    many = [Reading(f"line {n}", 0.5, group=n) for n in range(3 * MAX_FINDINGS)]
    many.append(Reading("idiot", 0.5, group="last"))
    [evidence] = evidence_of([many], Scorer(), no_language)
    assert isinstance(evidence, Evidence)
    assert len(evidence.findings) == MAX_FINDINGS
    assert evidence.findings[0]["offensive"] == 0.9  # the offending line first


def test_the_language_is_named_for_all_of_an_items_readings_joined() -> None:
    """Issue 28 item 3: the lines of an image, or a transcript's utterances, are read together
    (two short lines tell less than both); an item where nothing was read names none."""
    asked: list[str] = []

    def identify(text: str) -> Language | None:
        asked.append(text)
        return identifier().identify(text)

    lines = [Reading("Das Wetter ist heute", 0.9, group=1), Reading("wirklich schön", 0.8, group=2)]
    german, nothing = evidence_of([lines, []], Scorer(), identify)
    assert asked == ["Das Wetter ist heute wirklich schön"]
    assert isinstance(german, Evidence) and german.language is not None
    assert german.language.code == "de"
    assert isinstance(nothing, Evidence) and nothing.language is None
