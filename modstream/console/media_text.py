"""What a version's media says, for its reviewer: the lines OCR read and the stretches of speech
transcribed, with their times and confidences, and the moments of a video the task page shows
a frame of. Pure: the service reads the files and decodes the frames.

The readers (modstream/detectors/ocr_text.py, modstream/detectors/speech_text.py) put no words on
`detector.results`: a finding names a place in the media, never its content (docs/contract-notes.md,
"Findings"). The words are in the raw-output store the scan job keeps privately
(modstream/detectors/raw_output.py, `--raw-output-dir`), named by the result's `raw_output_ref`. The
console follows `detector.results` (signed records only, as the moderation job admits them) and
keeps, per content version, the readers' results that name a kept file or a time (`ReaderResults`);
the task page reads the files of the version under review (`text_lines`) and shows a video frame at
each reader's best finding (`moments`, from the result's `finding_ms`).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any
from urllib.parse import urlparse

from modstream.contract.detector import first_finding_ms

READERS = frozenset({"ocr_text", "speech_text"})
MAX_RESULTS = 100_000  # reader results the console holds, the newest (about 300 bytes each)
MAX_LINES = 500  # readings shown per kept file: a page bound whatever the media holds
MAX_TEXT = 2_000  # characters of one reading shown
MAX_MOMENTS = 8  # video frames a task page shows
# A video evidence file's demuxer comes from its name (the task does not carry the upload's
# MIME type); modstream/detectors/video.py opens the file with the format that type names, never a
# probe.
VIDEO_TYPES = {
    ".mp4": "video/mp4",
    ".m4v": "video/x-m4v",
    ".mov": "video/quicktime",
    ".3gp": "video/3gpp",
    ".webm": "video/webm",
    ".mkv": "video/x-matroska",
    ".avi": "video/x-msvideo",
    ".mpg": "video/mpeg",
    ".mpeg": "video/mpeg",
    ".ts": "video/mp2t",
    ".ogv": "video/ogg",
    ".flv": "video/x-flv",
}


@dataclass(frozen=True)
class ReaderResult:
    """A reader's `ok` result as the console keeps it: where its words are kept and when in
    the media its best finding is."""

    event_id: str
    detector: str
    content_id: str
    content_version: int
    segment_id: int | None
    evidence_ref: str | None
    raw_output_ref: str | None
    finding_ms: int | None


def reader_result(record: Mapping[str, Any]) -> ReaderResult | None:
    """A detector.results record (admitted: schema and signature) as the console keeps it; None
    for another detector's, a result that is not `ok`, or one with neither a file nor a time."""
    if record.get("detector") not in READERS or record.get("status") != "ok":
        return None
    raw_ref = record.get("raw_output_ref")
    raw_ref = raw_ref if isinstance(raw_ref, str) and raw_ref else None
    finding_ms = first_finding_ms(record.get("findings"))
    if raw_ref is None and finding_ms is None:
        return None
    return ReaderResult(
        event_id=str(record["event_id"]),
        detector=str(record["detector"]),
        content_id=str(record["content_id"]),
        content_version=int(record["content_version"]),
        segment_id=record.get("segment_id"),
        evidence_ref=record.get("evidence_ref"),
        raw_output_ref=raw_ref,
        finding_ms=finding_ms,
    )


class ReaderResults:
    """The newest `limit` reader results, by content version; a result delivered again (the
    same `event_id`) replaces the earlier copy."""

    def __init__(self, limit: int = MAX_RESULTS) -> None:
        self.limit = limit
        self._results: OrderedDict[str, ReaderResult] = OrderedDict()
        self._by_version: dict[tuple[str, int], dict[str, ReaderResult]] = {}

    def __len__(self) -> int:
        return len(self._results)

    def add(self, result: ReaderResult) -> None:
        self._forget(result.event_id)
        self._results[result.event_id] = result
        version = (result.content_id, result.content_version)
        self._by_version.setdefault(version, {})[result.event_id] = result
        while len(self._results) > self.limit:
            self._forget(next(iter(self._results)))

    def of(self, content_id: str, content_version: int) -> list[ReaderResult]:
        """The version's reader results: by detector, segment and event id."""
        held = self._by_version.get((content_id, content_version), {})
        return sorted(
            held.values(), key=lambda r: (r.detector, r.segment_id or 0, r.event_id)
        )  # fmt: skip

    def _forget(self, event_id: str) -> None:
        old = self._results.pop(event_id, None)
        if old is None:
            return
        version = (old.content_id, old.content_version)
        held = self._by_version.get(version, {})
        held.pop(event_id, None)
        if not held:
            self._by_version.pop(version, None)


@dataclass(frozen=True)
class TextLine:
    """One reading: a line OCR read (its box; in a video, its frame's time) or a stretch of
    speech (its time range), with the reader's confidence in [0, 1]."""

    detector: str
    text: str
    confidence: float
    start_ms: int | None = None  # speech: the utterance's start; OCR in a video: the frame's
    end_ms: int | None = None  # speech only
    box: tuple[int, int, int, int] | None = None  # OCR: left, top, right, bottom

    @property
    def when(self) -> str:
        """The time as the page shows it: a range for speech, a moment for a frame, nothing
        for a still image."""
        if self.start_ms is None:
            return ""
        if self.end_ms is None:
            return clock(self.start_ms)
        return f"{clock(self.start_ms)}–{clock(self.end_ms)}"


def clock(ms: int) -> str:
    """ms from the start of the file as `m:ss.mmm`."""
    minutes, rest = divmod(max(0, ms), 60_000)
    return f"{minutes}:{rest // 1000:02d}.{rest % 1000:03d}"


def text_lines(result: ReaderResult, body: Mapping[str, Any]) -> list[TextLine]:
    """The readings of the file `result` names, in time order. The file must be the one kept
    for this result (its `event_id` and `detector`): a reference never shows another
    version's words. ValueError when it is not; a reading of another shape is skipped."""
    if body.get("event_id") != result.event_id or body.get("detector") != result.detector:
        raise ValueError(f"raw output {result.raw_output_ref}: kept for another result")
    readings = body.get("raw")
    if not isinstance(readings, list):
        raise ValueError(f"raw output {result.raw_output_ref}: no list of readings")
    lines = [
        line for reading in readings[:MAX_LINES] if (line := _line(result.detector, reading))
    ]  # fmt: skip
    return sorted(lines, key=lambda line: (line.start_ms is not None, line.start_ms or 0))


def _line(detector: str, reading: Any) -> TextLine | None:
    if not isinstance(reading, Mapping) or not isinstance(reading.get("text"), str):
        return None
    confidence = reading.get("confidence")
    if not isinstance(confidence, int | float) or not 0.0 <= float(confidence) <= 1.0:
        return None
    if detector == "speech_text":
        start, end = _ms(reading.get("start_ms")), _ms(reading.get("end_ms"))
    else:
        start, end = _ms(reading.get("frame_ms")), None
    box = reading.get("box")
    corners = (
        tuple(int(v) for v in box)
        if isinstance(box, list) and len(box) == 4 and all(isinstance(v, int) for v in box)
        else None
    )
    return TextLine(
        detector, reading["text"][:MAX_TEXT], round(float(confidence), 4), start, end,
        corners,  # type: ignore[arg-type]
    )  # fmt: skip


def _ms(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


@dataclass(frozen=True)
class Moment:
    """A video frame the page shows: evidence `index` of the task (its file) at `at_ms`, the
    best finding of `detectors`."""

    index: int
    evidence_ref: str
    at_ms: int
    detectors: tuple[str, ...]

    @property
    def when(self) -> str:
        return clock(self.at_ms)

    @property
    def fragment_ref(self) -> str:
        """The frame as an access-log reference (a Media Fragments URI: `#t=` seconds)."""
        return f"{self.evidence_ref}#t={self.at_ms / 1000:.3f}"


def video_type(ref: str) -> str | None:
    """The MIME type a `file://` video reference's name says, or None (not a video file)."""
    parsed = urlparse(ref)
    if parsed.scheme != "file":
        return None
    return VIDEO_TYPES.get(PurePosixPath(parsed.path).suffix.lower())


def moments(results: Iterable[ReaderResult], evidence: Sequence[str]) -> list[Moment]:
    """Each reader's best finding in a video file of the task's evidence, each (file, time)
    once, in time order, at most `MAX_MOMENTS`; `index` is the file's first place in the
    task's evidence."""
    places: dict[str, int] = {}
    for index, ref in enumerate(evidence):
        places.setdefault(str(ref), index)
    found: dict[tuple[int, int], set[str]] = {}
    for result in results:
        cited = result.evidence_ref
        if result.finding_ms is None or cited not in places or not video_type(cited or ""):
            continue
        found.setdefault((places[str(cited)], result.finding_ms), set()).add(result.detector)
    ordered = sorted(found.items(), key=lambda item: (item[0][1], item[0][0]))
    return [
        Moment(index, str(evidence[index]), at_ms, tuple(sorted(detectors)))
        for (index, at_ms), detectors in ordered[:MAX_MOMENTS]
    ]


def moment_at(moments_shown: Sequence[Moment], index: int, at_ms: int) -> Moment | None:
    """The moment a frame request names, when it is one the page shows."""
    return next((m for m in moments_shown if (m.index, m.at_ms) == (index, at_ms)), None)
