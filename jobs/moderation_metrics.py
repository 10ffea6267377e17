"""moderation: what the `Moderate` adapter reports (jobs/metrics.py): decisions by outcome and
trigger, review tasks by queue, detectors a deadline found unknown, fast-gate and completion
latency, and the versions whose evidence is still incomplete (its DLQ rows: Moderate).

Keyed state cannot be listed, so the incomplete versions are an index in this operator
instance's memory (version key -> upload ts), updated as each version is decided. After a
restore it starts empty and is rebuilt as versions are touched again (a new input or one of
their timers), so the pending gauges undercount until then (docs/OPERATIONS.md).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from jobs.metrics import OperatorMetrics
from operators.version_state import Output

# Decision states while evidence is still outstanding (contract: `state`).
INCOMPLETE_STATES = frozenset({"received", "validating", "scanning", "classifying"})
# A version incomplete for longer than this is stuck: its deadline (policy: seconds) has not
# decided it, e.g. because event time stalled.
STUCK_AFTER_MS = 300_000


class ModerationMetrics:
    """The Moderate operator instance's metrics and its index of incomplete versions."""

    def __init__(self, metrics: OperatorMetrics, clock: Callable[[], int]) -> None:
        self.metrics = metrics
        self.clock = clock
        self.pending: dict[str, int] = {}  # version key -> upload ts (ms)
        self._oldest_age = 0
        metrics.gauge("versions_pending", lambda: len(self.pending))
        metrics.gauge("oldest_pending_age_ms", self.oldest_pending_age_ms)
        metrics.gauge("versions_stuck", self.versions_stuck)

    def decided(self, key: str, state: dict[str, Any] | None, outputs: list[Output]) -> None:
        """Count a firing's outputs and move the version in or out of the pending index."""
        content = (state or {}).get("content") or {}
        for topic, _key, record in outputs:
            if topic == "moderation.decisions":
                self._decision(key, content, record)
            elif topic == "review.tasks":
                self.metrics.inc("review_tasks", queue=str(record.get("queue")))
        if state is None or state.get("deleted") or state.get("retired"):
            self.pending.pop(key, None)

    def _decision(self, key: str, content: dict[str, Any], record: dict[str, Any]) -> None:
        self.metrics.inc(
            "decisions", outcome=str(record.get("outcome")), trigger=str(record.get("trigger"))
        )
        upload_ts = int(content.get("ts") or record.get("ts") or 0)
        if record.get("trigger") == "fast_gate":
            self.metrics.observe("fast_gate_latency_ms", max(0, self.clock() - upload_ts))
        completeness = record.get("completeness") or {}
        if record.get("trigger") == "deadline":
            for detector in completeness.get("unknown") or ():
                self.metrics.inc("unknown_evidence", detector=str(detector))
        complete = completeness.get("received", 0) >= completeness.get("required", 0)
        if record.get("state") in INCOMPLETE_STATES and not complete:
            self.pending.setdefault(key, upload_ts)
            return
        if self.pending.pop(key, None) is not None and complete:
            latency = max(0, int(record.get("ts") or 0) - upload_ts)
            modality = str(content.get("modality") or "unknown")
            self.metrics.observe("completion_latency_ms", latency, modality=modality)

    def oldest_pending_age_ms(self) -> int:
        """Read by the reporter's thread: a concurrent change keeps the last value."""
        try:
            oldest = min(self.pending.values(), default=None)
        except RuntimeError:
            return self._oldest_age
        self._oldest_age = 0 if oldest is None else max(0, self.clock() - oldest)
        return self._oldest_age

    def versions_stuck(self) -> int:
        try:
            now = self.clock()
            return sum(1 for ts in list(self.pending.values()) if now - ts > STUCK_AFTER_MS)
        except RuntimeError:
            return 0
