"""The files behind a task page's words and video frames: the raw-output store's kept readings
and the media store's videos, read on the server only (neither store has a public URL).

Separate from `Console` (Kafka and Redis) so that what a page shows of real files is tested
without a broker; `Console` checks the grant and lease first and logs what was read.
"""

from __future__ import annotations

import io
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from modstream.console.media_text import (
    Moment,
    ReaderResult,
    TextLine,
    moments,
    text_lines,
    video_type,
)
from modstream.core.limits import Limits
from modstream.detectors.media import read_media
from modstream.detectors.raw_output import read_kept
from modstream.detectors.video import frame_at

log = logging.getLogger("modstream.console")


@dataclass(frozen=True)
class MediaText:
    """What the task page shows of the version's media: the readings kept in the raw-output
    store in time order, the video moments of the readers' findings, the kept files it read
    (`read`, for the access log) and those it could not (`missing`: no store configured, or
    deleted by its retention), and whether the console has caught up with detector.results
    (`complete`)."""

    lines: list[TextLine]
    moments: list[Moment]
    read: list[str]
    missing: list[str]
    complete: bool = True


@dataclass(frozen=True)
class KeptMedia:
    media_root: Path
    raw_output_dir: Path | None  # the scan job's --raw-output-dir; None: words not shown
    limits: Limits

    def media_text(
        self, results: Sequence[ReaderResult], evidence: Sequence[str], complete: bool = True
    ) -> MediaText:
        """The readings of each result's kept file (a file that is not the result's, or is
        gone, is listed as missing, never shown) and the moments of the task's videos."""
        lines: list[TextLine] = []
        read: list[str] = []
        missing: list[str] = []
        for result in results:
            ref = result.raw_output_ref
            if ref is None:
                continue
            if self.raw_output_dir is None:
                missing.append(ref)
                continue
            try:
                lines += text_lines(result, read_kept(self.raw_output_dir, ref))
            except (OSError, ValueError) as error:
                log.warning("console: raw output %s not shown (%s)", ref, type(error).__name__)
                missing.append(ref)
                continue
            read.append(ref)
        lines.sort(key=lambda line: (line.start_ms is not None, line.start_ms or 0))
        return MediaText(lines, moments(results, evidence), read, missing, complete)

    def frame(self, moment: Moment) -> bytes:
        """The video frame at `moment` as a PNG, the file read with the scan job's hostile-media
        checks and decoded within its bounds (MediaError or OSError otherwise)."""
        data = read_media(moment.evidence_ref, self.media_root, self.limits)
        image = frame_at(data, video_type(moment.evidence_ref), moment.at_ms, self.limits)
        out = io.BytesIO()
        image.convert("RGB").save(out, format="PNG")
        return out.getvalue()
