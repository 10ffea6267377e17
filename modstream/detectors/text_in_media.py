"""Text read out of media (OCR lines, speech transcripts), scored by the text detector.

The readers (`modstream/detectors/ocr_text.py`, `modstream/detectors/speech_text.py`) only read;
whether what they read is offensive is the text detector's call (`offensive_text`), so a word means
the same written in a post, in a picture or spoken. Each reading is scored alone and, per group (a
frame, a segment's transcript), joined with its neighbours: a phrase split over two lines or two
utterances is still read as one. The item's score is the highest of them; its findings are the
readings with the highest scores, at most `MAX_FINDINGS`, with where they were found and how sure
the reader was, never the words themselves (evidence names a place in the media, not its content).
The item's language is that of all its readings joined, in reading order
(modstream/detectors/language.py: more text, a surer name than any one line's).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any

from modstream.detectors.detector import Evidence, MediaError
from modstream.detectors.language import Language

MAX_FINDINGS = 8  # per result: bounds the record whatever the media holds
# Texts -> P(offensive) each, in one model call (modstream/detectors/offensive_text.py:
# OffensiveText.offensive).
ScoreTexts = Callable[[Sequence[str]], list[float]]
# A text -> its language, or None (modstream/detectors/language.py: LanguageIdentifier.identify).
IdentifyLanguage = Callable[[str], Language | None]


@dataclass(frozen=True)
class Reading:
    """One piece of text a reader found: the text, the reader's confidence in [0, 1], which
    group it belongs to (readings of one group are also scored joined), and where it was
    (the finding's location fields: a box and a frame time, or a time range)."""

    text: str
    confidence: float
    group: Hashable = 0
    where: dict[str, Any] = field(default_factory=dict)


def evidence_of(
    readings_per_item: Sequence[Sequence[Reading] | MediaError],
    score_texts: ScoreTexts,
    identify_language: IdentifyLanguage,
) -> list[Evidence | MediaError]:
    """Every item's readings scored in one text-model call: `offensive` is the highest score of
    a reading or of a group's joined text (0 when nothing was read); the language, of all of
    them joined (None when nothing was read)."""
    texts: list[str] = []
    for readings in readings_per_item:
        if isinstance(readings, MediaError):
            continue
        texts += [reading.text for reading in readings]
        texts += list(_joined(readings).values())
    scores = iter(score_texts(texts) if texts else [])
    results: list[Evidence | MediaError] = []
    for readings in readings_per_item:
        if isinstance(readings, MediaError):
            results.append(readings)
            continue
        own = [next(scores) for _ in readings]
        joined = [next(scores) for _ in _joined(readings)]
        best = max([0.0, *own, *joined])
        ranked = sorted(zip(own, readings, strict=True), key=lambda pair: -pair[0])
        findings = tuple(
            {"offensive": round(score, 4), "confidence": round(reading.confidence, 4)}
            | reading.where
            for score, reading in ranked[:MAX_FINDINGS]
        )
        read = " ".join(reading.text for reading in readings)
        language = identify_language(read) if read.strip() else None
        raw = [
            {"text": reading.text, "confidence": reading.confidence, **reading.where}
            for reading in readings
        ]
        results.append(Evidence({"offensive": best}, findings, language, raw))
    return results


def _joined(readings: Sequence[Reading]) -> dict[Hashable, str]:
    """Each group of two or more readings as one text, in reading order."""
    groups: dict[Hashable, list[str]] = {}
    for reading in readings:
        groups.setdefault(reading.group, []).append(reading.text)
    return {group: " ".join(texts) for group, texts in groups.items() if len(texts) > 1}
