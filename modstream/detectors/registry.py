"""The detectors by name, built on first use (each holds an ONNX session or compiled rules)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

from modstream.core.limits import Limits
from modstream.detectors.detector import Detector

if TYPE_CHECKING:
    from modstream.detectors.offensive_text import OffensiveText


def _nsfw(threads: int | None, limits: Limits) -> Detector:
    from modstream.detectors.nsfw_image import NsfwImage

    return NsfwImage(intra_op_threads=threads, limits=limits)


def _text(threads: int | None, _limits: Limits) -> Detector:
    from modstream.detectors.offensive_text import OffensiveText

    return OffensiveText(intra_op_threads=threads)


def _ocr(threads: int | None, limits: Limits) -> Detector:
    """OCR hands what it reads to the text detector (the same one text uploads get)."""
    from modstream.detectors.ocr_text import OcrText

    text = _text_detector(threads, limits)
    return OcrText(text.offensive, text.model_version, intra_op_threads=threads, limits=limits)


def _speech(threads: int | None, limits: Limits) -> Detector:
    from modstream.detectors.speech_text import SpeechText

    text = _text_detector(threads, limits)
    return SpeechText(text.offensive, text.model_version, limits=limits)


def _text_detector(threads: int | None, limits: Limits) -> OffensiveText:
    """The registry's offensive_text (one session for text uploads and text read in media)."""
    return cast(
        "OffensiveText", detector("offensive_text", intra_op_threads=threads, limits=limits)
    )


def _media(_threads: int | None, limits: Limits) -> Detector:
    from modstream.detectors.media_check import MediaCheck

    return MediaCheck(limits)


# name -> factory(ONNX intra-op threads or None for the detector's default, media bounds)
FACTORIES: dict[str, Callable[[int | None, Limits], Any]] = {
    "nsfw_image": _nsfw,
    "offensive_text": _text,
    "media_check": _media,
    "ocr_text": _ocr,
    "speech_text": _speech,
}
_built: dict[tuple[str, int | None, Limits], Detector] = {}
_building = threading.RLock()  # re-entered: OCR and speech build the text detector


def detector(
    name: str, *, intra_op_threads: int | None = None, limits: Limits | None = None
) -> Detector:
    """The detector `name`, built once per thread setting and bounds (its session is shared:
    ONNX Runtime sessions may be run from several threads at once)."""
    if name not in FACTORIES:
        raise KeyError(f"unknown detector {name!r} (known: {', '.join(sorted(FACTORIES))})")
    limits = limits or Limits()
    key = (name, intra_op_threads, limits)
    built = _built.get(key)
    if built is None:
        with _building:  # the scan job's model workers may ask for it at once
            built = _built.get(key) or FACTORIES[name](intra_op_threads, limits)
            _built[key] = built
    return built
