"""The detectors by name, built on first use (each holds an ONNX session or compiled rules)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from modstream.limits import Limits
from udfs.detector import Detector


def _nsfw(threads: int | None, limits: Limits) -> Detector:
    from udfs.nsfw_image import NsfwImage

    return NsfwImage(intra_op_threads=threads, limits=limits)


def _text(threads: int | None, _limits: Limits) -> Detector:
    from udfs.offensive_text import OffensiveText

    return OffensiveText(intra_op_threads=threads)


def _media(_threads: int | None, limits: Limits) -> Detector:
    from udfs.media_check import MediaCheck

    return MediaCheck(limits)


# name -> factory(ONNX intra-op threads or None for the detector's default, media bounds)
FACTORIES: dict[str, Callable[[int | None, Limits], Any]] = {
    "nsfw_image": _nsfw,
    "offensive_text": _text,
    "media_check": _media,
}
_built: dict[tuple[str, int | None, Limits], Detector] = {}
_building = threading.Lock()


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
