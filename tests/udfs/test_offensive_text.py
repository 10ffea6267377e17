"""offensive_text: the converted ONNX graph against scikit-learn, and its ranking."""

from __future__ import annotations

import numpy as np
import pytest

from modstream.bench.language_samples import SAMPLES
from modstream.detectors.detector import Evidence, Item
from modstream.detectors.offensive_text import ADAPTER, OffensiveText
from modstream.detectors.text_model import load_sklearn

ASCII_SAMPLE = [
    "Have a wonderful day, everyone!",
    "The meeting moved to Thursday at 10am.",
    "you are a stupid idiot and everyone hates you",
    "What the hell is wrong with you, moron?",
    "shut up you worthless piece of garbage",
    "I baked bread with my grandmother.",
    "",
    "12345 !!! ???",
]
OFFENSIVE = [
    "fuck you, you stupid bitch",
    "you are a worthless piece of shit",
    "shut up you dumb asshole",
]
BENIGN_LOOKALIKES = [
    "Scunthorpe United won the match at home",
    "The cocktail party starts at nine",
    "She is a classic assassin in the novel",
    "Please assess the bass section of the orchestra",
    "Dick Van Dyke starred in the film",
]


@pytest.fixture(scope="module")
def detector() -> OffensiveText:
    return OffensiveText(intra_op_threads=2)


def test_onnx_matches_scikit_learn_within_1e_5(detector: OffensiveText) -> None:
    vectorizer, model = load_sklearn()
    expected = model.predict_proba(vectorizer.transform(ASCII_SAMPLE))[:, 1]
    actual = detector.scores(ASCII_SAMPLE)[:, 1]
    assert np.max(np.abs(expected - actual)) < 1e-5


def test_offensive_texts_rank_above_benign_lookalikes(detector: OffensiveText) -> None:
    results = detector.detect([Item(text=t) for t in OFFENSIVE + BENIGN_LOOKALIKES])
    scores = [r.scores["offensive"] for r in results if isinstance(r, Evidence)]
    assert len(scores) == len(OFFENSIVE) + len(BENIGN_LOOKALIKES)
    assert min(scores[: len(OFFENSIVE)]) > max(scores[len(OFFENSIVE) :])


def test_batching_does_not_change_scores(detector: OffensiveText) -> None:
    batched = detector.detect([Item(text=t) for t in ASCII_SAMPLE])
    alone = [detector.detect([Item(text=t)])[0] for t in ASCII_SAMPLE]
    for one, other in zip(batched, alone, strict=True):
        assert isinstance(one, Evidence) and isinstance(other, Evidence)
        assert abs(one.scores["offensive"] - other.scores["offensive"]) < 1e-6
        assert one.language == other.language


def test_the_adapter_is_pinned() -> None:
    assert ADAPTER.version == "a1" and ADAPTER([0.9, 0.1]) == {"offensive": 0.1}


@pytest.mark.parametrize(
    ("text", "code"),
    [
        (SAMPLES["en"][0], "en"),
        (SAMPLES["de"][0], "de"),
        (SAMPLES["es"][3], "es"),
        (SAMPLES["ru"][0], "ru"),
        (SAMPLES["zh"][0], "zh"),
    ],
)
def test_each_text_carries_its_language(detector: OffensiveText, text: str, code: str) -> None:
    """Issue 28 item 3: the detector that reads the text names its language, for the policy."""
    [evidence] = detector.detect([Item(text=text)])
    assert isinstance(evidence, Evidence) and evidence.language is not None
    assert evidence.language.code == code and 0.5 <= evidence.language.confidence <= 1.0


def test_a_text_too_short_to_tell_names_no_language(detector: OffensiveText) -> None:
    results = detector.detect([Item(text="ok"), Item(text=""), Item(data="👍".encode())])
    assert [r.language for r in results if isinstance(r, Evidence)] == [None, None, None]


def test_the_language_identifier_is_part_of_the_model_version(detector: OffensiveText) -> None:
    assert detector.model_version.endswith(f"-a1+{detector.languages.version}")
    assert detector.languages.version.startswith("py3langid-")
