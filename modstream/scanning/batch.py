"""The scan job's batch handling, apart from Flink: raw rows in, detector.results, DLQ rows and
retries out. A model worker thread runs `handle_safely` on each batch the scan operator
(modstream/jobs/scan/job.py) hands over; the detectors, the media reader and the clock are given to
it.

Decoding never throws (a bad row is a DLQ row `schema`); a batch that throws is handled again
one row at a time, and a request that throws alone is answered `error` with a DLQ row
`permanent` (`refuse`): one record never stops the job.
"""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from modstream.contract import SchemaError, dead_letter, parse
from modstream.core.limits import Limits
from modstream.detectors import scan
from modstream.detectors.detector import Detector, Item, MediaError
from modstream.detectors.media import read_media
from modstream.trust import signing
from modstream.trust.signing import Keyring

LOG = logging.getLogger("modstream.scan")
Clock = Callable[[], int]


class ScanSettings(Protocol):
    """What batch handling reads of the scan job's config (modstream/jobs/scan/job.py:
    ScanConfig)."""

    @property
    def max_attempts(self) -> int: ...
    @property
    def media_root(self) -> str: ...
    @property
    def limits(self) -> Limits: ...
    @property
    def keyring(self) -> Keyring: ...
    def physical(self, name: str) -> str: ...
    def contract(self, physical: str) -> str: ...


def load_media(
    request: dict[str, Any],
    root: Path | str,
    limits: Limits,
    read: Callable[[str, Path, Limits, int | None], bytes] = read_media,
) -> Item:
    """The request's text, or its `file://` media read within bounds (modstream/detectors/media.py):
    a hostile reference or a version over `max_segments` is a MediaError (permanent), an ordinary
    I/O failure an OSError (retried)."""
    segments = int(request.get("segments") or 1)
    segment = request.get("segment_id")
    if segments > limits.max_segments:
        raise MediaError(f"segments: {segments}, over the {limits.max_segments} limit")
    if segment is not None and segment >= segments:
        raise MediaError(f"segment_id: {segment} of {segments}")
    if request.get("text") is not None:
        return Item(text=request["text"], mime_type=request.get("mime_type"))
    ref = request.get("media_ref")
    if not ref:
        raise MediaError("no text and no media_ref")
    data = read(ref, Path(root), limits, request.get("size_bytes"))
    return Item(
        data=data,
        mime_type=request.get("mime_type"),
        ref=ref,
        segment=segment,
        segments=segments,
        sample_ms=request.get("sample_ms"),
    )


@dataclass
class Handled:
    """What one batch (or one round of due retries) produced: sink rows, and the requests to
    try again at a processing time."""

    topics: list[str] = field(default_factory=list)
    keys: list[str | None] = field(default_factory=list)
    values: list[str] = field(default_factory=list)
    retries: list[tuple[dict[str, Any], int]] = field(default_factory=list)

    def emit(self, topic: str, key: str | None, value: str) -> None:
        self.topics.append(topic)
        self.keys.append(key)
        self.values.append(value)

    def extend(self, other: Handled) -> None:
        self.topics += other.topics
        self.keys += other.keys
        self.values += other.values
        self.retries += other.retries


def handle_batch(
    config: ScanSettings,
    entries: Iterable[tuple[str, str | None, str | None]],
    now: int,
    scanners: Callable[[str], Detector],
    clock: Clock | None = None,
) -> Handled:
    """A batch of raw rows `(physical topic, key, value)`: invalid ones dead-lettered, the rest
    scanned. Touches no Flink API, so it runs in a model worker thread. `clock` tells when a
    model answered (default: `now`)."""
    handled = Handled()
    requests: list[dict[str, Any]] = []
    for physical, key, raw in entries:
        request = decode_row(config, physical, key, raw, now, handled)
        if request is not None:
            requests.append(request)
    scan_requests(config, requests, now, handled, scanners, clock=clock)
    return handled


def decode_row(
    config: ScanSettings,
    physical: str,
    key: str | None,
    raw: str | None,
    now: int,
    handled: Handled,
) -> dict[str, Any] | None:
    """One row as a validated request, or None and a DLQ row `schema`: whatever the row is
    (not JSON, nested deep, wrong types), decoding it never throws."""
    try:
        record = parse(config.contract(physical), raw or "")
        request: dict[str, Any] = record.model_dump()
        return request
    except Exception as error:  # SchemaError, or anything the validator did not foresee
        reason: Any = error if isinstance(error, SchemaError) else unforeseen(error)
        letter = dead_letter(physical, key, raw, reason, ts=now, operator="scan")
        handled.emit(config.physical("moderation.dlq"), key, letter.model_dump_json())
        return None


def handle_safely(
    config: ScanSettings,
    entries: Sequence[tuple[str, str | None, str | None]],
    now: int,
    scanners: Callable[[str], Detector],
    clock: Clock | None = None,
) -> Handled:
    """`handle_batch`, and if it throws, each row alone; a request that throws alone is
    answered `error` and dead-lettered `permanent` (`refuse`). So a batch (a fresh one, or one
    a restored checkpoint held in flight) never fails the operator and never sends the job
    into a restart loop: it fails per request."""
    try:
        return handle_batch(config, entries, now, scanners, clock)
    except Exception as error:
        LOG.warning(
            "scan: a batch of %d failed (%s): one row at a time", len(entries), error_kind(error)
        )
    handled = Handled()
    for physical, key, raw in entries:
        try:
            one = handle_batch(config, [(physical, key, raw)], now, scanners, clock)
        except Exception as error:
            one = Handled()
            request = decode_row(config, physical, key, raw, now, one)
            if request is not None:
                refuse(config, request, unforeseen(error), now, one, scanners, clock)
        handled.extend(one)
    return handled


def retry_safely(
    config: ScanSettings,
    due: list[dict[str, Any]],
    scanners: Callable[[str], Detector],
    clock: Clock,
) -> Handled:
    """Due retries, scanned; if that throws, each alone; one that throws alone is answered
    `error` and dead-lettered `permanent` (never a timer that throws after every restore)."""
    handled = Handled()
    try:
        scan_requests(config, due, clock(), handled, scanners, clock=clock)
        return handled
    except Exception as error:
        LOG.warning("scan: %d retries failed (%s): one at a time", len(due), error_kind(error))
    handled = Handled()
    for request in due:
        one = Handled()
        try:
            scan_requests(config, [request], clock(), one, scanners, clock=clock)
        except Exception as error:
            one = Handled()
            refuse(config, request, unforeseen(error), clock(), one, scanners, clock)
        handled.extend(one)
    return handled


class Refusing:
    """Stands in for a detector on a request whose handling threw: answers `error` for it,
    citing the real detector's model_version, without touching its media again."""

    def __init__(self, real: Detector, why: str) -> None:
        self.name, self.model_version = real.name, real.model_version
        self.modalities, self.labels = real.modalities, real.labels
        self.why = why

    def detect(self, items: Sequence[Item]) -> list[dict[str, float] | MediaError]:
        return [MediaError(self.why) for _ in items]


def refuse(
    config: ScanSettings,
    request: dict[str, Any],
    why: str,
    now: int,
    handled: Handled,
    scanners: Callable[[str], Detector],
    clock: Clock | None = None,
) -> None:
    """A valid request whose handling threw even alone: answered `error` (its version need not
    wait for the deadline) with a DLQ row `permanent`, through the path every result takes;
    if even that throws, the DLQ row alone."""
    one = Handled()
    try:
        scan_requests(
            config, [request], now, one, lambda name: Refusing(scanners(name), why),
            load=lambda _request: Item(), clock=clock,
        )  # fmt: skip
    except Exception:
        one = Handled()
        raw = json.dumps({k: v for k, v in request.items() if k != "text"})
        physical = config.physical(f"scan.requests.{request.get('modality')}")
        letter = dead_letter(
            physical, request.get("content_id"), raw, why, ts=now, error_class="permanent",
            operator="scan",
        )  # fmt: skip
        one.emit(config.physical("moderation.dlq"), letter.key, letter.model_dump_json())
    handled.extend(one)


def answer_timeout(
    config: ScanSettings,
    entries: Sequence[tuple[str, str | None, str | None]],
    now: int,
    scanners: Callable[[str], Detector],
) -> Handled:
    """Raw rows admission shed (modstream/scanning/admission.py): each answered `timeout` now,
    signed like every result, without loading or scoring anything, so the policy's unknown rule
    decides the version at once; a row that does not decode is a DLQ row `schema`, one for a
    detector this job does not serve a DLQ row `permanent`."""
    handled = Handled()
    groups: dict[str, list[dict[str, Any]]] = {}
    for physical, key, raw in entries:
        request = decode_row(config, physical, key, raw, now, handled)
        if request is not None:
            groups.setdefault(request["detector"], []).append(request)
    for name, group in groups.items():
        try:
            version = scanners(name).model_version
        except Exception as error:
            why = str(error) if isinstance(error, KeyError) else unforeseen(error)
            _emit(config, scan.ScanOutcome(permanent=[(r, why) for r in group]), handled)
            continue
        outcome = scan.ScanOutcome(
            results=[scan.result_record(r, version, "timeout", now) for r in group]
        )
        _emit(config, outcome, handled)
    return handled


def error_kind(error: BaseException) -> str:
    return type(error).__name__


def unforeseen(error: BaseException) -> str:
    """A message for an exception nobody raised on purpose: its kind, never its text (which
    may quote the input)."""
    return f"scan: cannot handle this record ({error_kind(error)})"


def scan_requests(
    config: ScanSettings,
    requests: list[dict[str, Any]],
    now: int,
    handled: Handled,
    scanners: Callable[[str], Detector],
    load: Callable[[dict[str, Any]], Item] | None = None,
    clock: Clock | None = None,
) -> None:
    """Valid requests, grouped by their own detector (a batch is keyed by a detector hint
    only), one model call per group: results, DLQ rows and retries into `handled`. A file is
    read once per batch, however many of its requests (segments, detectors) the batch holds."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for request in requests:
        groups.setdefault(request["detector"], []).append(request)
    if load is None:
        read = functools.lru_cache(maxsize=8)(read_media)
        load = functools.partial(
            load_media, root=config.media_root, limits=config.limits, read=read
        )
    for name, group in groups.items():
        outcome = _scan_group(config, name, scan.order(group), now, scanners, load, clock)
        handled.retries.extend(outcome.retries)
        _emit(config, outcome, handled)


def _scan_group(
    config: ScanSettings,
    name: str,
    group: list[dict[str, Any]],
    now: int,
    scanners: Callable[[str], Detector],
    load: Callable[[dict[str, Any]], Item],
    clock: Clock | None,
) -> scan.ScanOutcome:
    """One detector's requests in one model call; a detector this job does not serve, or
    cannot build, fails them all permanently."""
    try:
        scanner = scanners(name)
    except Exception as error:
        why = str(error) if isinstance(error, KeyError) else unforeseen(error)
        return scan.ScanOutcome(permanent=[(r, why) for r in group])
    # The raw output store (modstream/jobs/scan/config.py: ScanConfig.raw_outputs,
    # --raw-output-dir), if any.
    store = getattr(config, "raw_outputs", None)
    return scan.scan_batch(
        scanner,
        group,
        load,
        now,
        max_attempts=config.max_attempts,
        clock=clock,
        keep_raw=store.keep if store is not None else None,
    )


def _emit(config: ScanSettings, outcome: scan.ScanOutcome, handled: Handled) -> None:
    """Results signed with the detector's key; permanent failures as DLQ rows `permanent`."""
    results = config.physical("detector.results")
    for record in outcome.results:
        record = signing.signed("detector.results", record, config.keyring)
        handled.emit(results, record["content_id"], signing.wire_json(record))
    for request, why in outcome.permanent:
        letter = dead_letter(
            config.physical(f"scan.requests.{request['modality']}"),
            request["content_id"],
            json.dumps({k: v for k, v in request.items() if k != "text"}),
            f"scan: {request['detector']} cannot scan this media ({why})",
            ts=request["ts"],
            error_class="permanent",
            attempts=int(request.get("attempt", 1)),
            operator="scan",
        )
        handled.emit(
            config.physical("moderation.dlq"), request["content_id"], letter.model_dump_json()
        )
