"""Score drift: the population-stability index (PSI) of a detector's score distribution, per
detector, model version and score label, over fixed buckets of [0, 1].

One definition serves both sides (docs/OPERATIONS.md, "Score drift"): the moderation job counts
every admitted `ok` result's scores into `BUCKETS` (the `detector_scores` counter), Prometheus'
recording rules compute PSI from those counters (deploy/prometheus/alerts.yaml), and the report
and the demo summary compute the same PSI from the archive's or the topic's results with
`psi_by_window`. Fixed buckets, not the reference's deciles, because a counter's buckets must be
known before any reference exists; an empty bucket counts as `EPSILON` of its window, as the
recording rule's `clamp_min` does, so a bucket that empties or fills adds a large, finite term.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

BUCKET_COUNT = 10
# Lower bounds in hundredths as labels: "0" holds [0, 0.1), "10" [0.1, 0.2), ..., "90" holds
# [0.9, 1.0] (1.0 included). Digits only: Flink's Prometheus reporter turns a label value's
# other characters (the dot of "0.3") into "_".
BUCKETS: tuple[str, ...] = tuple(str(index * 100 // BUCKET_COUNT) for index in range(BUCKET_COUNT))
EPSILON = 1e-4  # the share an empty bucket is taken to have (the rule's clamp_min)
DRIFTED = 0.2  # PSI above this is a shift worth a look (the alert's threshold)
# Fewer scores than this in either window: PSI is mostly noise, not reported. Two samples of
# one distribution give PSI of about (BUCKET_COUNT - 1) * (1/n_before + 1/n_now) by chance
# (`noise`): 0.03 at 300 scores an hour against a day, far under DRIFTED.
MIN_RESULTS = 300

Series = tuple[str, str, str]  # (detector, model_version, score label)


def bucket(score: float) -> str:
    """The bucket of a score in [0, 1] (the contract's Probability); 1.0 is in the top one."""
    index = min(BUCKET_COUNT - 1, max(0, math.floor(score * BUCKET_COUNT)))
    return BUCKETS[index]


def shares(counts: Mapping[str, int]) -> dict[str, float]:
    """Each bucket's share of the counts, at least EPSILON; empty when there are none."""
    total = sum(counts.get(name, 0) for name in BUCKETS)
    if total <= 0:
        return {}
    return {name: max(counts.get(name, 0) / total, EPSILON) for name in BUCKETS}


def psi(reference: Mapping[str, int], current: Mapping[str, int]) -> float | None:
    """sum over buckets of (current - reference) * ln(current / reference), on shares; None
    when either window has no scores. 0 for the same distribution; above 0.2 by convention a
    shift, 0.1 to 0.2 a moderate one."""
    before, now = shares(reference), shares(current)
    if not before or not now:
        return None
    return sum((now[name] - before[name]) * math.log(now[name] / before[name]) for name in BUCKETS)


def noise(reference_results: int, results: int) -> float:
    """The PSI two samples of one distribution give on average (the chi-square approximation:
    PSI is about a chi-square of BUCKET_COUNT - 1 degrees of freedom scaled by the two sizes'
    reciprocals): a PSI near it is chance, not drift."""
    return (BUCKET_COUNT - 1) * (1 / max(1, reference_results) + 1 / max(1, results))


def scored(result: Mapping[str, Any]) -> Iterable[tuple[Series, str]]:
    """(series, bucket) of each score of a detector.results record (a loaded JSON object)."""
    return scored_values(
        str(result.get("detector")),
        str(result.get("model_version")),
        result.get("status"),
        result.get("scores"),
    )


def scored_values(
    detector: str, model_version: str, status: Any, scores: Any
) -> Iterable[tuple[Series, str]]:
    """(series, bucket) of each score of a result with status ok; nothing for timeouts, errors
    or a result without scores."""
    if status != "ok" or not isinstance(scores, Mapping):
        return
    for label, value in scores.items():
        if isinstance(value, int | float) and not isinstance(value, bool) and 0 <= value <= 1:
            yield (detector, model_version, str(label)), bucket(float(value))


@dataclass(frozen=True)
class DriftPoint:
    """PSI of one series' window [start_ts, start_ts + window) against its reference window
    [start_ts - reference, start_ts)."""

    detector: str
    model_version: str
    label: str
    start_ts: int
    psi: float
    results: int  # scores in the window
    reference_results: int  # scores in its reference window

    @property
    def noise(self) -> float:
        """The PSI these counts give by chance alone (`noise`)."""
        return noise(self.reference_results, self.results)


def psi_by_window(
    results: Iterable[Mapping[str, Any]],
    window_ms: int,
    reference_ms: int,
    min_results: int = MIN_RESULTS,
    origin_ts: int = 0,
) -> list[DriftPoint]:
    """PSI per series and window of `window_ms` (by the results' `ts`, from `origin_ts` on)
    against the `reference_ms` just before it, as the recording rule compares the last hour
    with the day before it; windows whose own or reference scores are fewer than `min_results`
    are left out."""
    counts: dict[Series, dict[int, Counter[str]]] = {}
    for result in results:
        ts = result.get("ts")
        if not isinstance(ts, int):
            continue
        window = (ts - origin_ts) // window_ms * window_ms + origin_ts
        for series, name in scored(result):
            counts.setdefault(series, {}).setdefault(window, Counter())[name] += 1
    points = []
    for series, windows in sorted(counts.items()):
        for start in sorted(windows):
            reference: Counter[str] = Counter()
            for earlier, found in windows.items():
                if start - reference_ms <= earlier < start:
                    reference.update(found)
            current = windows[start]
            if min(current.total(), reference.total()) < min_results:
                continue
            value = psi(reference, current)
            if value is not None:
                points.append(DriftPoint(*series, start, value, current.total(), reference.total()))
    return points


HOUR_MS = 3_600_000
DAY_MS = 24 * HOUR_MS
YOUNG_WINDOWS = 4  # a young archive's results are cut into this many windows
YOUNG_MIN_RESULTS = 20


def windows_for(span_ms: int) -> tuple[int, int, int]:
    """(window_ms, reference_ms, min_results) for results spanning `span_ms`: the alert's hour
    against the day before once there is more than a day, else (a young deployment, a demo)
    the span cut in YOUNG_WINDOWS, each against everything before it, on fewer scores."""
    if span_ms > DAY_MS + HOUR_MS:
        return HOUR_MS, DAY_MS, MIN_RESULTS
    window = max(1, -(-(span_ms + 1) // YOUNG_WINDOWS))
    return window, span_ms + 1, YOUNG_MIN_RESULTS


def drift_points(results: Sequence[Mapping[str, Any]]) -> list[DriftPoint]:
    """PSI per series and window at the scale `windows_for` picks for these results' span."""
    stamps = [result["ts"] for result in results if isinstance(result.get("ts"), int)]
    if not stamps:
        return []
    window, reference, fewest = windows_for(max(stamps) - min(stamps))
    origin = 0 if window == HOUR_MS else min(stamps)  # whole hours, or the young span's start
    return psi_by_window(results, window, reference, fewest, origin)
