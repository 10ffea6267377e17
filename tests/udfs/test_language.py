"""The language identifier the text detectors use (modstream/detectors/language.py), on the short
texts modstream moderates (modstream/bench/language_samples.py: the samples `make bench-language`
measured it on)."""

from __future__ import annotations

import pytest

from modstream.bench.language_samples import UNDETERMINED_SAMPLES, labelled
from modstream.detectors.language import MAX_CHARS, LanguageIdentifier, identifier


@pytest.fixture(scope="module")
def languages() -> LanguageIdentifier:
    return identifier()


def test_every_language_it_names_on_the_samples_is_right(languages: LanguageIdentifier) -> None:
    """A wrong name would send a rule (`language in ("de",)`) the wrong way: below its
    confidence floor it names none (`und` for the policy) rather than guess."""
    samples = labelled()
    named = [(languages.identify(text), language) for text, language in samples]
    wrong = [(found.code, wanted) for found, wanted in named if found and found.code != wanted]
    assert wrong == []
    assert sum(1 for found, _ in named if found is not None) >= 0.85 * len(samples)


@pytest.mark.parametrize("text", UNDETERMINED_SAMPLES)
def test_text_without_a_language_names_none(languages: LanguageIdentifier, text: str) -> None:
    assert languages.identify(text) is None


def test_a_long_text_is_read_only_up_to_its_bound(languages: LanguageIdentifier) -> None:
    german = "Das Wetter ist heute wirklich schön. " * (MAX_CHARS // 10)
    found = languages.identify(german + "The weather is lovely today. " * 10_000)
    assert found is not None and found.code == "de"


def test_one_identifier_serves_every_detector() -> None:
    assert identifier() is identifier()
