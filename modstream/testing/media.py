"""Made media for detector tests (no files from anywhere, nothing explicit): generated images
(solid, noise, gradients), video-like frames (quiet backgrounds and a skin-toned 'flagged'
frame the shipped open_nsfw model scores higher), and their encoded bytes.

A detector test feeds the bytes through the detector's own loader and model:

    from modstream.testing.media import GENERATED, encode

    png = encode(GENERATED["noise"])            # bytes a user could upload
    jpeg = encode(GENERATED["solid"], "JPEG")

Everything is deterministic (seeded), so a score measured once stays a fixed expectation.
`card` draws words for a reader of text in images (ocr_text), `speak` says them for a
transcriber (speech_text; needs espeak-ng, which `make setup` installs), and `bomb_png` is a
decompression bomb for the media limits.
"""

from __future__ import annotations

import io
import struct
import subprocess
import wave
import zlib
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw, ImageFilter, ImageFont


def solid(color: tuple[int, int, int] = (200, 40, 40), size: int = 300) -> Image.Image:
    """One colour: nothing to find."""
    return Image.new("RGB", (size, size), color)


def noise(seed: int = 1, size: int = 300) -> Image.Image:
    """Uniform noise from `seed`: incompressible, no shapes."""
    rng = np.random.default_rng(seed)
    return Image.fromarray(rng.integers(0, 256, (size, size, 3), dtype=np.uint8))


def gradient(size: int = 300, horizontal: bool = True) -> Image.Image:
    """A smooth colour ramp."""
    ramp = np.linspace(0, 255, size, dtype=np.uint8)
    plane = np.tile(ramp, (size, 1)) if horizontal else np.tile(ramp[:, None], (1, size))
    return Image.fromarray(np.stack([plane, 255 - plane, plane // 2], axis=-1))


def encode(image: Image.Image, fmt: str = "PNG") -> bytes:
    """`image` as the bytes of a file of format `fmt` (PIL's names: PNG, JPEG, GIF...)."""
    buffer = io.BytesIO()
    image.save(buffer, format=fmt)
    return buffer.getvalue()


# Four images that differ in every way a detector looks at.
GENERATED = {
    "solid": solid(),
    "noise": noise(),
    "gradient_h": gradient(),
    "gradient_v": gradient(horizontal=False),
}


# Frames (modstream/detectors/video.py samples them from a video).


def background(seed: int, size: int = 256) -> Image.Image:
    """A dark, blurred frame from `seed`: what most frames of a video look like to a model."""
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


# Words that make content offensive to the shipped offensive_text model, written in an image
# (`card`) or spoken (`speak`: a sentence PocketSphinx transcribes with the offending word
# intact in the voice below; most short insults in espeak-ng's default voice come out as
# other words).
WRITTEN_OFFENSIVE = "you stupid bitch"
SPOKEN_OFFENSIVE = "you are a bastard and everyone knows it"
AT = (40, 90)  # where `card` draws its words
VOICE = ["-v", "en-us+klatt", "-s", "110", "-p", "90"]


def card(words: str = "", size: tuple[int, int] = (640, 240), font_size: int = 44) -> Image.Image:
    """Black words on white, drawn with Pillow's own scalable font (no system fonts)."""
    image = Image.new("RGB", size, "white")
    if words:
        font = ImageFont.load_default(size=font_size)
        ImageDraw.Draw(image).text(AT, words, fill="black", font=font)
    return image


def speak(text: str, tmp_path: Path, silence_s: float = 0.0) -> bytes:
    """A WAV of `text` spoken by espeak-ng, after `silence_s` seconds of silence."""
    path = tmp_path / "speech.wav"
    subprocess.run(["espeak-ng", *VOICE, "-w", str(path), text], check=True)
    with wave.open(str(path)) as spoken:
        rate, pcm = spoken.getframerate(), spoken.readframes(spoken.getnframes())
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(rate)
        out.writeframes(b"\0\0" * int(rate * silence_s) + pcm)
    return buffer.getvalue()


def bomb_png(width: int, height: int) -> bytes:
    """A PNG that declares `width` x `height` (grey, 8 bit) with almost no data."""

    def chunk(kind: bytes, body: bytes) -> bytes:
        crc = zlib.crc32(kind + body) & 0xFFFFFFFF
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", crc)

    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(b"\x00" * 1024))
        + chunk(b"IEND", b"")
    )
