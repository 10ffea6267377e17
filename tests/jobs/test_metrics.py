"""modstream/jobs/metrics.py: the one table of metrics against the code that registers them, the
docs, the alert rules and the dashboard; the operator handles on a fake metric group; the Prometheus
reporter's settings. No JVM."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from modstream.contract.workflow import WORKFLOW_VERSION
from modstream.core import endpoints
from modstream.jobs import metrics, runtime
from modstream.jobs.metrics import (
    EXTENSION_METRICS,
    FLINK_METRICS,
    LSO_STALLED_MS,
    METRICS,
    OperatorMetrics,
    prometheus_name,
)
from modstream.jobs.moderation.batch import RecordedMetrics
from modstream.jobs.moderation.metrics import (
    REFRESH_MS,
    STUCK_AFTER_MS,
    ModerationMetrics,
    may_count_for_quality,
)
from modstream.jobs.scan.metrics import ScanMetrics, detector_of
from modstream.moderation.state import OUTPUT_TOPICS, SANCTIONS, Agreement, VersionState
from modstream.review import quality
from modstream.scanning.batch import Handled
from modstream.testing.flink import FakeMetricsContext as FakeContext
from modstream.testing.versions import content

ROOT = Path(__file__).resolve().parents[2]
OPERATIONS = ROOT / "docs" / "OPERATIONS.md"
ALERTS = ROOT / "deploy" / "prometheus" / "alerts.yaml"
DASHBOARD = ROOT / "deploy" / "grafana" / "modstream-dashboard.json"
NAME = re.compile(r"flink_[A-Za-z0-9_]+")
SUMMARY_SUFFIXES = ("_count", "_sum")


def _known_names() -> set[str]:
    names = {prometheus_name(name) for name in (*METRICS, *EXTENSION_METRICS)}
    names |= {name + suffix for name in names for suffix in SUMMARY_SUFFIXES}
    return names | set(FLINK_METRICS)


def _registered_in_code() -> set[str]:
    """Metric names the jobs pass to inc / observe / set / add."""
    found: set[str] = set()
    for path in (ROOT / "modstream" / "jobs").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in ("inc", "observe", "set", "add")
                and node.args
                and isinstance(node.args[0], ast.Constant)
                and isinstance(node.args[0].value, str)
            ):
                found.add(node.args[0].value)
    # Counted by name through modstream/review/quality.py (ModerationMetrics.decided).
    return found | set(quality.COUNTERS)


def test_every_metric_in_the_table_is_registered_by_a_job_and_no_other() -> None:
    assert _registered_in_code() == set(METRICS)


def test_every_positional_update_gives_as_many_label_values_as_its_metric_has_labels() -> None:
    """`add(name, (value, ...))` names no label: a tuple of the wrong length would count under
    the wrong labels, so each call's tuple is held to its metric's labels here."""
    calls = 0
    for path in (ROOT / "modstream" / "jobs").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "add"
                and len(node.args) >= 2
                and isinstance(node.args[0], ast.Constant)
                and node.args[0].value in METRICS
            ):
                values = node.args[1]
                name = node.args[0].value
                if isinstance(values, ast.Tuple):
                    assert len(values.elts) == len(METRICS[name].labels), (path, name)
                    calls += 1
    assert calls >= 4  # the moderation operator's per-decision counters


def test_recorded_metrics_positional_and_keyword_updates_are_one_series() -> None:
    """`add` with the label values in the metric's order and `inc` with them by name count
    the same series, and reach Java labelled alike; a tuple of the wrong length is refused."""
    recorded = RecordedMetrics("moderate")
    recorded.add("decisions", ("ALLOW", "fast_gate"))
    recorded.inc("decisions", trigger="fast_gate", outcome="ALLOW")
    recorded.add("review_tasks", ("urgent",), 3)
    assert recorded.drain() == [
        ["counter", "decisions", ["outcome", "ALLOW", "trigger", "fast_gate"], 2],
        ["counter", "review_tasks", ["queue", "urgent"], 3],
    ]
    recorded.add("decisions", ("ALLOW",))
    with pytest.raises(ValueError):
        recorded.drain()
    plain = metrics.OperatorMetrics(None, "none")
    with pytest.raises(ValueError):
        plain.add("decisions", ("ALLOW",))
    plain.add("decisions", ("ALLOW", "fast_gate"))  # reports nowhere, but is accepted


def test_every_extension_metric_is_registered_by_the_java_extension() -> None:
    """deploy/flink-ext registers these itself (ValidatedTime's gauge): each name is a string
    constant there, under the `modstream` group."""
    java = "\n".join(
        path.read_text(encoding="utf-8")
        for path in (ROOT / "deploy" / "flink-ext" / "src").rglob("*.java")
    )
    for name in EXTENSION_METRICS:
        assert f'"{name}"' in java, name
    assert 'addGroup("modstream")' in java and set(EXTENSION_METRICS).isdisjoint(METRICS)
    # The per-partition gauges (open transactions) are labelled by topic and partition.
    assert '.addGroup("topic", ' in java and '.addGroup("partition", ' in java


def test_operations_md_lists_every_metric_and_only_those() -> None:
    text = OPERATIONS.read_text(encoding="utf-8")
    named = set(NAME.findall(text))
    missing = {prometheus_name(name) for name in (*METRICS, *EXTENSION_METRICS)}
    missing |= set(FLINK_METRICS)
    assert missing - named == set()
    unknown = {name for name in named if "_modstream_" in name or name in FLINK_METRICS}
    assert unknown - _known_names() == set()
    assert {name for name in named if name.startswith("flink_")} - _known_names() == {
        # the naming example and the exported label prefix, not metrics
        name
        for name in named
        if name.endswith("_") or name == "flink_taskmanager_job_task_operator_"
    }


def test_alerts_reference_documented_metrics_and_the_runbook() -> None:
    rules = yaml.safe_load(ALERTS.read_text(encoding="utf-8"))["groups"][0]["rules"]
    anchors = set(re.findall(r"^### (.+)$", OPERATIONS.read_text(encoding="utf-8"), re.M))
    slugs = {anchor.lower().replace(" ", "-") for anchor in anchors}
    for rule in rules:
        assert set(NAME.findall(rule["expr"])) <= _known_names(), rule["alert"]
        assert rule["labels"]["severity"] in ("warning", "critical")
        assert rule["annotations"]["summary"]
        runbook = rule["annotations"]["runbook"]
        assert runbook.startswith("docs/OPERATIONS.md#"), rule["alert"]
        assert runbook.split("#", 1)[1].split(":")[0] in slugs, rule["alert"]
    alerted = {name for rule in rules for name in NAME.findall(rule["expr"])}
    for must in ("decisions", "detector_results", "oldest_pending_age_ms", "enforcement_lag_ms"):
        assert prometheus_name(must) in alerted
    for must in ("open_discrepancies", "dlq"):
        assert prometheus_name(must) in alerted
    assert any("records_lag_max" in name for name in alerted)
    overdue = {prometheus_name(f"overdue_oldest_{clock}_ms") for clock in ("processing", "event")}
    assert {prometheus_name("watermark_lag_ms"), *overdue, LSO_STALLED_MS} <= alerted


def test_the_recording_rules_read_documented_metrics_and_score_drift_is_alerted() -> None:
    """Score drift (issue 29 item 4) and the quality rates (item 3): the recording groups read
    the moderation job's detector_scores and quality counters, and the alert reads the PSI."""
    groups = yaml.safe_load(ALERTS.read_text(encoding="utf-8"))["groups"]
    recorded = [rule for group in groups[1:] for rule in group["rules"]]
    read = {name for rule in recorded for name in NAME.findall(rule["expr"])}
    assert read == {prometheus_name(name) for name in ("detector_scores", *quality.COUNTERS)}
    drift = next(r for r in groups[0]["rules"] if r["alert"] == "ModstreamScoreDrift")
    assert "modstream:detector_score_psi:1h" in drift["expr"]
    assert {rule["record"] for rule in recorded} >= {"modstream:detector_score_psi:1h"}


def test_the_dashboard_references_documented_metrics_only() -> None:
    dashboard = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    exprs = [target["expr"] for panel in dashboard["panels"] for target in panel["targets"]]
    used = {name for expr in exprs for name in NAME.findall(expr)}
    assert used <= _known_names()
    assert {prometheus_name(name) for name in METRICS} <= used


def test_prometheus_names_put_label_keys_before_the_name() -> None:
    assert prometheus_name("decisions") == (
        "flink_taskmanager_job_task_operator_modstream_outcome_trigger_decisions"
    )
    assert prometheus_name("dlq") == "flink_taskmanager_job_task_operator_modstream_error_class_dlq"


def test_operator_metrics_register_once_per_label_values() -> None:
    context = FakeContext()
    reporter = OperatorMetrics(context, "test")
    reporter.inc("decisions", outcome="BLOCK", trigger="fast_gate")
    reporter.inc("decisions", 2, outcome="BLOCK", trigger="fast_gate")
    reporter.inc("dlq", error_class="schema")
    made = context.group.made
    assert made["modstream/outcome=BLOCK/trigger=fast_gate/decisions"].count == 3
    assert made["modstream/error_class=schema/dlq"].count == 1


def test_deferred_increments_are_summed_and_made_once_per_series_at_the_end() -> None:
    context = FakeContext()
    reporter = OperatorMetrics(context, "test")
    with reporter.deferred():
        for _ in range(3):
            reporter.inc("decisions", outcome="BLOCK", trigger="fast_gate")
        reporter.inc("dlq", 0, error_class="schema")  # registered at 0
        with reporter.deferred():  # nested: the outer one makes them
            reporter.inc("decisions", 2, outcome="BLOCK", trigger="fast_gate")
        assert context.group.made == {}
    made = context.group.made
    decisions = made["modstream/outcome=BLOCK/trigger=fast_gate/decisions"]
    assert (decisions.count, decisions.calls) == (5, 1)
    assert (made["modstream/error_class=schema/dlq"].count, len(made)) == (0, 2)
    reporter.inc("decisions", trigger="fast_gate", outcome="BLOCK")  # after it: made at once
    assert (decisions.count, decisions.calls) == (6, 2)


def test_without_a_metric_group_every_call_is_a_no_op() -> None:
    metrics.NO_METRICS.inc("dlq", error_class="schema")
    metrics.NO_METRICS.observe("enforcement_lag_ms", 5)
    metrics.letters(metrics.NO_METRICS, [("moderation.dlq", None, "{}")], "moderation.dlq")


def test_letters_are_counted_by_their_class() -> None:
    context = FakeContext()
    reporter = OperatorMetrics(context, "test")
    rows = [
        ("dlq", "c1", json.dumps({"error_class": "signature"})),
        ("dlq", "c2", "not json"),
        ("moderation.decisions", "c3", "{}"),
    ]
    metrics.letters(reporter, rows, "dlq")
    made = context.group.made
    assert made["modstream/error_class=signature/dlq"].count == 1
    assert made["modstream/error_class=unknown/dlq"].count == 1


def _decision(outcome: str, trigger: str, state: str, ts: int, **completeness: Any) -> Any:
    record = {"outcome": outcome, "trigger": trigger, "state": state, "ts": ts}
    record["completeness"] = {"required": 1, "received": 0, "unknown": [], **completeness}
    return ("moderation.decisions", "c1", record)


def version(upload_ts: int, modality: str = "text", **fields: Any) -> VersionState:
    """A version's state uploaded at `upload_ts`, as the metrics read it."""
    uploaded = content(upload_ts, modality)
    return VersionState(content_id="c1", content_version=1, content=uploaded, **fields)


def _gauge(made: dict[str, Any], name: str) -> int:
    return int(made[f"modstream/{name}"].values[-1])


def test_pending_versions_are_indexed_until_their_evidence_is_complete() -> None:
    now = [100_000]
    context = FakeContext()
    reported = ModerationMetrics(OperatorMetrics(context, "test"), lambda: now[0])
    made = context.group.made
    assert _gauge(made, "versions_pending") == 0
    state = version(40_000, "image")
    now[0] += REFRESH_MS
    reported.decided("c1\x1f1", state, [_decision("PENDING", "fast_gate", "scanning", 40_000)])
    assert made["modstream/outcome=PENDING/trigger=fast_gate/decisions"].count == 1
    assert made["modstream/fast_gate_latency_ms"].values == [61_000]
    assert _gauge(made, "versions_pending") == 1
    assert _gauge(made, "oldest_pending_age_ms") == 0  # waiting since now, whatever its ts
    assert _gauge(made, "versions_stuck") == 0
    now[0] += STUCK_AFTER_MS + 1
    reported.refresh()
    assert _gauge(made, "versions_stuck") == 1
    complete = _decision("ALLOW", "evidence", "approved", 43_000, received=1)
    reported.decided("c1\x1f1", state, [complete])  # within REFRESH_MS: gauges kept
    assert made["modstream/modality=image/completion_latency_ms"].values == [3_000]
    assert _gauge(made, "versions_pending") == 1
    now[0] += REFRESH_MS
    reported.refresh()
    assert _gauge(made, "versions_pending") == 0
    assert _gauge(made, "oldest_pending_age_ms") == 0


def test_deadline_decisions_count_their_unknown_detectors_and_close_the_version() -> None:
    now = [0]
    context = FakeContext()
    reported = ModerationMetrics(OperatorMetrics(context, "test"), lambda: now[0])
    content = version(0)
    reported.decided("k", content, [_decision("PENDING", "fast_gate", "scanning", 0)])
    expired = _decision("PENDING", "deadline", "expired", 5_000, unknown=["nsfw_image"])
    tasks = ("review.tasks", "k", {"queue": "adult"})
    now[0] += REFRESH_MS
    reported.decided("k", content, [expired, tasks])
    made = context.group.made
    assert made["modstream/detector=nsfw_image/unknown_evidence"].count == 1
    assert made["modstream/queue=adult/review_tasks"].count == 1
    assert _gauge(made, "versions_pending") == 0
    reported.decided("k", content, [_decision("PENDING", "fast_gate", "scanning", 0)])
    now[0] += REFRESH_MS
    reported.decided("k", None, [])  # retired or cleared: out of the index
    assert _gauge(made, "versions_pending") == 0


def test_the_oldest_version_waiting_past_its_deadline_is_reported_until_decided() -> None:
    """Issue 32: a backlog's deadline (ts 30,000) reached at clock 1,000,000 waits for the
    detectors; the gauges say how far past it the version is, in event time (the operator's
    newest firing ts less 30,000) and in processing time (since it was first seen waiting)."""
    now = [1_000_000]
    context = FakeContext()
    reported = ModerationMetrics(OperatorMetrics(context, "test"), lambda: now[0])
    made = context.group.made
    assert _gauge(made, "overdue_oldest_event_ms") == 0
    waiting = version(0, deadline=30_000, deadline_timer=1_035_000)
    reported.decided("old\x1f1", waiting, [], fired_at=30_000)
    reported.decided("live\x1f1", version(990_000), [], fired_at=998_000)
    now[0] += REFRESH_MS
    reported.refresh()
    assert _gauge(made, "overdue_oldest_event_ms") == 998_000 - 30_000
    assert _gauge(made, "overdue_oldest_processing_ms") == REFRESH_MS
    now[0] += 35_000
    waiting.deadline_timer = None
    reported.decided("old\x1f1", waiting, [], fired_at=1_035_000)
    assert _gauge(made, "overdue_oldest_event_ms") == 0
    assert _gauge(made, "overdue_oldest_processing_ms") == 0
    # A provisional expiry reached while catching up (re-armed past it) waits the same way.
    expiring = version(0, expiry=630_000, expiry_timer=1_045_000)
    reported.decided("old\x1f1", expiring, [], fired_at=630_000)
    reported.decided("live\x1f1", version(1_030_000), [], fired_at=1_040_000)
    now[0] += REFRESH_MS
    reported.refresh()
    assert _gauge(made, "overdue_oldest_event_ms") == 1_040_000 - 630_000
    assert _gauge(made, "overdue_oldest_processing_ms") == REFRESH_MS
    reported.decided("old\x1f1", None, [])  # retired or cleared: out of the index
    now[0] += REFRESH_MS
    reported.refresh()
    assert _gauge(made, "overdue_oldest_processing_ms") == 0


def test_the_reporter_is_on_only_with_a_port() -> None:
    assert runtime.prometheus_reporter(None) == {}
    conf = runtime.prometheus_reporter("9250-9299")
    assert conf["metrics.reporter.prom.port"] == "9250-9299"
    assert conf["metrics.reporter.prom.factory.class"].endswith("PrometheusReporterFactory")
    jar_dir = runtime.plugins_dir() / "metrics-prometheus"
    assert list(jar_dir.glob("flink-metrics-prometheus-*.jar"))


@pytest.mark.parametrize(
    ("line", "sample"),
    [
        ('m{a="x",b="y z"} 3.0', ("m", {"a": "x", "b": "y z"}, 3.0)),
        ("m 1", ("m", {}, 1.0)),
        ('m{quantile="0.99",} 12.5', ("m", {"quantile": "0.99"}, 12.5)),
    ],
)
def test_samples_are_read_from_the_exposition_text(line: str, sample: Any) -> None:
    assert endpoints.samples(f"# HELP m x\n# TYPE m gauge\n{line}\n") == [sample]


def test_free_ports_come_from_the_range() -> None:
    ports = endpoints.free_ports(2, "20000-20100")
    assert len(ports) == 2 and all(20000 <= port <= 20100 for port in ports)


def test_the_scan_operator_reports_batches_results_retries_and_letters() -> None:
    context = FakeContext()
    reporting = ScanMetrics(OperatorMetrics(context, "test"))
    reporting.timed(detector_of(("nsfw_image/3",)), 4, 0.25)  # from a model worker thread
    handled = Handled()
    handled.emit("detector.results", "c1", json.dumps({"detector": "nsfw_image", "status": "ok"}))
    handled.emit(
        "detector.results", "c2", json.dumps({"detector": "nsfw_image", "status": "timeout"})
    )
    handled.emit("moderation.dlq", "c3", json.dumps({"error_class": "permanent"}))
    handled.retries.append(({"request_id": "r"}, 10))
    reporting.report(handled, runtime.TopicNames())
    made = context.group.made
    assert made["modstream/detector=nsfw_image/model_batch_size"].values == [4]
    assert made["modstream/detector=nsfw_image/inference_ms"].values == [250]
    assert made["modstream/detector=nsfw_image/status=ok/detector_results"].count == 1
    assert made["modstream/detector=nsfw_image/status=timeout/detector_results"].count == 1
    assert made["modstream/error_class=permanent/dlq"].count == 1
    assert made["modstream/retries"].count == 1
    assert detector_of("offensive_text") == "offensive_text"


def test_an_overturned_appeal_is_counted_from_the_stored_state_before_it() -> None:
    """The decision in force comes from the state as stored before the firing (one decode,
    only for a human decision); the slice from the version's content and evidence."""
    from modstream.jobs.moderation.metrics import in_force
    from modstream.moderation import state_schema
    from modstream.moderation.state import Evidence, LastDecision, new_state
    from modstream.review.quality import InForce

    before = version(0)
    assert before.content is not None
    before.content.region = "BR"
    before.evidence = {
        "e": Evidence("offensive_text", "v3", 0, "ok", {"toxicity": 0.9}, None, 1, "pt", 0.97)
    }  # the text result named the version's language (issue 28 item 3): a label
    before.last_decision = LastDecision("BLOCK", None, "blocked", "hidden")
    stored = state_schema.dump_version(before)
    assert in_force(stored) == InForce("BLOCK", human=False)
    assert in_force(None) is None and in_force(state_schema.dump_version(new_state("c", 1))) is None
    context = FakeContext()
    reported = ModerationMetrics(OperatorMetrics(context, "test"), lambda: 0)
    appeal = _decision("ALLOW", "appeal", "approved", 9_000)
    appeal[2]["policy_version"] = 4
    reported.decided("c1\x1f1", before, [appeal], earlier=lambda: in_force(stored))
    labels = (
        "surface=comment/region=BR/language=pt/model_version=offensive_text@v3/policy_version=4"
    )
    assert context.group.made[f"modstream/result=overturned/{labels}/appeal_outcomes"].count == 1


def test_second_reviews_are_counted_per_queue_and_pair_whoever_reviewed_first() -> None:
    context = FakeContext()
    reported = ModerationMetrics(OperatorMetrics(context, "test"), lambda: 0)
    reported.compared(
        [
            Agreement("adult", "r2", "r1", "BLOCK", "ALLOW", sampled=False),
            Agreement("adult", "r1", "r2", "ALLOW", "BLOCK", sampled=False),
            Agreement("text", "r1", "r3", "ALLOW", "ALLOW", sampled=True),
        ]
    )
    made = context.group.made
    pair = "modstream/queue=adult/pair=r1,r2/outcome_a=ALLOW/outcome_b=BLOCK/sampled=false"
    assert made[f"{pair}/second_reviews"].count == 2
    agreed = "modstream/queue=text/pair=r1,r3/outcome_a=ALLOW/outcome_b=ALLOW/sampled=true"
    assert made[f"{agreed}/second_reviews"].count == 1


def test_cost_is_counted_per_workflow_version() -> None:
    """Decisions by policy and workflow version, detector results and their inference time by
    workflow version: cost per decision as Prometheus reads it (issue 29 item 5)."""
    context = FakeContext()
    reported = ModerationMetrics(OperatorMetrics(context, "test"), lambda: 0)
    reported.read_results([("offensive_text", 12), ("offensive_text", 30), ("nsfw_image", 0)])
    decision = {"outcome": "ALLOW", "trigger": "evidence", "ts": 1, "completeness": {}}
    decision |= {"policy_version": 3, "workflow_version": WORKFLOW_VERSION}
    reported.decided("c\x1f1", None, [("moderation.decisions", "c", decision)])
    made = context.group.made
    text = f"modstream/workflow_version={WORKFLOW_VERSION}/detector=offensive_text"
    assert made[f"{text}/workflow_detector_results"].count == 2
    assert made[f"{text}/workflow_inference_ms"].count == 42
    image = f"modstream/workflow_version={WORKFLOW_VERSION}/detector=nsfw_image"
    assert made[f"{image}/workflow_detector_results"].count == 1
    assert f"{image}/workflow_inference_ms" not in made  # nothing to add
    labels = f"policy_version=3/workflow_version={WORKFLOW_VERSION}/trigger=evidence"
    assert made[f"modstream/{labels}/workflow_decisions"].count == 1


def test_no_metrics_reports_nowhere_and_says_nothing(caplog: pytest.LogCaptureFixture) -> None:
    """`NO_METRICS` (adapters outside a Flink runtime) is made when the module is imported, by
    every command: it must not log "metrics unavailable" to a user who runs `modstream bench`;
    a runtime context that cannot give metrics still says so."""
    with caplog.at_level("INFO", logger=metrics.LOG.name):
        quiet = metrics.OperatorMetrics(None, "none")
        quiet.inc("decisions")
        assert caplog.records == []
        metrics.OperatorMetrics(object(), "decode")
    assert [record.getMessage() for record in caplog.records] == [
        "decode: metrics unavailable (AttributeError)"
    ]


def test_recorded_metrics_inside_deferred_still_record_each_update() -> None:
    """The batched handlers' metrics are summed per call already: their `deferred()` defers
    nothing, and every update inside it is recorded as outside it."""
    recorded = RecordedMetrics("moderate")
    with recorded.deferred():
        recorded.inc("decisions", trigger="fast_gate", outcome="ALLOW")
        recorded.inc("decisions", trigger="fast_gate", outcome="ALLOW")
    assert list(recorded.counts.values()) == [2]


def test_every_output_quality_counts_is_one_the_firing_hands_to_it() -> None:
    """`decided` calls `quality.counted` only when `may_count_for_quality` says an output may
    count: every output of every topic that `counted` counts, whatever its trigger, kind or
    appeal, passes that filter, and most decisions (the model's) do not."""
    slice_of = lambda: quality.Slice(surface="comment", region="DE", model_version="none")  # noqa: E731
    earlier = lambda: quality.InForce(outcome="ALLOW", human=False)  # noqa: E731
    counted = 0
    for topic in (*OUTPUT_TOPICS, SANCTIONS):
        for trigger in ("fast_gate", "evidence", "deadline", "review", "appeal", None):
            for kind in ("review", "appeal", None):
                for appeal_allowed in (True, False, None):
                    record = {
                        "trigger": trigger,
                        "kind": kind,
                        "appeal_allowed": appeal_allowed,
                        "outcome": "BLOCK",
                        "policy_version": 3,
                        "decision_revision": 2,
                    }
                    if quality.counted([(topic, "c1", record)], slice_of, earlier):
                        counted += 1
                        assert may_count_for_quality(topic, record), (topic, record)
    assert counted >= 3  # notifications, appeal tasks, human decisions
    assert not may_count_for_quality("moderation.decisions", {"trigger": "evidence"})
