"""Resource bounds: what one record, one version or one media file may cost at most.

Every bound is a documented setting with a default (docs/RELIABILITY.md lists them) and one
environment variable, read once by `Limits.from_env()`. Jobs take a `Limits` in their config,
so a job submitted to a cluster carries the values it was started with. A record or a file over
a bound is refused (DLQ `schema` for records, `permanent` for media); it never stops a job.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, fields

# 2000-01-01T00:00:00Z: keyed input stamped before it is refused (contract v1.1).
EARLIEST_TS = 946_684_800_000
# The largest record the local broker takes (`message.max.bytes`, modstream/stack/local.py); the
# Kafka helpers (modstream/core/kafkaio.py) and the archive's reader size their requests by it.
BROKER_MESSAGE_MAX_BYTES = 4 * 1024 * 1024


@dataclass(frozen=True)
class Limits:
    """Bounds on input, state and media, each with the environment variable that sets it."""

    # Records (schemas.parse): size of the JSON text, nesting depth of objects and arrays.
    max_record_bytes: int = 1_048_576  # MODSTREAM_MAX_RECORD_BYTES
    max_json_depth: int = 32  # MODSTREAM_MAX_JSON_DEPTH
    # Event time (contract v1.1): keyed input more than this ahead of the processing clock is
    # refused and moves no clock.
    max_future_skew_ms: int = 300_000  # MODSTREAM_MAX_FUTURE_SKEW_MS
    # Keyed state per version.
    max_segments: int = 4_096  # MODSTREAM_MAX_SEGMENTS: segments one version may declare
    # Reports (modstream/moderation/rules/reports.py): distinct
    # reporters counted per version (and recent reports kept for brigading), report times kept per
    # reporter.
    max_reporters: int = 10_000  # MODSTREAM_MAX_REPORTERS
    max_reporter_reports: int = 1_000  # MODSTREAM_MAX_REPORTER_REPORTS
    # Hash banks (modstream/trust/hashbank.py): entries (adds and removes) one bank may hold; past
    # it a record is refused to the DLQ with class `permanent` (issue 27).
    max_bank_entries: int = 1_000_000  # MODSTREAM_MAX_BANK_ENTRIES
    # Media (scan job).
    max_media_bytes: int = 268_435_456  # MODSTREAM_MAX_MEDIA_BYTES: one file, 256 MiB
    max_image_pixels: int = 40_000_000  # MODSTREAM_MAX_IMAGE_PIXELS: per frame (bombs)
    max_frames: int = 10_000  # MODSTREAM_MAX_FRAMES: frames scored per animated image/video
    # MODSTREAM_MAX_DECODED_PIXELS: pixels decoded per file over all its frames and streams
    # (a small file of many huge frames costs minutes of CPU), 10 Gpx.
    max_decoded_pixels: int = 10_000_000_000
    yara_timeout_s: int = 5  # MODSTREAM_YARA_TIMEOUT_S
    # Readers of text in media (issue 28): the longest side OCR's text finder sees (larger
    # images and frames are scaled down), frames OCR reads per animated image or video
    # (sampled evenly), and seconds of audio transcribed per file (all streams; over it the
    # file is refused, never transcribed in part).
    max_ocr_side: int = 960  # MODSTREAM_MAX_OCR_SIDE
    max_ocr_frames: int = 300  # MODSTREAM_MAX_OCR_FRAMES
    max_audio_seconds: int = 3_600  # MODSTREAM_MAX_AUDIO_SECONDS

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Limits:
        env = os.environ if env is None else env
        values: dict[str, int] = {}
        for field in fields(cls):
            name = f"MODSTREAM_{field.name.upper()}"
            raw = env.get(name)
            if not raw:
                continue
            try:
                value = int(raw)
            except ValueError:
                raise ValueError(f"{name} must be an integer, got {raw!r}") from None
            if value <= 0:
                raise ValueError(f"{name} must be positive, got {value}")
            values[field.name] = value
        return cls(**values)
