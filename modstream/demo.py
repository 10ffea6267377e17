"""`modstream demo`: the stack, the topics, the whole loop on a generated workload, a summary.

Three jobs run: moderation, the Action Service (enforce) against the reference Content Service
on Redis, and the reconciler. Every upload is registered with the Content Service (quarantined
bytes) before its record is sent, as a platform would. The summary compares the visibility store
with the final decisions once the reconciler's SLA has passed; `--json` prints it as one line.

The workload (modstream/workload.py) has text, images, video with segments and audio;
evidence with duplicates, late and missing results; reports, a review, an appeal (and a
conflicting second one), an edit, a delete, a re-evaluation, a hash-bank entry with a matching
upload, a signed shadow policy version and malformed records. Detector results come from the
generator until the real detectors run. Records of this run carry its run id, so the summary
counts only them even when earlier demos left records behind.

This module runs the steps; what is sent is made in modstream/demo_workload.py, and what the
run produced is read back and summarized in modstream/demo_summary.py.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import redis

from modstream import stack, topics, workload
from modstream.config import Settings
from modstream.content_service import ContentService
from modstream.demo_summary import (
    DONE,
    LagWatch,
    collect,
    mine,
    print_summary,
    succeeded,
    summarize,
)
from modstream.demo_workload import DemoWorkload, prepare
from modstream.workload import Line
from operators.signing import Keyring

WAIT_TIMEOUT_S = 300.0
DEMO_POLICY_KEY = "modstream-demo-key"  # used when MODSTREAM_POLICY_KEY is not set
# The demo requires signatures on every authority topic (docs/reliability/signing.md); keys
# come from this dev secret unless MODSTREAM_SIGNING_DEV_SECRET (or a keys file) is set.
DEMO_SIGNING_SECRET = "modstream-demo-signing"
RECONCILER_SLA_MS = 20_000
Say = Callable[[str], None]


def _signing_env() -> dict[str, str]:
    """What the demo's jobs and its own producers use: signatures required on all four
    authority topics, keys derived from a dev secret."""
    return {
        "MODSTREAM_SIGNING_DEV_SECRET": os.environ.get("MODSTREAM_SIGNING_DEV_SECRET")
        or DEMO_SIGNING_SECRET,
        "MODSTREAM_SIGNATURES_REQUIRED": "all",
    }


@dataclasses.dataclass(frozen=True)
class Deployment:
    """One run's own deployment: topics, consumer groups, transactional ids and checkpoints
    under its run id, so nothing one run leaves unread reaches the next one."""

    settings: Settings
    run_id: str  # "demo1a2b3c-": every record of the run carries it
    names: dict[str, str]  # contract topic name -> this run's topic

    @property
    def prefix(self) -> str:
        return self.run_id[:-1]

    @property
    def logs(self) -> Path:
        return self.settings.run_dir / "demo"

    def log_path(self, job: str) -> Path:
        return self.logs / f"{job}-{self.run_id}log"

    def job_args(self, job: str) -> list[str]:
        """A job's options that make it this deployment's."""
        args = [
            "--group-id", f"{self.prefix}-{job}",
            "--transactional-id-prefix", f"{self.prefix}-{job}",
            "--checkpoint-dir", str(self.logs / "checkpoints" / self.prefix / job),
        ]  # fmt: skip
        for name, physical in self.names.items():
            args += ["--topic", f"{name}={physical}"]
        return args


def run(
    settings: Settings,
    count: int = 200,
    seed: int = 7,
    *,
    as_json: bool = False,
    detectors: str = "generated",
    jobmanager: str | None = None,
) -> int:
    """The whole loop on a generated workload; 0 when every action was enforced and the
    visibility store matches the final decisions, else 1. With `jobmanager`, the jobs are
    submitted to that session cluster (modstream/demo_cluster.py)."""
    started = time.monotonic()

    def say(message: str) -> None:
        if not as_json:
            print(message, flush=True)

    say("demo: starting the local stack")
    stack.up(settings, say=say)
    deployment = _create_deployment(settings)
    key = os.environ.get("MODSTREAM_POLICY_KEY") or DEMO_POLICY_KEY
    policy_path = settings.project_root / "policy_rules" / "global.yaml"
    media_dir = settings.run_dir / "demo" / "media"
    real = detectors == "real"
    demo = prepare(
        deployment.run_id,
        count,
        seed,
        key=key,
        policy_path=policy_path,
        media_dir=media_dir,
        real=real,
    )
    # The platform side: every upload's bytes are quarantined in the Content Service first.
    client = redis.Redis.from_url(settings.redis_url)
    service = ContentService(client, media_dir)
    _quarantine_uploads(service, demo.lines)
    deployment.logs.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "MODSTREAM_POLICY_KEY": key, **_signing_env()}
    keyring = Keyring.from_env(env)
    jobs = _start_jobs(deployment, policy_path, media_dir, env, real=real, on=jobmanager)
    watch = LagWatch(settings, deployment.run_id, deployment.names)
    try:
        _await_running(deployment, jobs, watch, say)
        _send(deployment, demo, keyring, say, count=count, real=real)
        if not _await_outcome(deployment, demo.marker, jobs, client, say):
            return 1
    finally:
        _stop(jobs, watch)
    return _report(deployment, demo, service, client, watch, seed, started, as_json)


def _create_deployment(settings: Settings) -> Deployment:
    """A fresh run id and this run's topics, created."""
    run_id = f"demo{uuid.uuid4().hex[:6]}-"
    prefix = run_id[:-1]
    names = topics.physical_names(prefix)
    topics.create_topics(
        settings.bootstrap_servers,
        [dataclasses.replace(spec, name=names[spec.name]) for spec in topics.TOPICS],
        say=lambda _: None,
        layout=settings.topics,
    )
    return Deployment(settings, run_id, names)


def _quarantine_uploads(service: ContentService, lines: list[Line]) -> None:
    """Every upload's bytes (its media file, else its text) into the Content Service."""
    for line in lines:
        value = line["value"]
        if (
            line["topic"] == "content.versions"
            and isinstance(value, dict)
            and value.get("type") == "upsert"
            and isinstance(value.get("content_id"), str)
            and isinstance(value.get("content_version"), int)
        ):
            ref = value.get("media_ref")
            body = (
                Path(ref[len("file://") :]).read_bytes()
                if isinstance(ref, str) and ref.startswith("file://")
                else (value.get("text") or f"{value['content_id']} media").encode("utf-8")
            )
            service.upload(value["content_id"], value["content_version"], body, value["ts"])


def _start(
    settings: Settings, module: str, args: list[str], log_path: Path, env: dict[str, str]
) -> subprocess.Popen[bytes]:
    with open(log_path, "wb") as log:
        return subprocess.Popen(
            [sys.executable, "-m", f"jobs.{module}", *args],
            cwd=settings.project_root,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
        )


def _start_jobs(
    deployment: Deployment,
    policy_path: Path,
    media_dir: Path,
    env: dict[str, str],
    *,
    real: bool,
    on: str | None = None,
) -> dict[str, subprocess.Popen[bytes]]:
    """Moderation, the Action Service (enforce) and the reconciler; the scan job with `real`;
    local processes, or submitted to the cluster `on` (demo_cluster.SubmittedJob: a Popen's
    poll, send_signal, wait and kill)."""
    if on is None:
        start: Any = functools.partial(_start, deployment.settings, env=env)
    else:
        from modstream import demo_cluster, package

        built = package.build(package.default_dir(deployment.settings), deployment.settings)
        start = functools.partial(demo_cluster.submit, on, built, env=env)
    return {
        job: start(
            job,
            [*options, *deployment.job_args(job)],
            deployment.log_path(job),
        )
        for job, options in _job_options(policy_path, media_dir, real=real).items()
    }


def _job_options(policy_path: Path, media_dir: Path, *, real: bool) -> dict[str, list[str]]:
    """Each job's own options (module jobs/<name>.py), in starting order."""
    options = {
        "moderation": [
            "--policy", str(policy_path),
            "--checkpoint-interval-ms", "1000" if real else "2000",
            "--out-of-orderness-ms", "1000",
            "--idleness-ms", "2000",
        ],
        "enforce": [
            "--checkpoint-interval-ms", "1000",
            "--media-dir", str(media_dir),
        ],
        "reconciler": [
            "--checkpoint-interval-ms", "1000",
            "--sla-ms", str(RECONCILER_SLA_MS),
            "--media-dir", str(media_dir),  # its audits read what is served there
        ],
    }  # fmt: skip
    if real:
        options["scan"] = [
            "--modalities", "text,image",
            "--checkpoint-interval-ms", "1000",
            "--media-root", str(media_dir),
        ]  # fmt: skip
    return options


def _await_running(
    deployment: Deployment,
    jobs: dict[str, subprocess.Popen[bytes]],
    watch: LagWatch,
    say: Say,
) -> None:
    """Every job running, then the lag watch started (it reads from the latest offsets)."""
    for name, job in jobs.items():
        _wait_running(job, deployment.log_path(name))
    say(f"demo: {', '.join(jobs)} jobs running (logs in {deployment.logs})")
    watch.start()
    time.sleep(2)


def _send(
    deployment: Deployment,
    demo: DemoWorkload,
    keyring: Keyring,
    say: Say,
    *,
    count: int,
    real: bool,
) -> None:
    """The workload at once (a backlog); with `real`, at the pace of its event time, then the
    end markers once the scan job has answered."""
    settings, run_id, names = deployment.settings, deployment.run_id, deployment.names
    if real:
        say(f"demo: sending {len(demo.lines)} records at the pace of their event time")
        _produce_paced(settings, demo.lines, names, keyring)
        _wait_for_scans(settings, run_id, names, demo.scanned, say)
        workload.produce(settings.bootstrap_servers, demo.markers, names)
    else:
        workload.produce(settings.bootstrap_servers, demo.lines, names, keyring)
    say(
        f"demo: run {run_id[:-1]}: sent {len(demo.lines)} records "
        f"({count} content versions with their evidence and signals"
        + (", text and images scanned by the real detectors)" if real else ")")
    )


def _await_outcome(
    deployment: Deployment,
    marker: str,
    jobs: dict[str, subprocess.Popen[bytes]],
    client: Any,
    say: Say,
) -> bool:
    """Until the end marker is decided (False when it is not, in time or before a job
    stopped), then until every action is enforced, then past the reconciler's SLA."""
    settings, run_id, names = deployment.settings, deployment.run_id, deployment.names
    deadline = time.monotonic() + WAIT_TIMEOUT_S
    while True:
        decisions = mine(settings, names["moderation.decisions"], run_id)
        if any(d["content_id"] == marker for d in decisions):
            break
        if time.monotonic() > deadline or any(j.poll() is not None for j in jobs.values()):
            print(f"demo: FAILED: no committed decision for the end marker; see {deployment.logs}")
            return False
        say(f"demo:   committed so far: {len(decisions)} decisions")
        time.sleep(3)
    actions = mine(settings, names["moderation.actions"], run_id)
    while True:
        done = [a for a in actions if client.get(f"intent:{a['action_id']}") in DONE]
        if len(done) == len(actions) or time.monotonic() > deadline:
            break
        say(f"demo:   enforced so far: {len(done)} of {len(actions)} actions")
        time.sleep(2)
    say(f"demo: waiting {RECONCILER_SLA_MS / 1000:.0f} s (the reconciler's SLA) and a bit")
    time.sleep(RECONCILER_SLA_MS / 1000 + 6)
    return True


def _stop(jobs: dict[str, subprocess.Popen[bytes]], watch: LagWatch) -> None:
    """SIGTERM to every job still running; a job not gone within 90 s is killed."""
    watch.stopping.set()
    for job in jobs.values():
        if job.poll() is None:
            job.send_signal(signal.SIGTERM)
    for job in jobs.values():
        try:
            job.wait(timeout=90)
        except subprocess.TimeoutExpired:
            job.kill()


def _report(
    deployment: Deployment,
    demo: DemoWorkload,
    service: ContentService,
    client: Any,
    watch: LagWatch,
    seed: int,
    started: float,
    as_json: bool,
) -> int:
    """The summary (one JSON line with `as_json`); 0 when the run succeeded, else 1."""
    results = collect(
        deployment.settings,
        deployment.names,
        deployment.run_id,
        marker=demo.marker,
        lines=demo.lines,
        policy=demo.policy,
        service=service,
        client=client,
        watch=watch,
    )
    summary = summarize(results, started)
    ok = succeeded(results, summary)
    if as_json:
        print(json.dumps(summary))
        return 0 if ok else 1
    print_summary(
        results,
        summary,
        run_id=deployment.run_id,
        seed=seed,
        shadow_version=demo.policy["version"] + 1,
        retro_bank=demo.retro_bank,
        started=started,
    )
    return 0 if ok else 1


def _produce_paced(
    settings: Settings, lines: list[dict[str, Any]], names: dict[str, str], keyring: Keyring
) -> None:
    """Send each record when the wall clock reaches its ts, like live traffic (signed as it
    leaves, so with the ts it is sent with)."""

    def ts_of(line: dict[str, Any]) -> int:
        value = line["value"]
        ts = value.get("ts") if isinstance(value, dict) else None
        return ts if isinstance(ts, int) else 0

    pending = sorted(lines, key=ts_of)
    while pending:
        now = int(time.time() * 1000)
        cut = next((i for i, line in enumerate(pending) if ts_of(line) > now), len(pending))
        if cut:
            workload.produce(settings.bootstrap_servers, pending[:cut], names, keyring)
            pending = pending[cut:]
        time.sleep(0.1)


def _wait_for_scans(
    settings: Settings,
    run_id: str,
    names: dict[str, str],
    scanned: set[str],
    say: Say,
    quiet_s: float = 6.0,
) -> None:
    """Until every scanned upload has results and no new result came for `quiet_s`. Meanwhile
    a tiny upload every second keeps event time moving, as live traffic would (the last
    uploads are decided, and their scans requested, once the watermark passes them)."""
    last_count, last_change = -1, time.monotonic()
    deadline = time.monotonic() + WAIT_TIMEOUT_S
    while time.monotonic() < deadline:
        at = int(time.time() * 1000)
        workload.produce(
            settings.bootstrap_servers, [workload.marker(at, f"{run_id}end-tick-{at}")], names
        )
        results = [
            r
            for r in mine(settings, names["detector.results"], run_id)
            if r["content_id"] in scanned
        ]
        if len(results) != last_count:
            last_count, last_change = len(results), time.monotonic()
            say(f"demo:   detector results from the scan job: {len(results)}")
        covered = {r["content_id"] for r in results}
        if covered >= scanned and time.monotonic() - last_change > quiet_s:
            return
        time.sleep(1)


def _wait_running(job: subprocess.Popen[bytes], log_path: Path) -> None:
    wait_running = getattr(job, "wait_running", None)
    if wait_running is not None:  # submitted to a cluster (modstream/demo_cluster.py)
        wait_running()
        time.sleep(3)
        return
    deadline = time.monotonic() + 180
    while " running" not in log_path.read_text(errors="replace"):
        if job.poll() is not None or time.monotonic() > deadline:
            raise stack.StackError(f"a demo job did not start; see {log_path}")
        time.sleep(0.5)
    time.sleep(3)  # the sources are assigned their partitions
