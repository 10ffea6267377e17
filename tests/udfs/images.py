"""Generated test images (no files from anywhere): solid, noise, gradients."""

from __future__ import annotations

import io

import numpy as np
from PIL import Image


def solid(color: tuple[int, int, int] = (200, 40, 40), size: int = 300) -> Image.Image:
    return Image.new("RGB", (size, size), color)


def noise(seed: int = 1, size: int = 300) -> Image.Image:
    rng = np.random.default_rng(seed)
    return Image.fromarray(rng.integers(0, 256, (size, size, 3), dtype=np.uint8))


def gradient(size: int = 300, horizontal: bool = True) -> Image.Image:
    ramp = np.linspace(0, 255, size, dtype=np.uint8)
    plane = np.tile(ramp, (size, 1)) if horizontal else np.tile(ramp[:, None], (1, size))
    return Image.fromarray(np.stack([plane, 255 - plane, plane // 2], axis=-1))


def encode(image: Image.Image, fmt: str = "PNG") -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, format=fmt)
    return buffer.getvalue()


GENERATED = {
    "solid": solid(),
    "noise": noise(),
    "gradient_h": gradient(),
    "gradient_v": gradient(horizontal=False),
}
