"""moderation: what the `Moderate` adapter reports (modstream/jobs/metrics.py): decisions by outcome
and trigger, review tasks by queue, detectors a deadline found unknown, fast-gate and completion
latency, the versions whose evidence is still incomplete, and the oldest version whose deadline or
provisional expiry was reached and is still waiting to be decided (its DLQ rows: Moderate).

Keyed state cannot be listed, so the incomplete versions are an index in this operator
instance's memory (version key -> the processing time it was first decided incomplete),
updated as each version is decided. Ages count from then, not from the upload's `ts`, so a
backfill of old uploads (or the demo's back-dated workload) is not "stuck" at once. After a
restore it starts empty and is rebuilt as versions are touched again (a new input or one of
their timers), so the pending gauges undercount until then (docs/OPERATIONS.md). The overdue
index is the same kind: version key -> (the event time its waiting rule decides at, the
processing time it was first seen waiting), from `timers.overdue_since` after each firing;
after a restore it is rebuilt as the waiting versions' timers fire.
The quality counters (modstream/review/quality.py: appeals, their results, human reviews against the
model) need no index: what a firing adds to them is in its outputs, and the decision in force
before it is read from the stored state, only for a review or appeal decision. Second reviews
compared (modstream/review/second_review.py) come with the step's result, not its outputs
(`compared`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from modstream.contract.workflow import WORKFLOW_VERSION
from modstream.core import native
from modstream.jobs.metrics import OperatorMetrics
from modstream.moderation import language, state_schema
from modstream.moderation.state import Agreement, Content, Output, VersionState
from modstream.moderation.step import overdue_since
from modstream.review import agreement, quality

# Decision states while evidence is still outstanding (contract: `state`).
INCOMPLETE_STATES = frozenset({"received", "validating", "scanning", "classifying"})
# A version incomplete for longer than this is stuck: its deadline (policy: seconds) has not
# decided it, e.g. because event time stalled.
STUCK_AFTER_MS = 300_000
# The pending gauges are computed again at most this often (a pass over the index).
REFRESH_MS = 1_000
_WORKFLOW = str(WORKFLOW_VERSION)


class ModerationMetrics:
    """The Moderate operator instance's metrics and its index of incomplete versions."""

    def __init__(self, metrics: OperatorMetrics, clock: Callable[[], int]) -> None:
        self.metrics = metrics
        self.clock = clock
        self.pending: dict[str, int] = {}  # version key -> first decided incomplete (ms)
        # version key -> (event time its reached rule decides at, first seen waiting (ms))
        self.overdue: dict[str, tuple[int, int]] = {}
        self.event_time: int | None = None  # the newest firing's ts: the operator's event time
        self._refreshed_at: int | None = None
        self.refresh()
        # Which per-version code this instance runs (modstream/core/native.py), set once.
        metrics.set("step_compiled", 1 if native.in_use() == "compiled" else 0)

    def decided(
        self,
        key: str,
        state: VersionState | None,
        outputs: list[Output],
        fired_at: int | None = None,
        earlier: Callable[[], quality.InForce | None] = lambda: None,
    ) -> None:
        """Count a firing's outputs and move the version in or out of the pending and overdue
        indexes. `fired_at`: the firing's event time (an input's or a timer's ts); the newest
        seen stands for the operator's event time, without a call into Java to ask for it.
        `earlier`: the decision in force before the firing (`in_force` of the stored state)."""
        if fired_at is not None and (self.event_time is None or fired_at > self.event_time):
            self.event_time = fired_at
        self._overdue(key, state)
        content = state.content if state is not None else None
        may_count = False
        for topic, _key, record in outputs:
            if topic == "moderation.decisions":
                self._decision(key, content, record)
            elif topic == "review.tasks":
                self.metrics.add("review_tasks", (str(record.get("queue")),))
            may_count = may_count or may_count_for_quality(topic, record)
        if may_count:
            slice_of = functools.partial(quality_slice, state)  # read only when one counts
            for name, labels in quality.counted(outputs, slice_of, earlier):
                self.metrics.inc(name, 1, **labels)
        if state is None or state.deleted or state.retired:
            self.pending.pop(key, None)
        self.refresh()

    def compared(self, agreements: list[Agreement]) -> None:
        """Count each second review against its first, per queue and reviewer pair and both
        outcomes (modstream/review/agreement.py turns these counts into Cohen's kappa)."""
        for compared in agreements:
            named, outcome_a, outcome_b = agreement.pair(
                compared.first_reviewer,
                compared.second_reviewer,
                compared.first_outcome,
                compared.second_outcome,
            )
            self.metrics.inc(
                "second_reviews",
                1,
                queue=compared.queue,
                pair=named,
                outcome_a=outcome_a,
                outcome_b=outcome_b,
                sampled=str(compared.sampled).lower(),
            )

    def read_results(self, results: list[tuple[str, int]]) -> None:
        """Count the detector results a firing read, (detector, inference_ms) each, under the
        job's workflow version: what cost per decision divides (docs/OPERATIONS.md)."""
        metrics = self.metrics
        for detector, inference_ms in results:
            values = (_WORKFLOW, detector)  # the two metrics' labels, in METRICS' order
            metrics.add("workflow_detector_results", values)
            if inference_ms:
                metrics.add("workflow_inference_ms", values, inference_ms)

    def _decision(self, key: str, content: Content | None, record: dict[str, Any]) -> None:
        trigger = str(record.get("trigger"))
        metrics = self.metrics
        # Label values in each metric's own order (METRICS: outcome, trigger; policy_version,
        # workflow_version, trigger).
        metrics.add("decisions", (str(record.get("outcome")), trigger))
        metrics.add(
            "workflow_decisions",
            (str(record.get("policy_version")), str(record.get("workflow_version")), trigger),
        )
        upload_ts = int((content.ts if content else None) or record.get("ts") or 0)
        if record.get("trigger") == "fast_gate":
            self.metrics.observe("fast_gate_latency_ms", max(0, self.clock() - upload_ts))
        completeness = record.get("completeness") or {}
        if record.get("trigger") == "deadline":
            for detector in completeness.get("unknown") or ():
                metrics.add("unknown_evidence", (str(detector),))
        complete = completeness.get("received", 0) >= completeness.get("required", 0)
        if record.get("state") in INCOMPLETE_STATES and not complete:
            self.pending.setdefault(key, self.clock())
            return
        if self.pending.pop(key, None) is not None and complete:
            latency = max(0, int(record.get("ts") or 0) - upload_ts)
            modality = str((content.modality if content else None) or "unknown")
            self.metrics.observe("completion_latency_ms", latency, modality=modality)

    def _overdue(self, key: str, state: VersionState | None) -> None:
        """The version in the overdue index while a reached deadline or expiry waits."""
        since = None if state is None else overdue_since(state)
        if since is None:
            self.overdue.pop(key, None)
        elif self.overdue.get(key, (None,))[0] != since:
            self.overdue[key] = (since, self.clock())

    def refresh(self) -> None:
        """Set the pending gauges (at most every REFRESH_MS: each firing calls it)."""
        now = self.clock()
        if self._refreshed_at is not None and now - self._refreshed_at < REFRESH_MS:
            return
        self._refreshed_at = now
        oldest = min(self.pending.values(), default=now)
        self.metrics.set("versions_pending", len(self.pending))
        self.metrics.set("oldest_pending_age_ms", max(0, now - oldest))
        stuck = sum(1 for ts in self.pending.values() if now - ts > STUCK_AFTER_MS)
        self.metrics.set("versions_stuck", stuck)
        # How far past its deadline (or expiry) the oldest waiting version is: in event time
        # (the operator's event time less the ts it will decide at) and in processing time
        # (since it was first seen waiting). 0 when none waits.
        event = min((since for since, _ in self.overdue.values()), default=None)
        seen = min((at for _, at in self.overdue.values()), default=now)
        behind = 0 if event is None or self.event_time is None else self.event_time - event
        self.metrics.set("overdue_oldest_event_ms", max(0, behind))
        self.metrics.set("overdue_oldest_processing_ms", max(0, now - seen))


def may_count_for_quality(topic: str, record: dict[str, Any]) -> bool:
    """Whether an output may be one `quality.counted` counts (a notification, a task, or a
    human decision): most firings have none, and `counted` is not compiled, so `decided` calls
    it only when one may. A superset of what it counts; a test holds it to `counted`."""
    if topic == "moderation.decisions":
        return record.get("trigger") in quality.HUMAN_TRIGGERS
    return topic == "user.notifications" or topic == "review.tasks"


def quality_slice(state: VersionState | None) -> quality.Slice:
    """The version's surface, region, language and evidence models (`unknown` where not read
    yet)."""
    content = state.content if state is not None else None
    evidence = state.evidence.values() if state is not None else ()
    return quality.Slice(
        surface=content.surface if content is not None else "unknown",
        region=content.region if content is not None else "unknown",
        model_version=quality.models((item.detector, item.model_version) for item in evidence),
        language=language.of_evidence(state.evidence) if state is not None else "unknown",
    )


def in_force(raw_state: str | bytes | None) -> quality.InForce | None:
    """The decision in force in a stored version state (None: never decided)."""
    state = state_schema.load_version(raw_state)
    if state is None or state.last_decision is None:
        return None
    return quality.InForce(outcome=state.last_decision.outcome, human=state.human is not None)
