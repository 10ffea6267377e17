"""The demo's real media (`modstream demo --detectors real`, issue 28 item 8): made here, offline.

Every image, video and audio upload of a real-detector run carries a real file, so every
modality is really read. Most are clean filler (the noise JPEGs of modstream/demo/hashing.py,
a few seconds of noise video without sound, a second of silence); the first uploads of each
media modality past the fixed scenario's targets (`FIRST_INDEX`) are the kinds below, whose
words the readers must find: text rendered on an image (Pillow's own font), speech made by
Debian's `espeak-ng`, and videos whose middle segment shows or says the offence. Their labels
(modstream/demo/labels_of.py) and the outcome each must get (modstream/demo/checks.py:
`read_media_outcomes`) follow `offensive`.

The sentences and the voice are ones RapidOCR and PocketSphinx were checked to read with the
offending word intact (tests/udfs/test_ocr_text.py, tests/udfs/test_speech_text.py); most short
insults in espeak-ng's default voice come out as other words.
"""

from __future__ import annotations

import functools
import io
import subprocess
import tempfile
import wave
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import av
import numpy as np
from PIL import Image, ImageDraw, ImageFont

# The fixed scenario (modstream/demo/workload_extras.py) reviews, edits, deletes, re-evaluates and
# reports uploads 1 to 10 (and floods from 10 on): the kinds start past them, so their
# outcomes are the readers' alone.
FIRST_INDEX = 11
WRITTEN_OFFENCE = "you stupid bitch"
WRITTEN_BENIGN = "lovely weather today"
SPOKEN_OFFENCE = "you are a bastard"  # longer sentences lose the word in the AAC of a video
SPOKEN_BENIGN = "the weather is lovely today and we walked in the park"
VOICE = ("-v", "en-us+klatt", "-s", "110", "-p", "90")  # transcribed with the word intact
RATE = 16_000  # speech is resampled to what PocketSphinx's model was trained on
FPS = 2  # video frames a second: enough for the readers (OCR reads one a second)
CARD = (640, 240)  # a frame with words: Pillow's font at 44 px is read reliably at this size


@dataclass(frozen=True)
class MediaKind:
    """One kind of real media whose words decide it: offensive ones must be BLOCKed or
    RESTRICTed (the read-all policy's `offensive-in-media-*` rules), benign ones ALLOWed."""

    name: str
    modality: str
    offensive: bool
    words: str


KINDS: tuple[MediaKind, ...] = (
    MediaKind("image-written-offence", "image", True, WRITTEN_OFFENCE),
    MediaKind("image-written-benign", "image", False, WRITTEN_BENIGN),
    MediaKind("audio-spoken-offence", "audio", True, SPOKEN_OFFENCE),
    MediaKind("audio-spoken-benign", "audio", False, SPOKEN_BENIGN),
    MediaKind("video-spoken-offence", "video", True, SPOKEN_OFFENCE),
    MediaKind("video-written-offence", "video", True, WRITTEN_OFFENCE),
)


def content_index(content_id: str) -> int | None:
    """The generator's index of a content id (`<prefix>c7-14` -> 14), None for others."""
    tail = content_id.rsplit("-", 1)[-1]
    return int(tail) if tail.isdigit() and "-" in content_id else None


def kinds_of(uploads: Iterable[dict[str, Any]]) -> dict[str, MediaKind]:
    """Content id -> its kind: for each kind in `KINDS` order, the first version-1 upload of its
    modality at `FIRST_INDEX` or later not already given one (the hash-bank copy `banked-1`
    and edits never are)."""
    wanted = list(KINDS)
    chosen: dict[str, MediaKind] = {}
    for upload in uploads:
        content_id = str(upload.get("content_id", ""))
        index = content_index(content_id)
        if upload.get("content_version") != 1 or index is None or index < FIRST_INDEX:
            continue
        if content_id.endswith("banked-1") or content_id in chosen:
            continue
        kind = next((k for k in wanted if k.modality == upload.get("modality")), None)
        if kind is not None:
            chosen[content_id] = kind
            wanted.remove(kind)
    return chosen


def body(kind: MediaKind | None, modality: str, index: int, segments: int) -> tuple[bytes, str]:
    """(file bytes, MIME type) of an upload: its kind's media, or clean filler."""
    if kind is None:
        if modality == "video":
            return noise_video(index, segments), "video/mp4"
        return silence_wav(), "audio/wav"
    if kind.modality == "image":
        return png(card(kind.words)), "image/png"
    if kind.modality == "audio":
        return speech_wav(kind.words), "audio/wav"
    if kind.name == "video-spoken-offence":
        return spoken_video(kind.words, segments), "video/mp4"
    return written_video(kind.words, segments), "video/mp4"


def card(words: str, size: tuple[int, int] = CARD, font_size: int = 44) -> Image.Image:
    """Black words on white, in Pillow's own scalable font (no system fonts)."""
    image = Image.new("RGB", size, "white")
    font = ImageFont.load_default(size=font_size)
    ImageDraw.Draw(image).text((40, 90), words, fill="black", font=font)
    return image


def png(image: Image.Image) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return buffer.getvalue()


@functools.lru_cache(maxsize=8)
def spoken_pcm(words: str) -> bytes:
    """`words` spoken by espeak-ng, as 16 kHz mono 16-bit PCM."""
    with tempfile.TemporaryDirectory() as scratch:
        path = Path(scratch) / "speech.wav"
        subprocess.run(["espeak-ng", *VOICE, "-w", str(path), words], check=True)
        with wave.open(str(path)) as spoken:
            rate, raw = spoken.getframerate(), spoken.readframes(spoken.getnframes())
    samples = np.frombuffer(raw, dtype=np.int16)
    at = np.linspace(0, len(samples) - 1, num=round(len(samples) * RATE / rate))
    return np.interp(at, np.arange(len(samples)), samples).astype(np.int16).tobytes()


def wav(pcm: bytes) -> bytes:
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(RATE)
        out.writeframes(pcm)
    return buffer.getvalue()


def speech_wav(words: str) -> bytes:
    """Half a second of silence, `words`, half a second of silence."""
    pause = b"\0\0" * (RATE // 2)
    return wav(pause + spoken_pcm(words) + pause)


def silence_wav(seconds: float = 1.0) -> bytes:
    return wav(b"\0\0" * int(RATE * seconds))


def noise_video(seed: int, segments: int, seconds_per_segment: int = 1) -> bytes:
    """Smooth noise frames without sound: nothing to read, nothing to hear."""
    rng = np.random.default_rng(seed)
    frames = []
    for _ in range(FPS * seconds_per_segment * segments):
        low = rng.integers(0, 256, (4, 4, 3), dtype=np.uint8)
        frames.append(Image.fromarray(low).resize((64, 64), Image.Resampling.BICUBIC))
    return mp4(frames)


def written_video(words: str, segments: int, seconds_per_segment: int = 3) -> bytes:
    """Blank frames, the middle segment's showing `words` (all of its frames)."""
    blank, shown = Image.new("RGB", CARD, "white"), card(words)
    frames_per_segment = FPS * seconds_per_segment
    middle = segments // 2
    frames = [
        shown if number // frames_per_segment == middle else blank
        for number in range(frames_per_segment * segments)
    ]
    return mp4(frames)


def spoken_video(words: str, segments: int) -> bytes:
    """Grey frames and a sound track silent but for `words`, said within the middle segment
    (a segment is an equal share of the time: modstream/detectors/speech_text.py)."""
    speech = spoken_pcm(words)
    segment_samples = len(speech) + RATE  # half a second of silence either side
    middle = segments // 2
    before = b"\0\0" * (middle * segment_samples + RATE // 2)
    after = b"\0\0" * ((segments - middle - 1) * segment_samples + RATE // 2)
    pcm = before + speech + after
    seconds = len(pcm) / 2 / RATE
    grey = Image.new("RGB", (64, 64), "grey")
    return mp4([grey] * max(segments, round(seconds * FPS)), pcm)


def mp4(frames: list[Image.Image], pcm: bytes | None = None) -> bytes:
    """An MP4 of `frames` at `FPS` (MPEG-4 part 2), with `pcm` as its AAC sound track."""
    buffer = io.BytesIO()
    container: Any
    with av.open(buffer, mode="w", format="mp4") as container:
        picture: Any = container.add_stream("mpeg4", rate=FPS)
        picture.width, picture.height = frames[0].size
        picture.pix_fmt = "yuv420p"
        if pcm is not None:
            sound: Any = container.add_stream("aac", rate=RATE)
            samples = np.frombuffer(pcm, dtype=np.int16).reshape(1, -1)
            frame = av.AudioFrame.from_ndarray(samples, format="s16", layout="mono")
            frame.sample_rate = RATE
            resampler = av.AudioResampler(format="fltp", layout="mono", rate=RATE)
            for chunk in resampler.resample(frame):
                container.mux(sound.encode(chunk))
            container.mux(sound.encode(None))
        for image in frames:
            container.mux(picture.encode(av.VideoFrame.from_image(image)))
        container.mux(picture.encode(None))
    return buffer.getvalue()
