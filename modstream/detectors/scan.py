"""One scan batch: requests in, detector.results out, with retries and permanent failures.

Pure apart from the two things it is given: the detector (one model call per batch) and a
media loader. A request is `{request_id, content_id, content_version, detector, segment_id,
modality, mime_type, text | media_ref, priority (live|backfill), attempt, deadline_ts, ts}`.
- media that cannot be loaded (an I/O error) is transient: retried with exponential backoff
  and jitter up to `max_attempts` and the request's overall `deadline_ts`, then a result with
  status `timeout` (UNKNOWN for the policy, never safe);
- media that is hostile (modstream/detectors/media.py), or loads but cannot be scanned (corrupt,
unsupported,
  over a bound), is permanent: status `error` and a DLQ record of class `permanent`, no retry;
  so is anything unforeseen that one request's loading or scoring throws (a batch whose model
  call throws is scored again one request at a time, so only the request at fault fails);
- everything else is scored in one `detect` call and comes out `ok`.

Results are stamped in the upload's time frame (docs/moderation.md, "Time"): `ts` is the
request's `ts` (its upload's event time) plus the time this scanner spent on the request, from
the first attempt it started to its answer. Time a request waited in a queue (a backlog, a
scanner catching up) is not the detector's: a result is on time when the detector answered
within its deadline once asked, however late the request reached it. The retry budget is the
same deadline (`deadline_ts - ts`), counted from the first attempt.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from modstream.detectors.detector import Detector, Evidence, Item, MediaError, Scored
from modstream.detectors.language import Language

LOG = logging.getLogger("modstream.udfs")
MAX_ATTEMPTS = 4
BASE_BACKOFF_MS = 100
MAX_BACKOFF_MS = 5_000


@dataclass
class ScanOutcome:
    results: list[dict[str, Any]] = field(default_factory=list)
    retries: list[tuple[dict[str, Any], int]] = field(default_factory=list)  # (request, due)
    permanent: list[tuple[dict[str, Any], str]] = field(default_factory=list)  # (request, why)


def order(requests: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Live before backfill; within a priority, oldest first."""
    return sorted(requests, key=lambda r: (r.get("priority") != "live", r.get("ts", 0)))


def backoff_ms(attempt: int, rng: random.Random | None = None) -> int:
    ceiling = min(MAX_BACKOFF_MS, BASE_BACKOFF_MS * 2 ** max(0, attempt - 1))
    return int((rng or random).uniform(ceiling / 2, ceiling))


def started_at(request: dict[str, Any], now: int) -> int:
    """When this scanner first started on the request (kept across retries)."""
    return int(request.get("started", now))


def result_record(
    request: dict[str, Any], model_version: str, status: str, now: int,
    scores: dict[str, float] | None = None, *, started: int | None = None,
    inference_ms: int | None = None,
    findings: Sequence[dict[str, Any]] = (),
    language: Language | None = None,
) -> dict[str, Any]:  # fmt: skip
    """The answer made at processing time `now` to a request started at `started` (default:
    its first attempt, else `now`): its event time is the upload's `ts` plus the scanner's own
    time on it. `inference_ms`: its share of its batch's model call (the cost per decision,
    issue 29 item 5; docs/contract-notes.md). `findings` (readers of text in media) is an extra
    field, absent when empty; so are `language` and `language_confidence`, the language of the
    text the detector read (modstream/detectors/language.py), absent when it named none."""
    begun = started if started is not None else started_at(request, now)
    record: dict[str, Any] = {
        "event_id": f"scan-{request['request_id']}-{model_version}-{status}",
        "content_id": request["content_id"],
        "content_version": request["content_version"],
        "detector": request["detector"],
        "model_version": model_version,
        "segment_id": request.get("segment_id"),
        "status": status,
        "ts": int(request["ts"]) + max(0, now - begun),
    }
    if scores is not None:
        record["scores"] = scores
    if inference_ms is not None:
        record["inference_ms"] = inference_ms
    if findings:
        record["findings"] = list(findings)
    if language is not None:
        record["language"] = language.code
        record["language_confidence"] = language.confidence
    if request.get("media_ref"):
        record["evidence_ref"] = request["media_ref"]
    return record


def scan_batch(
    detector: Detector,
    requests: Sequence[dict[str, Any]],
    load: Callable[[dict[str, Any]], Item],
    now: int,
    *,
    max_attempts: int = MAX_ATTEMPTS,
    rng: random.Random | None = None,
    clock: Callable[[], int] | None = None,
    keep_raw: Callable[[dict[str, Any], Any], str] | None = None,
) -> ScanOutcome:
    """Every request answered (ok, error, timeout) or retried; never raises for one request's
    sake: whatever one request's media or scoring throws fails that request only. `now` is
    when the batch started; `clock` (default: `now`) tells when the model answered. `keep_raw`
    (detectors/raw_output.py) keeps each ok result's raw output (`raw_output_ref`)."""
    outcome = ScanOutcome()
    items: list[Item] = []
    loaded: list[dict[str, Any]] = []
    for request in requests:
        try:
            items.append(load(request))
            loaded.append(request)
        except MediaError as error:
            _permanent(outcome, detector, request, str(error), now)
        except OSError:
            attempt = int(request.get("attempt", 1))
            due = now + backoff_ms(attempt, rng)
            if attempt >= max_attempts or due - started_at(request, now) > _budget(request):
                outcome.results.append(
                    result_record(request, detector.model_version, "timeout", now)
                )
            else:
                retry = {**request, "attempt": attempt + 1, "started": started_at(request, now)}
                outcome.retries.append((retry, due))
        except Exception as error:  # hostile input the loader did not foresee
            _permanent(outcome, detector, request, f"media does not load ({_kind(error)})", now)
    if items:
        called = clock() if clock is not None else now
        scores = detect_each(detector, items)
        answered = clock() if clock is not None else now
        share_ms = round(max(0, answered - called) / len(items))  # each item's share of the call
        for request, scored in zip(loaded, scores, strict=True):
            begun = started_at(request, now)
            if isinstance(scored, MediaError):
                _permanent(outcome, detector, request, str(scored), answered, begun)
                continue
            evidence = scored if isinstance(scored, Evidence) else Evidence(scored)
            record = result_record(
                request,
                detector.model_version,
                "ok",
                answered,
                evidence.scores,
                started=begun,
                inference_ms=share_ms,
                findings=evidence.findings,
                language=evidence.language,
            )
            outcome.results.append(_with_raw(keep_raw, record, evidence))
    return outcome


def _with_raw(
    keep_raw: Callable[[dict[str, Any], Any], str] | None,
    record: dict[str, Any],
    evidence: Evidence,
) -> dict[str, Any]:
    """The result, its detector's raw output (its scores where it hands none) kept and
    referenced when there is a store; a store that fails (a full disk) costs the reference,
    never the result."""
    if keep_raw is None:
        return record
    raw = evidence.raw if evidence.raw is not None else {"scores": evidence.scores}
    try:
        record["raw_output_ref"] = keep_raw(record, raw)
    except OSError as error:
        LOG.warning("scan: raw output of %s not kept (%s)", record["detector"], _kind(error))
    return record


def _budget(request: dict[str, Any]) -> int:
    """The detector's deadline for this request (ms), which also bounds its retries."""
    deadline = request.get("deadline_ts")
    return int(deadline) - int(request["ts"]) if deadline is not None else 1 << 62


def detect_each(detector: Detector, items: Sequence[Item]) -> list[Scored]:
    """One model call for the batch; if it throws, each item alone, so an item that breaks the
    detector (a decoder bug, a NaN score, memory) fails itself and not its batch."""
    try:
        scored = list(detector.detect(items))
        if len(scored) == len(items):
            return scored
        failure = f"{len(scored)} results for {len(items)} items"
    except Exception as error:
        failure = _kind(error)
    LOG.warning(
        "scan: %s failed on a batch of %d (%s): one by one", detector.name, len(items), failure
    )
    if len(items) == 1:
        return [MediaError(f"{detector.name} failed on this item ({failure})")]
    results: list[Scored] = []
    for item in items:
        one: Scored
        try:
            [one] = detector.detect([item])
        except Exception as error:
            one = MediaError(f"{detector.name} failed on this item ({_kind(error)})")
        results.append(one)
    return results


def _permanent(
    outcome: ScanOutcome,
    detector: Detector,
    request: dict[str, Any],
    why: str,
    now: int,
    started: int | None = None,
) -> None:
    outcome.permanent.append((request, why))
    outcome.results.append(
        result_record(request, detector.model_version, "error", now, started=started)
    )


def _kind(error: BaseException) -> str:
    return type(error).__name__
