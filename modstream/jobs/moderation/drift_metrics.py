"""moderation: the score distribution of the evidence the job admits, for score drift
(modstream/scanning/drift.py, docs/OPERATIONS.md "Score drift"). Counted where every
detector.results record enters the job (Decode), so results of any scanner count, the scan job's and
external detectors' alike, once each."""

from __future__ import annotations

import logging
from typing import Any

from modstream.jobs import metrics
from modstream.scanning import drift

LOG = logging.getLogger("modstream.metrics")

# Series (detector, model_version, label) one operator instance counts: the labels come from
# input, so a producer inventing names cannot grow the exported series without bound.
MAX_SERIES = 256


class ScoreCounts:
    """`detector_scores` per (detector, model_version, label, bucket). A series' first score
    registers all of its buckets at 0, so an empty bucket is a series Prometheus reads as 0
    rather than a missing one (the recording rule's shares need every bucket)."""

    def __init__(self, reporter: metrics.OperatorMetrics) -> None:
        self.reporter = reporter
        self.seen: set[drift.Series] = set()

    def count(self, detector: str, model_version: str, status: Any, scores: Any) -> None:
        for series, bucket in drift.scored_values(detector, model_version, status, scores):
            if series not in self.seen:
                if len(self.seen) >= MAX_SERIES:
                    continue
                self.seen.add(series)
                if len(self.seen) == MAX_SERIES:
                    LOG.warning("detector_scores: %d series, no more are counted", MAX_SERIES)
                for empty in drift.BUCKETS:
                    self._inc(series, empty, 0)
            self._inc(series, bucket, 1)

    def _inc(self, series: drift.Series, bucket: str, count: int) -> None:
        # The label values in the metric's order (detector, model_version, label, bucket): no
        # keyword dict per score.
        detector, model_version, label = series
        self.reporter.add("detector_scores", (detector, model_version, label, bucket), count)
