"""Generated JPEG images for the demo's uploads (no files from anywhere)."""

from __future__ import annotations

import io

import numpy as np
from PIL import Image


def jpeg(seed: int, size: int = 224) -> bytes:
    rng = np.random.default_rng(seed)
    low = rng.integers(0, 256, (size // 16, size // 16, 3), dtype=np.uint8)
    image = Image.fromarray(low).resize((size, size), Image.Resampling.BICUBIC)
    buffer = io.BytesIO()
    image.save(buffer, format="JPEG", quality=85)
    return buffer.getvalue()
