"""What the readers of text in media cost here (issue 28): ocr_text per image and per second of
video, speech_text per second of audio, on media made in the run (Pillow text, espeak-ng
speech; no stack needed).

    make bench-readers               # or: python -m modstream.bench.readers --help

Each figure is the median CPU time (this process, all its threads: `time.process_time`, so a
machine shared with other work does not inflate it) of `--repeats` calls of the detector as the
scan job calls it (one model worker, `--threads` ONNX intra-op threads), decoding and text
scoring included, the first call (model loading, caches) left out. The cache of decoded videos
and audio files is cleared before each call. Prints one JSON object; docs/scanning.md records
the figures.
"""

from __future__ import annotations

import argparse
import functools
import io
import json
import statistics
import subprocess
import tempfile
import time
import wave
from collections.abc import Callable
from pathlib import Path
from typing import Any

from PIL import Image, ImageDraw, ImageFont

from modstream.detectors import video
from modstream.detectors.detector import Item
from modstream.detectors.ocr_text import OcrText
from modstream.detectors.registry import detector
from modstream.detectors.speech_text import SpeechText

LINES = ["you stupid idiot", "meet me at the park at noon", "the weather is lovely today"]


def text_image(size: tuple[int, int], lines: int) -> Image.Image:
    image = Image.new("RGB", size, "white")
    draw = ImageDraw.Draw(image)
    font = ImageFont.load_default(size=max(16, size[1] // 12))
    for number in range(lines):
        y = 20 + number * (size[1] // max(1, lines))
        draw.text((20, y), LINES[number % len(LINES)], fill="black", font=font)
    return image


def png(image: Image.Image) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return buffer.getvalue()


def speech_wav(seconds: float, folder: Path) -> tuple[bytes, float]:
    """espeak-ng sentences, repeated to about `seconds`: the WAV and its real length."""
    path = folder / "speech.wav"
    sentence = "the weather is lovely today and we walked in the park. you are a bastard. "
    text = sentence * max(1, int(seconds / 5))
    subprocess.run(["espeak-ng", "-v", "en-us", "-s", "150", "-w", str(path), text], check=True)
    with wave.open(str(path)) as spoken:
        return path.read_bytes(), spoken.getnframes() / spoken.getframerate()


def timed(call: Callable[[], Any], repeats: int, reset: Callable[[], None]) -> float:
    """Median CPU seconds of `repeats` calls after one warm-up call."""
    call()
    times = []
    for _ in range(repeats):
        reset()
        started = time.process_time()
        call()
        times.append(time.process_time() - started)
    return statistics.median(times)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1, help="ONNX intra-op threads")
    parser.add_argument("--audio-seconds", type=float, default=30.0)
    args = parser.parse_args(argv)
    ocr = detector("ocr_text", intra_op_threads=args.threads)
    speech = detector("speech_text", intra_op_threads=args.threads)
    assert isinstance(ocr, OcrText) and isinstance(speech, SpeechText)

    def fresh() -> None:
        ocr.videos = video.OncePerVideo()
        speech.files = video.OncePerVideo()

    figures: dict[str, Any] = {"threads": args.threads, "repeats": args.repeats}
    images = {
        "blank_640x480": png(Image.new("RGB", (640, 480), "white")),
        "card_640x240_1_line": png(text_image((640, 240), 1)),
        "page_1280x720_6_lines": png(text_image((1280, 720), 6)),
        "photo_1920x1080_3_lines": png(text_image((1920, 1080), 3)),
    }
    for name, data in images.items():
        item = [Item(data=data, mime_type="image/png")]
        figures[f"ocr_cpu_ms_per_image_{name}"] = round(
            1000 * timed(functools.partial(ocr.detect, item), args.repeats, fresh), 1
        )
    clip = video.encode([text_image((640, 360), 2)] * 100, fps=25)  # 4 s at 25 fps
    item = [Item(data=clip, mime_type="video/mp4")]
    seconds = timed(lambda: ocr.detect(item), args.repeats, fresh)
    figures["ocr_cpu_ms_per_video_second_640x360_25fps"] = round(1000 * seconds / 4, 1)
    with tempfile.TemporaryDirectory() as scratch:
        wav, length = speech_wav(args.audio_seconds, Path(scratch))
    item = [Item(data=wav, mime_type="audio/wav")]
    seconds = timed(lambda: speech.detect(item), max(1, args.repeats // 2), fresh)
    figures["audio_seconds"] = round(length, 1)
    figures["speech_cpu_ms_per_audio_second"] = round(1000 * seconds / length, 1)
    figures["speech_cpu_seconds_per_audio_second"] = round(seconds / length, 3)
    print(json.dumps(figures))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
