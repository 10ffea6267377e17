"""`modstream demo --json` on the test stack: the whole loop ends enforced and reconciled, and
while it runs its jobs serve the documented metrics for Prometheus (docs/OPERATIONS.md)."""

from __future__ import annotations

import json
import os
import random
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, get_args

import duckdb
import pytest

from modstream.analytics import streams as analytics
from modstream.console.accounts import Accounts
from modstream.contract.common import Outcome, Trigger
from modstream.contract.dlq import ErrorClass
from modstream.contract.workflow import WORKFLOW_VERSION
from modstream.core import endpoints
from modstream.core.config import PROJECT_ROOT, Settings
from modstream.jobs.metrics import prometheus_name
from modstream.review.wait import target_ms
from modstream.scanning import drift
from modstream.stack import deployments
from modstream.testing.stack import modstream

pytestmark = pytest.mark.integration

SCRAPE_EVERY_S = 2.0


def _free_range(size: int = 8) -> str:
    """A range of `size` ports that were free a moment ago, below the ephemeral ports (which
    any Kafka connection may take meanwhile); the demo picks its own from it."""
    for _ in range(50):
        first = random.randrange(20_000, 30_000)
        try:
            endpoints.free_ports(size, f"{first}-{first + size - 1}")
        except RuntimeError:
            continue
        return f"{first}-{first + size - 1}"
    raise RuntimeError("no free range of ports for the demo's metrics")


Series = tuple[str, tuple[tuple[str, str], ...]]


@contextmanager
def _scraping(ports: range) -> Iterator[dict[Series, float]]:
    """Scrape every port of the range until the block ends: the last value of every series
    served. A series keeps its value once gone: as the demo stops its jobs, their operators
    close and their metrics leave the endpoint before it stops answering."""
    served: dict[Series, float] = {}
    done = threading.Event()

    def scrape() -> None:
        while not done.is_set():
            for port in ports:
                for name, labels, value in endpoints.samples(endpoints.scrape(port, 5) or ""):
                    served[(name, tuple(sorted(labels.items())))] = value
            done.wait(SCRAPE_EVERY_S)

    thread = threading.Thread(target=scrape, daemon=True)
    thread.start()
    try:
        yield served
    finally:
        done.set()
        thread.join(timeout=30)


def _values(samples: list[endpoints.Sample], name: str) -> list[tuple[dict[str, str], float]]:
    return [(labels, value) for sample, labels, value in samples if sample == name]


# The demo, then an analyst's archive, report, eval and seven Flink SQL queries: past the
# default 300 s on a loaded 2-core machine (a clean-clone CI run).
@pytest.mark.timeout(600)
def test_the_demo_loop_enforces_every_action_and_serves_its_metrics(stack: Settings) -> None:
    ports = _free_range()
    with _scraping(endpoints.port_range(ports)) as scraped:
        result = subprocess.run(
            [sys.executable, "-m", "modstream.cli.main", "demo", "--events", "120", "--json"],
            cwd=PROJECT_ROOT,
            env={**os.environ, "MODSTREAM_METRICS_PORT": ports},
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    summary = json.loads(result.stdout.strip().splitlines()[-1])
    assert summary["content_versions"] >= 120 and summary["actions"] > 0
    assert summary["applied"] == summary["actions"]
    assert summary["visibility_mismatches"] == 0
    assert summary["discrepancies_open"] == 0
    assert summary["duplicate_revisions"] == 0
    assert summary["review_tasks"] > 0 and summary["dlq"] > 0
    assert set(summary["enforcement_lag_ms"]) >= {"p50", "p99"}
    # The exposure window (docs/enforcement.md): versions shown, then blocked or restricted
    # (evidence after a provisional allow, the retroactive hash-bank addition: which ones
    # depends on timing, so no trigger is required by name).
    exposure = summary["exposure_ms"]
    assert set(exposure) >= {"p50", "p99", "measured", "by_trigger"}
    assert exposure["measured"] >= 1 and sum(exposure["by_trigger"].values()) >= 1
    assert 0 <= exposure["p50"] <= exposure["p99"]
    assert summary["archive"]["exposure"] >= exposure["measured"]
    # Score drift and cost per decision (issue 29 items 4 and 5): PSI of the run's last window
    # of scores against the ones before it, per detector; the cost of every version decided,
    # all under this tree's workflow version, with the detector calls the evidence made.
    drifted = summary["score_drift"].values()
    assert drifted and all(d["psi"] >= 0 and d["noise"] > 0 and d["scores"] > 0 for d in drifted)
    costs = summary["cost_per_decision"]
    assert {row["workflow_version"] for row in costs} == {WORKFLOW_VERSION}
    assert sum(row["decisions"] for row in costs) == summary["content_versions"]
    assert all(row["per_decision"]["detector_calls"] > 0 for row in costs)
    assert summary["archive"]["detector_results"] > 0
    assert set(summary["metrics"]) == {"moderation", "enforce", "reconciler"}
    samples = [(name, dict(labels), value) for (name, labels), value in scraped.items()]
    _assert_metrics(samples, sorted({name for name, _, _ in samples if "_modstream_" in name}))
    _assert_quality(samples, summary)
    _assert_cost_metrics(samples)
    _assert_console_login(stack, summary)
    _assert_second_reviews(samples, summary)
    _assert_analytics(stack, summary)
    _assert_results_by_detector(summary)


def _modstream(*args: str) -> subprocess.CompletedProcess[str]:
    result = modstream(dict(os.environ), *args)
    assert result.returncode == 0, (
        f"modstream {args[0]}: {result.stdout[-2000:]}{result.stderr[-3000:]}"
    )
    return result


def _assert_analytics(stack: Settings, summary: dict[str, Any]) -> None:
    """What an analyst gets from the run (docs/ANALYSTS.md): the archive the demo wrote holds its
    decisions and DuckDB and pandas read them; the report has its plots; eval grades the shipped
    labels; every ready Flink SQL query returns rows on the run's topics."""
    prefix = summary["run_id"].rstrip("-")
    archived = summary["archive"]
    assert archived["decisions"] >= summary["decisions"] > 0
    root = deployments.archive_root(stack, prefix)
    files = str(root / "decisions" / "**" / "*.parquet")
    with duckdb.connect() as connection:
        sql = f"SELECT count(*) FROM read_parquet('{files}', hive_partitioning=true)"
        assert connection.execute(sql).fetchone() == (archived["decisions"],)
    table = analytics.read_decisions(settings=stack, prefix=prefix)
    assert table.num_rows == archived["decisions"]
    assert set(table.to_pandas()["content_id"]) >= {summary["run_id"] + "c7-0"}
    queried = _modstream("query", "--prefix", prefix, "--format", "json",
                         "SELECT count(DISTINCT content_id) AS n FROM decisions")  # fmt: skip
    assert (
        json.loads(queried.stdout.splitlines()[-1])["n"]
        == table.to_pandas()["content_id"].nunique()
    )
    page = Path(summary["report"]).read_text(encoding="utf-8")
    assert (
        len(re.findall(r'<img alt="[^"]+" src="data:image/png;base64,[A-Za-z0-9+/=]+">', page)) >= 5
    )
    graded = _modstream("eval", "--labels", str(PROJECT_ROOT / "deploy/demo/labels.jsonl"),
                        "--prefix", prefix, "--id-prefix", summary["run_id"], "--json")  # fmt: skip
    evaluated = json.loads(graded.stdout)
    assert evaluated["coverage"]["matched"] >= 60
    reasons = {row["reason"]: row for row in evaluated["reasons"]}
    assert reasons["(any)"]["precision"] is not None and reasons["(any)"]["recall"] is not None
    assert {"malware", "harassment", "known_match"} <= set(reasons)
    queries = sorted(str(path) for path in (PROJECT_ROOT / "deploy/sql/queries").glob("*.sql"))
    answered = _modstream("sql", "--prefix", prefix, "--format", "json", "--file", *queries)
    results = [json.loads(line) for line in answered.stdout.splitlines() if line.startswith("{")]
    assert len(results) == len(queries) >= 9
    assert all(result["rows"] for result in results), [
        (result.get("source"), len(result["rows"])) for result in results
    ]


def _assert_quality(samples: list[endpoints.Sample], summary: dict[str, Any]) -> None:
    """Quality of decisions and review wait (issue 29, item 3; docs/OPERATIONS.md): the demo's
    appeal is opened and decided; the summary counts it from the topics as the moderation job's
    counters count it, and the reconciler measures the wait of every queue that has tasks."""
    quality = summary["quality"]
    assert quality["appealable"] >= 1 and quality["appeals"] >= 1, quality
    assert (
        quality["appeals_decided"] >= 1 and 0 <= quality["overturned"] <= quality["appeals_decided"]
    )
    assert 0 < quality["appeal_rate"] <= 1 and 0 <= quality["overturn_rate"] <= 1
    slice_labels = {"surface", "region", "model_version", "policy_version"}
    for name, floor in (("appealable_decisions", 1), ("appeals", 1), ("appeal_outcomes", 1)):
        values = _values(samples, prometheus_name(name))
        assert sum(value for _, value in values) >= floor, name
        assert all(slice_labels <= set(labels) for labels, _ in values), name
        assert all(labels["policy_version"].isdigit() for labels, _ in values), name
    outcomes = _values(samples, prometheus_name("appeal_outcomes"))
    assert {labels["result"] for labels, _ in outcomes} <= {"upheld", "overturned"}
    reviews = _values(samples, prometheus_name("human_reviews"))
    assert {labels["agreement"] for labels, _ in reviews} <= {"agree", "disagree"}
    if quality["human_reviews"]:  # the workload's reviews are drawn by chance
        assert sum(value for _, value in reviews) >= 1
    queues = summary["review_wait"]
    assert queues and sum(queue["tasks"] for queue in queues.values()) <= summary["review_tasks"]
    waits = _values(samples, prometheus_name("oldest_review_wait_ms"))
    targets = {labels["queue"]: value for labels, value in _values(
        samples, prometheus_name("review_wait_target_ms"))}  # fmt: skip
    assert waits and {labels["queue"] for labels, _ in waits} <= set(queues)
    assert all(value >= 0 for _, value in waits)
    assert {queue: target_ms(queue) for queue in targets} == targets


def _assert_second_reviews(samples: list[endpoints.Sample], summary: dict[str, Any]) -> None:
    """Second review (issue 29 item 2; the workload's extras under global.yaml's sampling): two
    sampled reviews get a blind second review, one agreeing and one not, whose escalation task
    is decided. The summary and the report read the pairs back from the topics and the
    archive, the job counts them in `second_reviews`; the summary measures both new queues."""
    rows = summary["second_reviews"]
    assert sum(row["items"] for row in rows) >= 2 and sum(row["agreed"] for row in rows) >= 1
    assert any(row["agreed"] < row["items"] for row in rows), rows
    kappas = [row["kappa"] for row in rows]  # None where undefined (one outcome throughout)
    assert all(kappa is None or -1.0 <= kappa <= 1.0 for kappa in kappas), rows
    counted = _values(samples, prometheus_name("second_reviews"))
    agreed = [value for labels, value in counted if labels["outcome_a"] == labels["outcome_b"]]
    disputed = [value for labels, value in counted if labels["outcome_a"] != labels["outcome_b"]]
    assert sum(agreed) >= 1 and sum(disputed) >= 1, counted
    assert {labels["sampled"] for labels, _ in counted} <= {"true", "false"}, counted
    queues = summary["review_wait"]
    assert queues["second_review"]["tasks"] >= 2 and queues["escalation"]["tasks"] >= 1, queues
    page = Path(summary["report"]).read_text(encoding="utf-8")
    table = page.split("<h2>Second reviews: agreement", 1)[1].split("<h2>", 1)[0]
    assert table.count("<tr><td>") >= 1, table[:400]


def _assert_console_login(stack: Settings, summary: dict[str, Any]) -> None:
    """The demo ends with how to open the review console on its topics and a demo reviewer's
    login (issue 30): the password printed is the one the accounts file checks."""
    serve, address = summary["review_console"]
    assert f"review serve --prefix {deployments.last_demo(stack)}" in serve, serve
    accounts = Path(serve.split("--accounts ", 1)[1].split()[0])
    reviewer = address.split("reviewer ", 1)[1].split(",")[0]
    password = address.rsplit("password ", 1)[1].strip()
    assert address.strip().startswith("then http://127.0.0.1:"), address
    assert Accounts.load(accounts).authenticate(reviewer, password)
    assert not Accounts.load(accounts).authenticate(reviewer, password + "x")


def _assert_cost_metrics(samples: list[endpoints.Sample]) -> None:
    """Cost per workflow version as Prometheus reads it (issue 29 item 5, docs/OPERATIONS.md):
    decision revisions counted under this tree's workflow version (at least the fast-gate
    ones, as `_assert_metrics` reads them), and the detector results the step read under it."""
    made = _values(samples, prometheus_name("workflow_decisions"))
    assert {labels["workflow_version"] for labels, _ in made} == {str(WORKFLOW_VERSION)}, made
    assert sum(value for labels, value in made if labels["trigger"] == "fast_gate") >= 100, made
    read = _values(samples, prometheus_name("workflow_detector_results"))
    assert {labels["workflow_version"] for labels, _ in read} == {str(WORKFLOW_VERSION)}, read
    assert sum(value for _, value in read) > 0, read


def _assert_metrics(samples: list[endpoints.Sample], names: list[str]) -> None:
    """What the jobs served while the demo ran (`names`: modstream's, for a failure message)."""
    decisions = _values(samples, prometheus_name("decisions"))
    assert decisions, names
    assert {labels["outcome"] for labels, _ in decisions} <= set(get_args(Outcome))
    assert {labels["trigger"] for labels, _ in decisions} <= set(get_args(Trigger))
    assert sum(value for labels, value in decisions if labels["trigger"] == "fast_gate") >= 100
    dlq = _values(samples, prometheus_name("dlq"))
    assert {labels["error_class"] for labels, _ in dlq} <= set(get_args(ErrorClass))
    assert sum(value for labels, value in dlq if labels["error_class"] == "schema") > 0
    lag_count = _values(samples, prometheus_name("enforcement_lag_ms") + "_count")
    assert lag_count and max(value for _, value in lag_count) > 0, names
    lag = _values(samples, prometheus_name("enforcement_lag_ms"))
    assert {labels.get("quantile") for labels, _ in lag} >= {"0.5", "0.99"}
    assert all(value >= 0 for _, value in lag)
    exposure_count = _values(samples, prometheus_name("exposure_ms") + "_count")
    assert exposure_count and sum(value for _, value in exposure_count) >= 1, names
    assert {labels["trigger"] for labels, _ in exposure_count} <= set(get_args(Trigger))
    assert all(labels["surface"] and labels["region"] for labels, _ in exposure_count)
    exposure = _values(samples, prometheus_name("exposure_ms"))
    assert {labels.get("quantile") for labels, _ in exposure} >= {"0.5", "0.99"}
    assert all(value >= 0 for _, value in exposure)
    # Score drift: every admitted ok result's scores by bucket, a series' ten buckets all served.
    scores = _values(samples, prometheus_name("detector_scores"))
    assert scores and sum(value for _, value in scores) >= 100, names
    buckets: dict[tuple[str, str, str], set[str]] = {}
    for labels, _ in scores:
        series = (labels["detector"], labels["model_version"], labels["label"])
        buckets.setdefault(series, set()).add(labels["bucket"])
    assert all(found == set(drift.BUCKETS) for found in buckets.values()), buckets
    for gauge in ("oldest_pending_age_ms", "versions_pending", "open_discrepancies"):
        values = _values(samples, prometheus_name(gauge))
        assert values and all(value >= 0 for _, value in values), gauge
    assert _values(samples, prometheus_name("review_tasks"))


def _assert_results_by_detector(summary: dict[str, Any]) -> None:
    """The run's detector results per detector (issue 28 item 8): the generated workload's
    detectors, as many as the archive kept; no real media read (`--detectors generated`)."""
    counted = summary["results_by_detector"]
    assert set(counted) == {"offensive_text", "media_check", "nsfw_image"}
    assert 0 < sum(counted.values()) <= summary["archive"]["detector_results"]
    assert summary["read_media"] == []
