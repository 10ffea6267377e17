"""`modstream demo`: the waits, each a phase of the demo's progress on stderr
(modstream/core/progress.py): the jobs starting, the detector results of a real-detector run, the
decisions and the enforcement with their counts so far, the reconciler's SLA."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from modstream.core.config import Settings
from modstream.core.progress import Progress
from modstream.demo import workload
from modstream.demo.checks import ScanKey, settled, unanswered
from modstream.demo.deployment import Deployment
from modstream.demo.summary import DONE, LagWatch, mine
from modstream.stack import local as stack

WAIT_TIMEOUT_S = 300.0
RECONCILER_SLA_MS = 20_000
Say = Callable[[str], None]


def await_running(
    deployment: Deployment,
    jobs: dict[str, subprocess.Popen[bytes]],
    watch: LagWatch,
    say: Say,
    shown: Progress,
) -> None:
    """Every job running, then the lag watch started (it reads from the latest offsets)."""
    shown.phase(f"starting the {', '.join(jobs)} jobs", total=len(jobs), unit="jobs")
    for name, job in jobs.items():
        _wait_running(job, deployment.log_path(name))
        shown.update(advance=1)
    say(f"demo: {', '.join(jobs)} jobs running (logs in {deployment.logs})")
    metrics = deployment.metrics_endpoints()
    say("demo: metrics for Prometheus at " + ", ".join(f"{metrics[job]} ({job})" for job in jobs))
    watch.start()
    time.sleep(2)


def await_outcome(
    deployment: Deployment,
    marker: str,
    jobs: dict[str, subprocess.Popen[bytes]],
    client: Any,
    shown: Progress,
) -> bool:
    """Until the end marker is decided (False when it is not, in time or before a job
    stopped), then until every action is enforced, then past the reconciler's SLA."""
    settings, run_id, names = deployment.settings, deployment.run_id, deployment.names
    deadline = time.monotonic() + WAIT_TIMEOUT_S
    shown.phase("waiting for the committed decisions", unit="decisions")
    while True:
        decisions = mine(settings, names["moderation.decisions"], run_id)
        shown.update(len(decisions))
        if any(d["content_id"] == marker for d in decisions):
            break
        if time.monotonic() > deadline or any(j.poll() is not None for j in jobs.values()):
            print(f"demo: FAILED: no committed decision for the end marker; see {deployment.logs}")
            return False
        time.sleep(3)
    actions = mine(settings, names["moderation.actions"], run_id)
    shown.phase("waiting for enforcement", total=len(actions), unit="actions")
    while True:
        done = [a for a in actions if client.get(f"intent:{a['action_id']}") in DONE]
        shown.update(len(done))
        if len(done) == len(actions) or time.monotonic() > deadline:
            break
        time.sleep(2)
    with shown.waiting(f"{RECONCILER_SLA_MS / 1000:.0f} s (the reconciler's SLA) and a bit"):
        time.sleep(RECONCILER_SLA_MS / 1000 + 6)
    return True


def wait_for_scans(
    settings: Settings,
    run_id: str,
    names: dict[str, str],
    expected: set[ScanKey],
    shown: Progress,
    quiet_s: float = 12.0,
) -> None:
    """Until every scanned upload has a result of each detector its policy requires (the models
    asked after a gate included: demo_checks.expected_scans), unless its version no longer
    waits for evidence (deleted, bank-blocked, gate failed: demo_checks.settled), and no new
    result came for `quiet_s`. Meanwhile a tiny upload every second keeps event time moving,
    as live traffic would: the last uploads are decided, and their scans requested, once the
    watermark passes them; and a result that arrives more than the live window after its `ts`
    (stamped in its upload's time, behind a queue of images) makes its partition look like a
    paused backlog, which holds event time until live lanes have spoken for two fetch rounds
    after it, else for `--drained-after-ms` (ValidatedTime.java): `quiet_s` leaves time for
    those rounds."""
    last_count, last_change = -1, time.monotonic()
    deadline = time.monotonic() + WAIT_TIMEOUT_S
    shown.phase("waiting for the scan job's detector results", unit="results")
    while time.monotonic() < deadline:
        at = int(time.time() * 1000)
        workload.produce(
            settings.bootstrap_servers, [workload.marker(at, f"{run_id}end-tick-{at}")], names
        )
        results = [
            r
            for r in mine(settings, names["detector.results"], run_id)
            if (r["content_id"], r["content_version"], r["detector"]) in expected
        ]  # not the ticks' own results: one a second would never leave it quiet
        if len(results) != last_count:
            last_count, last_change = len(results), time.monotonic()
        shown.update(len(results))
        done = settled(mine(settings, names["moderation.decisions"], run_id))
        if not unanswered(expected, results, done) and time.monotonic() - last_change > quiet_s:
            return
        time.sleep(1)


def _wait_running(job: subprocess.Popen[bytes], log_path: Path) -> None:
    wait_running = getattr(job, "wait_running", None)
    if wait_running is not None:  # submitted to a cluster (modstream/demo/cluster.py)
        wait_running()
        time.sleep(3)
        return
    deadline = time.monotonic() + 180
    while " running" not in log_path.read_text(errors="replace"):
        if job.poll() is not None or time.monotonic() > deadline:
            raise stack.StackError(f"a demo job did not start; see {log_path}")
        time.sleep(0.5)
    time.sleep(3)  # the sources are assigned their partitions
