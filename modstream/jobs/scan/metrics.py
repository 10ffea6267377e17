"""scan: what the `Scan` adapter reports (modstream/jobs/metrics.py): model batch size and inference
time per detector, detector results by status (the unknown rate is timeout + error over all),
retries and DLQ rows by class, and admission: the oldest waiting request's age and the requests
shed, per modality and priority."""

from __future__ import annotations

import json
from collections import deque
from typing import Any

from modstream.jobs import metrics
from modstream.scanning.batch import Handled


def detector_of(key: Any) -> str:
    """The detector of a batching key: Row(detector) or Row("detector/shard")."""
    try:
        name = key[0] if not isinstance(key, str) else key
    except Exception:
        name = key
    return str(name).split("/", 1)[0] or "unknown"


class ScanMetrics:
    def __init__(self, reporter: metrics.OperatorMetrics) -> None:
        self.reporter = reporter
        # (detector, batch size, seconds) from the model worker threads; deque appends are
        # thread-safe, and only this operator's thread talks to Flink's metrics.
        self.timings: deque[tuple[str, int, float]] = deque()
        # (modality, priority) the oldest-waiting gauge was set for: set back to 0 when empty.
        self.waiting_seen: set[tuple[str, str]] = set()

    def waiting(self, modality: str, priority: str, age_ms: int) -> None:
        self.waiting_seen.add((modality, priority))
        self.reporter.set("scan_oldest_waiting_ms", age_ms, modality=modality, priority=priority)

    def timed(self, detector: str, size: int, seconds: float) -> None:
        self.timings.append((detector, size, seconds))

    def report(self, handled: Handled, config: Any) -> None:
        while self.timings:
            detector, size, seconds = self.timings.popleft()
            self.reporter.observe("model_batch_size", size, detector=detector)
            self.reporter.observe("inference_ms", seconds * 1000, detector=detector)
        if handled.retries:
            self.reporter.inc("retries", len(handled.retries))
        results, dlq = config.physical("detector.results"), config.physical("moderation.dlq")
        for topic, value in zip(handled.topics, handled.values, strict=True):
            if topic == results:
                result = _fields(value)
                self.reporter.inc(
                    "detector_results",
                    detector=str(result.get("detector")),
                    status=str(result.get("status")),
                )
            elif topic == dlq:
                self.reporter.inc("dlq", error_class=metrics.error_class(value))


def _fields(value: str) -> dict[str, Any]:
    try:
        record = json.loads(value)
    except Exception:
        return {}
    return record if isinstance(record, dict) else {}
