"""The language of the text a detector reads (issue 28 item 3): a post's text, the lines OCR
read in an image or video, a speech transcript. The moderation job never sees the text, so the
detectors that read it name its language on their result (`language`, `language_confidence`:
docs/contract-notes.md) and policies read it as the fact `language` (docs/policy-language.md).

py3langid (pinned in pyproject.toml; the maintained fork of langid.py, its naive Bayes model
in the wheel: nothing is fetched at run time) was chosen by measuring it beside langid and
lingua on short texts (`make bench-language`, docs/scanning.md "Language"): as accurate as
lingua's high-accuracy mode within two points, at a twentieth of its time per call and a
thirteenth of its memory. Its codes are ISO 639-1 where the language has one (`en`, `de`),
ISO 639-3 otherwise (`arz`).

A language is named only when the identifier's confidence (its probabilities normalised over
its 142 classes) is at least `MIN_CONFIDENCE`; below it, and for text without letters (`zxx`,
"no linguistic content"), the result names none and the policy reads `und`. Only the first
`MAX_CHARS` characters are read: the cost is bounded whatever the text's length.
"""

from __future__ import annotations

import threading
from importlib import metadata
from typing import NamedTuple

# Below this confidence no language is named: on the measured samples every language named at
# or over it was right (modstream/bench/language_samples.py), and 88% of the samples were named.
MIN_CONFIDENCE = 0.5
MAX_CHARS = 2_000  # what is read of a longer text: its opening is as telling as the whole
NO_LINGUISTIC_CONTENT = "zxx"


class Language(NamedTuple):
    """A language named for a text: its code and the identifier's confidence in [0, 1]."""

    code: str
    confidence: float


class LanguageIdentifier:
    """py3langid's model, loaded once; safe to call from several threads (it keeps no state
    between calls)."""

    def __init__(self) -> None:
        from py3langid.langid import MODEL_FILE
        from py3langid.langid import LanguageIdentifier as Model

        self.model = Model.from_model_file(MODEL_FILE, norm_probs=True)
        self.version = f"py3langid-{metadata.version('py3langid')}"

    def identify(self, text: str) -> Language | None:
        """The language of `text`, or None when the identifier is not sure enough of one."""
        code, confidence = self.model.classify(text[:MAX_CHARS])
        if confidence < MIN_CONFIDENCE or code == NO_LINGUISTIC_CONTENT:
            return None
        return Language(str(code), round(float(confidence), 4))


_shared: LanguageIdentifier | None = None
_loading = threading.Lock()


def identifier() -> LanguageIdentifier:
    """The process's identifier (its model is about 90 MiB: one for every detector that reads
    text), loaded on first use."""
    global _shared
    with _loading:
        if _shared is None:
            _shared = LanguageIdentifier()
        return _shared
