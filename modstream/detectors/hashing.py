"""Hashes at the gate: SHA-256 of the bytes and a 64-bit perceptual hash (dHash) of images."""

from __future__ import annotations

import hashlib
import io

import numpy as np
from PIL import Image

from modstream.detectors.detector import MediaError


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def dhash(data: bytes) -> str:
    """64-bit difference hash as 16 hex digits: grayscale, 9x8, one bit per horizontal
    gradient. Near-duplicates (re-encodes, resizes) are a small Hamming distance apart."""
    try:
        with Image.open(io.BytesIO(data)) as image:
            gray = image.convert("L").resize((9, 8), resample=Image.Resampling.LANCZOS)
    except Exception as error:
        raise MediaError(f"image does not decode ({type(error).__name__})") from None
    pixels = np.asarray(gray, dtype=np.int16)
    bits = (pixels[:, 1:] > pixels[:, :-1]).flatten()
    value = 0
    for bit in bits:
        value = (value << 1) | int(bit)
    return f"{value:016x}"


def hamming(a: str, b: str) -> int:
    return bin(int(a, 16) ^ int(b, 16)).count("1")
