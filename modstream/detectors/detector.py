"""The detector interface: evidence, never decisions.

A detector has a name (the policy's `detectors.*.required` and `score(name, label)` use it), a
`model_version`, the modalities it reads, and a versioned adapter that maps the model's raw
outputs into modstream's label vocabulary. The adapter is what policies depend on: a model
whose outputs change meaning gets a new adapter version, and contract tests pin each adapter.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from modstream.detectors.language import Language


class MediaError(ValueError):
    """The input cannot be scanned (corrupt, unsupported): a permanent failure, no retry."""


@dataclass(frozen=True)
class Item:
    """One thing to scan: text, or media bytes with their declared MIME type."""

    text: str | None = None
    data: bytes | None = None
    mime_type: str | None = None
    ref: str | None = None  # where it came from (a path, a media_ref), for evidence_ref
    segment: int | None = None  # for video: which of `segments` equal runs of frames
    segments: int = 1
    # For video: the policy's `detectors.video.sample_ms` (modstream/detectors/video.py: Sampling),
    # None when it sets none (every frame).
    sample_ms: int | None = None


@dataclass(frozen=True)
class Adapter:
    """Raw model outputs -> modstream labels in [0, 1]. `version` is part of the detector's
    model_version, so a change of mapping is visible in every decision's provenance."""

    version: str
    labels: tuple[str, ...]
    mapping: Callable[[Sequence[float]], Mapping[str, float]]

    def __call__(self, raw: Sequence[float]) -> dict[str, float]:
        scores = {label: float(value) for label, value in self.mapping(raw).items()}
        if set(scores) != set(self.labels):
            raise ValueError(f"adapter {self.version}: labels {sorted(scores)} != {self.labels}")
        for label, value in scores.items():
            if not (math.isfinite(value) and 0.0 <= value <= 1.0):
                raise ValueError(f"adapter {self.version}: {label} = {value} is not in [0, 1]")
        return scores


def clip(value: float) -> float:
    """Float noise just outside [0, 1] is clipped; NaN stays NaN (the adapter refuses it:
    a broken output must never read as a safe score of 0)."""
    return value if math.isnan(value) else min(1.0, max(0.0, value))


@dataclass(frozen=True)
class Evidence:
    """Scores with the findings behind them: where in the media a reader found what it scored
    (a text box and its frame, a stretch of speech) and how sure it was. The findings go
    into the result as its extra field `findings` (docs/contract-notes.md), for a reviewer.
    A detector that reads text names its language (modstream/detectors/language.py), or None when it
    read none or is not sure of one: the result's extra fields `language` and
    `language_confidence`."""

    scores: dict[str, float]
    findings: tuple[dict[str, Any], ...] = ()
    language: Language | None = None
    # What the model itself said, for the raw output store (modstream/detectors/raw_output.py):
    # readers of text in media give every reading (its words, confidence and place); None: the
    # scores.
    raw: Any = None


# One item's answer: scores, scores with findings, or why the item cannot be scanned.
Scored = dict[str, float] | Evidence | MediaError


class Detector(Protocol):
    name: str
    model_version: str
    modalities: tuple[str, ...]
    labels: tuple[str, ...]

    def detect(self, items: Sequence[Item]) -> Sequence[Scored]:
        """Scores per item, or the MediaError that makes it unscannable; one model call for
        the whole batch."""


def file_digest(path: Any) -> str:
    """sha256 of a model file: its identity in `model_version`."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()
