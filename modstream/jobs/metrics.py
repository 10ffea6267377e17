"""What modstream's operators report through Flink's metric system, in one table (`METRICS`),
and the small handle (`OperatorMetrics`) its adapters report through.

Every metric sits in the operator's metric group under `modstream`, its labels as Flink
key/value groups, so Flink's Prometheus reporter (modstream/jobs/runtime.py,
modstream/stack/cluster.py) exports it as
`flink_taskmanager_job_task_operator_modstream_<labels…>_<name>` with one Prometheus label per key
(`prometheus_name`). docs/OPERATIONS.md lists the same table with the alert each metric feeds;
tests/jobs/test_metrics.py holds the docs, deploy/prometheus/ and deploy/grafana/ to it.

In thread mode a Python "distribution" is a last-value gauge held in Java: gauges are those,
set by the operator's own thread, never callables the reporter's thread would run in Python
(`_register`). Latencies are Flink histograms (DescriptiveStatisticsHistogram, exported as a
summary with quantiles) made through the Java metric group; where that class cannot be reached
the last value is reported instead. A metric
that cannot be registered (no metric group: tests' fake contexts) is a no-op, never an error:
metrics never change what a job decides.
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Literal

from modstream.core import redaction
from modstream.review.quality import SLICE as _QUALITY_SLICE

LOG = logging.getLogger("modstream.metrics")

GROUP = "modstream"
PROMETHEUS_PREFIX = "flink_taskmanager_job_task_operator_"
HISTOGRAM_WINDOW = 1024  # samples a latency histogram's quantiles are computed over

Kind = Literal["counter", "gauge", "histogram"]


@dataclass(frozen=True)
class Metric:
    kind: Kind
    labels: tuple[str, ...]
    job: str  # the job whose operators register it
    help: str


METRICS: dict[str, Metric] = {
    "decisions": Metric(
        "counter", ("outcome", "trigger"), "moderation", "decision revisions emitted"
    ),
    "fast_gate_latency_ms": Metric(
        "histogram", (), "moderation", "processing time of a fast-gate decision minus its upsert ts"
    ),
    "completion_latency_ms": Metric(
        "histogram",
        ("modality",),
        "moderation",
        "event time from an upsert to the decision that completed its evidence",
    ),
    "review_tasks": Metric("counter", ("queue",), "moderation", "review tasks opened"),
    "state_cache_reads": Metric(
        "counter",
        ("result",),
        "moderation",
        "version states read: hit (kept decoded since stored), miss (decoded from the bytes)",
    ),
    "oldest_pending_age_ms": Metric(
        "gauge", (), "moderation", "how long the oldest incomplete version has waited"
    ),
    "step_compiled": Metric(
        "gauge", (), "moderation", "1 when the per-version code runs compiled (mypyc), 0 as Python"
    ),
    "versions_pending": Metric(
        "gauge", (), "moderation", "versions whose evidence is incomplete (this subtask)"
    ),
    "versions_stuck": Metric(
        "gauge", (), "moderation", "versions incomplete for longer than the stuck bound"
    ),
    "overdue_oldest_event_ms": Metric(
        "gauge",
        (),
        "moderation",
        "event time past its deadline or expiry of the oldest version still waiting for it",
    ),
    "overdue_oldest_processing_ms": Metric(
        "gauge",
        (),
        "moderation",
        "processing time the oldest version past its deadline or expiry has waited for it",
    ),
    "unknown_evidence": Metric(
        "counter",
        ("detector",),
        "moderation",
        "detectors named unknown by a deadline decision (missing, timed out or errored)",
    ),
    "dlq": Metric("counter", ("error_class",), "every job", "records written to moderation.dlq"),
    "bank_refused": Metric(
        "counter",
        ("reason",),
        "moderation",
        "hash.bank records refused to the DLQ: tombstone, key (schema); bound (permanent)",
    ),
    "detector_results": Metric(
        "counter", ("detector", "status"), "scan", "detector.results written, by status"
    ),
    "model_batch_size": Metric("histogram", ("detector",), "scan", "requests per model call"),
    "inference_ms": Metric("histogram", ("detector",), "scan", "wall time of one model batch"),
    "retries": Metric("counter", (), "scan, enforce", "transient failures retried"),
    "scan_oldest_waiting_ms": Metric(
        "gauge",
        ("modality", "priority"),
        "scan",
        "age of the oldest request waiting for a model worker, since it was written to Kafka",
    ),
    "scan_shed": Metric(
        "counter",
        ("modality", "priority"),
        "scan",
        "requests answered timeout at once: the pool could not answer them by their deadline",
    ),
    "scan_bumped": Metric(
        "counter",
        (),
        "scan",
        "waiting requests a report moved to the front of the admission queue",
    ),
    "enforcement_lag_ms": Metric(
        "histogram", (), "reconciler", "an action's arrival to the matching visibility"
    ),
    "exposure_ms": Metric(
        "histogram",
        ("surface", "region", "trigger"),
        "reconciler",
        "how long a version was shown before a BLOCK or RESTRICT took effect on it",
    ),
    "restricted_unexposed": Metric(
        "counter",
        ("surface", "region", "trigger"),
        "reconciler",
        "versions restricted (BLOCK or RESTRICT) before they were ever shown",
    ),
    "open_discrepancies": Metric(
        "gauge", (), "reconciler", "content items whose visibility disagrees with the action"
    ),
    # Quality of decisions (issue 29, item 3; modstream/review/quality.py): the rates are recording
    # rules over these (deploy/prometheus/alerts.yaml, group modstream-quality).
    "appealable_decisions": Metric(
        "counter",
        _QUALITY_SLICE,
        "moderation",
        "BLOCK or RESTRICT decisions the author was told about and may appeal",
    ),
    "appeals": Metric("counter", _QUALITY_SLICE, "moderation", "appeals opened (appeal tasks)"),
    "appeal_outcomes": Metric(
        "counter",
        ("result", *_QUALITY_SLICE),
        "moderation",
        "appeals decided: upheld (the appealed outcome kept) or overturned",
    ),
    "human_reviews": Metric(
        "counter",
        ("agreement", *_QUALITY_SLICE),
        "moderation",
        "human reviews of a model's decision: agree (same outcome) or disagree",
    ),
    # Second review (issue 29 item 2; modstream/review/second_review.py,
    # modstream/review/agreement.py): Cohen's kappa per queue and pair is computed from these counts
    # (`modstream eval`).
    "second_reviews": Metric(
        "counter",
        ("queue", "pair", "outcome_a", "outcome_b", "sampled"),
        "moderation",
        "second reviews compared with the first: the pair `a,b` (a < b) and each one's outcome",
    ),
    # Cost per workflow version (issue 29 item 5; the archive's `cost_per_decision` view is the
    # same per version decided): decision revisions by the policy and workflow version that made
    # them (re-evaluations: trigger reevaluation or policy_change), and the detector results
    # the moderation step read with their inference time, by the job's workflow version.
    "workflow_decisions": Metric(
        "counter",
        ("policy_version", "workflow_version", "trigger"),
        "moderation",
        "decision revisions by the policy and workflow version that made them",
    ),
    "workflow_detector_results": Metric(
        "counter",
        ("workflow_version", "detector"),
        "moderation",
        "detector results the moderation step read (a duplicate it drops included)",
    ),
    "workflow_inference_ms": Metric(
        "counter",
        ("workflow_version", "detector"),
        "moderation",
        "the `inference_ms` of those results, summed",
    ),
    # Review wait (issue 29, item 3; modstream/jobs/review_wait.py), set every 10 s per queue.
    "oldest_review_wait_ms": Metric(
        "gauge",
        ("queue",),
        "reconciler",
        "how long the queue's oldest open review task has waited, ms (0: none open)",
    ),
    "review_wait_target_ms": Metric(
        "gauge", ("queue",), "reconciler", "the queue's target for that wait, ms"
    ),
    # Score drift (issue 29 item 4; modstream/scanning/drift.py,
    # modstream/jobs/moderation/drift_metrics.py).
    "detector_scores": Metric(
        "counter",
        ("detector", "model_version", "label", "bucket"),
        "moderation",
        "admitted ok results' scores by bucket of [0, 1] (bucket: its lower bound), for PSI",
    ),
}

# Metrics the Java extension (deploy/flink-ext) registers itself, in the same group and naming:
# the reporter's thread reads them from Java state, never from Python.
EXTENSION_METRICS: dict[str, Metric] = {
    "watermark_lag_ms": Metric(
        "gauge",
        (),
        "moderation",
        "processing clock minus the last watermark validated event time emitted (ValidatedTime)",
    ),
    # Per input partition of the moderation job, on its event-time operator, from the broker's
    # last stable offset and high watermark (EndOffsets.Broker, StableEnd.java).
    "unstable_records": Metric(
        "gauge",
        ("topic", "partition"),
        "moderation",
        "offsets past the last stable offset (behind an open transaction)",
    ),
    "lso_stalled_ms": Metric(
        "gauge",
        ("topic", "partition"),
        "moderation",
        "how long the last stable offset has stayed below the end unmoved, ms",
    ),
    # The batched engine's keyed operator (BatchedVersions.java, `--engine batched`).
    "python_calls": Metric(
        "counter", (), "moderation", "calls into Python of the batched keyed operator"
    ),
    "versions_batched": Metric(
        "counter", (), "moderation", "versions handed to Python by the batched keyed operator"
    ),
    "held_input_spills": Metric(
        "counter",
        (),
        "moderation",
        "times the batched keyed operator moved the input it held in memory to keyed state",
    ),
    "held_input_records": Metric(
        "gauge",
        (),
        "moderation",
        "records the batched keyed operator holds in memory for the watermark",
    ),
}


# Flink's own metrics that modstream's alerts and dashboard read (the Kafka source's lag).
FLINK_METRICS: dict[str, str] = {
    "flink_taskmanager_job_task_operator_KafkaSourceReader_KafkaConsumer_records_lag_max": (
        "the source's consumer lag, records (the largest over its partitions)"
    ),
    "flink_taskmanager_job_task_operator_pendingRecords": "records the source has not read yet",
    "flink_jobmanager_job_numRestarts": "restarts of the job since it was submitted",
    "flink_jobmanager_job_lastCheckpointDuration": "the last checkpoint's duration, ms",
}


def prometheus_name(name: str) -> str:
    """The name Flink's Prometheus reporter gives `name` (an operator's metric)."""
    metric = METRICS[name] if name in METRICS else EXTENSION_METRICS[name]
    return "_".join([PROMETHEUS_PREFIX + GROUP, *metric.labels, name])


UNSTABLE_RECORDS = prometheus_name("unstable_records")
LSO_STALLED_MS = prometheus_name("lso_stalled_ms")


class OperatorMetrics:
    """One operator instance's metrics, registered on first use per label values."""

    def __init__(self, runtime_context: Any, operator: str) -> None:
        self.operator = operator
        self._group: Any = None
        self._made: dict[tuple[str, tuple[str, ...]], Any] = {}
        # Within `deferred()`: (name, *labels.items()) -> the increments summed so far.
        self._deferred: dict[tuple[Any, ...], int] | None = None
        if runtime_context is None:  # NO_METRICS: nothing to report to, nothing to say
            return
        try:
            self._group = runtime_context.get_metrics_group().add_group(GROUP)
        except Exception as error:  # fakes in tests, or an engine without metrics
            LOG.info("%s: metrics unavailable (%s)", operator, type(error).__name__)

    def inc(self, name: str, count: int = 1, **labels: str) -> None:
        if self._deferred is not None:
            called = (name, *labels.items())
            self._deferred[called] = self._deferred.get(called, 0) + count
            return
        metric = self._get(name, labels)
        if metric is not None:
            metric.inc(count)

    def add(self, name: str, values: tuple[str, ...], count: int = 1) -> None:
        """`inc` with the label values given in the metric's own label order
        (`METRICS[name].labels`), as text: what the per-firing counters call, since the batched
        operator's `RecordedMetrics` sums them by that tuple without a keyword dict per update."""
        self.inc(name, count, **dict(zip(METRICS[name].labels, values, strict=True)))

    @contextlib.contextmanager
    def deferred(self) -> Iterator[None]:
        """Counter increments made within are summed per series and made once each at the end:
        each `inc` of a PyFlink counter is a Python-to-Java call that gives up the interpreter
        lock and waits to take it again behind the TaskManager's other Python, so an operator
        that handles a batch per call (DecodeBatch: detector scores, about 0.7 increments per
        record) makes one call per series per batch instead."""
        if self._deferred is not None:  # nested: the outer one makes them
            yield
            return
        self._deferred = {}
        try:
            yield
        finally:
            summed, self._deferred = self._deferred, None
            for (name, *items), count in summed.items():
                self.inc(name, count, **dict(items))

    def observe(self, name: str, value: float, **labels: str) -> None:
        metric = self._get(name, labels)
        if metric is not None:
            metric.update(int(value))

    def letter(self, row: Any) -> Any:
        """A DLQ row `(topic, key, letter)`, counted by its class."""
        self.inc("dlq", error_class=error_class(row[2]))
        return row

    def set(self, name: str, value: float, **labels: str) -> None:
        """A gauge's new value (kept in Java: the reporter never calls into Python)."""
        metric = self._get(name, labels)
        if metric is not None:
            metric.update(int(value))

    def _get(self, name: str, labels: dict[str, str]) -> Any:
        if self._group is None:
            return None
        spec = METRICS[name]
        values = tuple(str(labels[label]) for label in spec.labels)
        key = (name, values)
        if key in self._made:
            return self._made[key]
        try:
            group = self._group
            # A label's value comes from input (a queue, a detector): never a secret's.
            shown = redaction.current().value(values)
            for label, value in zip(spec.labels, shown, strict=True):
                group = group.add_group(label, value)
            self._made[key] = _register(group, name, spec.kind)
        except Exception as error:
            LOG.warning("%s: metric %s not registered (%s)", self.operator, name, error)
            self._made[key] = None
        return self._made[key]


def _register(group: Any, name: str, kind: Kind) -> Any:
    if kind == "counter":
        return group.counter(name)
    if kind == "gauge":
        # PyFlink's distribution is a Java gauge holding the last value set. Never a gauge
        # over a Python callable: the reporter's thread would call into Python while holding
        # the registry's lock, and a task thread registering a metric (holding the GIL, then
        # waiting for that lock) would deadlock the TaskManager.
        return group.distribution(name)
    return _histogram(group, name)


def _histogram(group: Any, name: str) -> Any:
    """A Flink histogram (quantiles in Prometheus) through the Java group; else PyFlink's
    distribution (the last value)."""
    java_group = getattr(group, "_metrics", None)
    if java_group is not None:
        try:
            from pemja import findClass

            histogram = findClass("org.apache.flink.runtime.metrics.DescriptiveStatisticsHistogram")
            return java_group.histogram(name, histogram(HISTOGRAM_WINDOW))
        except Exception as error:
            LOG.info("metric %s: no Java histogram (%s): last value", name, error)
    return group.distribution(name)


def letters(metrics: OperatorMetrics, rows: list[Any], dlq_topic: str) -> None:
    """Count the DLQ rows among sink rows `(topic, key, value)` by their error class."""
    for row in rows:
        if row[0] == dlq_topic:
            metrics.inc("dlq", error_class=error_class(row[2]))


def error_class(letter: str) -> str:
    """A DLQ letter's error class ("unknown" when it cannot be read)."""
    try:
        return str(json.loads(letter).get("error_class") or "unknown")
    except (ValueError, TypeError, AttributeError):  # not JSON, not text, not an object
        return "unknown"


# Adapters built outside a Flink runtime (unit tests) report nowhere.
NO_METRICS = OperatorMetrics(None, "none")
