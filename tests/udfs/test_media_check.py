"""Deterministic media checks: magic numbers, structure, yara rules."""

from __future__ import annotations

import pytest

from modstream.detectors.detector import Item
from modstream.detectors.hashing import dhash, hamming, sha256_hex
from modstream.detectors.media_check import MediaCheck
from modstream.testing.media import GENERATED, encode, noise

EICAR = b"X5O!P%@AP[4\\PZX54(P^)7CC)7}$EICAR-STANDARD-ANTIVIRUS-TEST-FILE!$H+H*"


@pytest.fixture(scope="module")
def check() -> MediaCheck:
    return MediaCheck()


def test_eicar_is_caught(check: MediaCheck) -> None:
    [result] = check.detect([Item(data=EICAR, mime_type="text/plain")])
    assert result == {"mime_mismatch": 0.0, "corrupt": 0.0, "malware": 1.0}


def test_a_clean_image_passes_and_a_lie_about_its_type_does_not(check: MediaCheck) -> None:
    png = encode(GENERATED["gradient_h"])
    clean, lying, truncated = check.detect(
        [
            Item(data=png, mime_type="image/png"),
            Item(data=png, mime_type="image/jpeg"),
            Item(data=png[:200], mime_type="image/png"),
        ]
    )
    assert clean == {"mime_mismatch": 0.0, "corrupt": 0.0, "malware": 0.0}
    assert isinstance(lying, dict) and lying["mime_mismatch"] == 1.0
    assert isinstance(truncated, dict) and truncated["corrupt"] == 1.0


def test_an_executable_uploaded_as_an_image_is_malware(check: MediaCheck) -> None:
    [result] = check.detect([Item(data=b"MZ\x90\x00" + b"\x00" * 200, mime_type="image/png")])
    assert isinstance(result, dict) and result["malware"] == 1.0 and result["mime_mismatch"] == 1.0


def test_perceptual_hash_survives_a_resize_and_separates_different_images() -> None:
    image = noise(1)
    small = image.resize((120, 120))
    near = hamming(dhash(encode(image)), dhash(encode(small, "JPEG")))
    far = hamming(dhash(encode(image)), dhash(encode(noise(2))))
    assert near <= 6 < far
    assert len(dhash(encode(image))) == 16 and len(sha256_hex(b"x")) == 64
