"""The detectors by name, built on first use (each holds an ONNX session or compiled rules)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from udfs.detector import Detector


def _nsfw() -> Detector:
    from udfs.nsfw_image import NsfwImage

    return NsfwImage()


def _text() -> Detector:
    from udfs.offensive_text import OffensiveText

    return OffensiveText()


def _media() -> Detector:
    from udfs.media_check import MediaCheck

    return MediaCheck()


FACTORIES: dict[str, Callable[[], Any]] = {
    "nsfw_image": _nsfw,
    "offensive_text": _text,
    "media_check": _media,
}
_built: dict[str, Detector] = {}


def detector(name: str) -> Detector:
    if name not in FACTORIES:
        raise KeyError(f"unknown detector {name!r} (known: {', '.join(sorted(FACTORIES))})")
    if name not in _built:
        _built[name] = FACTORIES[name]()
    return _built[name]
