"""Generated frames: quiet backgrounds and a 'flagged' frame the real model scores higher."""

from __future__ import annotations

import numpy as np
from PIL import Image, ImageDraw, ImageFilter


def background(seed: int, size: int = 256) -> Image.Image:
    rng = np.random.default_rng(seed)
    low = rng.integers(0, 60, (size // 8, size // 8, 3), dtype=np.uint8)
    return Image.fromarray(low).resize((size, size), Image.Resampling.BILINEAR)


def flagged(size: int = 256) -> Image.Image:
    """Skin-toned blobs, a stand-in for a flagged frame (the project ships no explicit imagery):
    after an mpeg4 round trip open_nsfw scores it about 0.1, the backgrounds 0.015 or less."""
    rng = np.random.default_rng(54)
    base = (int(rng.integers(150, 255)), int(rng.integers(90, 190)), int(rng.integers(60, 160)))
    image = Image.new("RGB", (256, 256), base)
    draw = ImageDraw.Draw(image)
    for _ in range(int(rng.integers(1, 6))):
        color = tuple(int(x) for x in np.clip(np.array(base) + rng.integers(-60, 40, 3), 0, 255))
        x, y = (int(v) for v in rng.integers(0, 200, 2))
        w, h = (int(v) for v in rng.integers(40, 200, 2))
        draw.ellipse([x, y, x + w, y + h], fill=color)
    return image.filter(ImageFilter.GaussianBlur(int(rng.integers(0, 8)))).resize((size, size))
