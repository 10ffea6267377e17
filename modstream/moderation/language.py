"""The language of a content version (issue 28 item 3): a fact the policy reads (`language in
("en", "de")`, docs/policy-language.md) and decisions, moderation.index and the archive carry.

The moderation job never sees the text: the detectors that read it (offensive_text, ocr_text,
speech_text) name its language on their results (modstream/detectors/language.py), and the version's
language is the one named with the highest confidence by its `ok` results, ties to the first in
evidence key order. So it depends on the set of results, never on the order they came in, and a
replay finds the same. Until a result names one it is `und` (ISO 639-2, "undetermined"): a version
without text, one whose text results are still outstanding, failed, or too short to tell.

A leaf module (the policy and the version state both import it).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from modstream.moderation.state import Evidence

UNDETERMINED = "und"


def of_evidence(evidence: Mapping[str, Evidence]) -> str:
    """The language the version's results name with the most confidence, or `und`. Only the
    results that name one are put in key order (the ties' order): most name none."""
    named = sorted(
        (key, result.language, result.language_confidence or 0.0)
        for key, result in evidence.items()
        if result.language is not None and result.status == "ok"
    )
    best, surest = UNDETERMINED, -1.0
    for _, language, confidence in named:
        if confidence > surest:
            best, surest = language, confidence
    return best
