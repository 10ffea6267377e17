"""`modstream demo`: the stack, the topics, the whole loop on a generated workload, a summary.

Three jobs run: moderation, the Action Service (enforce) against the reference Content Service
on Redis, and the reconciler. Every upload is registered with the Content Service (quarantined
bytes) before its record is sent, as a platform would. The summary compares the visibility store
with the final decisions once the reconciler's SLA has passed; `--json` prints it as one line.

The workload (modstream/demo/workload.py) has text, images, video with segments and audio;
evidence with duplicates, late and missing results; reports, a review, an appeal (and a
conflicting second one), an edit, a delete, a re-evaluation, a hash-bank entry with a matching
upload, a signed shadow policy version and malformed records. Detector results come from the
generator until the real detectors run. Records of this run carry its run id, so the summary
counts only them even when earlier demos left records behind.

This module runs the steps; the run's deployment is modstream/demo/deployment.py, what is sent is
made in modstream/demo/demo_workload.py, the waits (each a phase of the progress on stderr) are in
modstream/demo/wait.py, and what the run produced is read back and summarized in
modstream/demo/summary.py.
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
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import redis

from modstream.core import endpoints, topics
from modstream.core.config import Settings
from modstream.core.progress import Progress
from modstream.demo import analytics as demo_analytics
from modstream.demo import console_reviewer, workload
from modstream.demo.checks import expected_scans
from modstream.demo.demo_workload import DemoWorkload, prepare
from modstream.demo.deployment import Deployment
from modstream.demo.summary import LagWatch, collect, print_summary, succeeded, summarize
from modstream.demo.wait import (
    RECONCILER_SLA_MS,
    Say,
    await_outcome,
    await_running,
    wait_for_scans,
)
from modstream.demo.workload import Line
from modstream.enforcement.content_service import ContentService
from modstream.scanning.pools import POOLS, Pool, as_options, serving
from modstream.stack import deployments
from modstream.stack import local as stack
from modstream.trust.signing import Keyring

DEMO_POLICY_KEY = "modstream-demo-key"  # used when MODSTREAM_POLICY_KEY is not set
# The demo requires signatures on every authority topic (docs/RELIABILITY.md, "Signed authority
# inputs"); keys come from this dev secret unless MODSTREAM_SIGNING_DEV_SECRET (or a keys file)
# is set.
DEMO_SIGNING_SECRET = "modstream-demo-signing"
DEFAULT_POLICY = "policy_rules/global.yaml"
# With real detectors every modality is really read (issue 28 item 8): global.yaml with
# ocr_text and speech_text required and read (tests/operators/test_policy_read_all.py keeps
# the two in step). The generated workload follows global.yaml (workload.REQUIRED).
READ_ALL_POLICY = "policy_rules/examples/global-read-all.yaml"


def _signing_env() -> dict[str, str]:
    """What the demo's jobs and its own producers use: signatures required on all four
    authority topics, keys derived from a dev secret."""
    return {
        "MODSTREAM_SIGNING_DEV_SECRET": os.environ.get("MODSTREAM_SIGNING_DEV_SECRET")
        or DEMO_SIGNING_SECRET,
        "MODSTREAM_SIGNATURES_REQUIRED": "all",
    }


@dataclasses.dataclass(frozen=True)
class Outcome:
    summary: dict[str, Any]
    ok: bool  # every action enforced, the visibility store matching the final decisions


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
    submitted to that session cluster (modstream/demo/cluster.py). Progress on stderr (no bar
    with `as_json`: plain log lines)."""
    with Progress("demo", live=False if as_json else None) as shown:
        return _run(
            settings,
            count,
            seed,
            as_json=as_json,
            real=detectors == "real",
            shown=shown,
            jobmanager=jobmanager,
        )


def _run(
    settings: Settings,
    count: int,
    seed: int,
    *,
    as_json: bool,
    real: bool,
    shown: Progress,
    jobmanager: str | None,
) -> int:
    started = time.monotonic()

    def say(message: str) -> None:
        if not as_json:
            print(message, flush=True)

    with shown.waiting("starting the local stack"):
        stack.up(settings, say=say)
    with shown.waiting("creating this run's topics"):
        deployment = _create_deployment(settings, list(_job_options(Path(), Path(), real=real)))
    deployments.record_demo(settings, deployment.run_id)
    key = os.environ.get("MODSTREAM_POLICY_KEY") or DEMO_POLICY_KEY
    policy_path = settings.project_root / (READ_ALL_POLICY if real else DEFAULT_POLICY)
    media_dir = settings.run_dir / "demo" / "media"
    env = {**os.environ, "MODSTREAM_POLICY_KEY": key, **_signing_env()}
    keyring = Keyring.from_env(env)
    with shown.waiting("generating the workload"):
        demo = prepare(
            deployment.run_id,
            count,
            seed,
            key=key,
            keyring=keyring,
            policy_path=policy_path,
            media_dir=media_dir,
            real=real,
        )
    # The platform side: every upload's bytes are quarantined in the Content Service first.
    client = redis.Redis.from_url(settings.redis_url)
    service = ContentService(client, media_dir)
    shown.phase("uploads into the Content Service", unit="records")
    _quarantine_uploads(service, shown.track(demo.lines, total=len(demo.lines)))
    deployment.logs.mkdir(parents=True, exist_ok=True)
    pools = demo_pools(demo.lines, demo.scanned) if real else []
    jobs = _start_jobs(deployment, policy_path, media_dir, env, pools, real=real, on=jobmanager)
    watch = LagWatch(settings, deployment.run_id, deployment.names)
    try:
        await_running(deployment, jobs, watch, say, shown)
        _send(deployment, demo, keyring, say, shown, count=count, real=real)
        if not await_outcome(deployment, demo.marker, jobs, client, shown):
            return 1
    finally:
        _stop(jobs, watch)
    outcome = _report(deployment, demo, service, client, watch, seed, started, as_json)
    analysed = demo_analytics.analyse(
        settings, deployment.prefix, deployment.run_id, real=real, shown=shown, say=say
    )
    console = console_reviewer.on_demo_run(settings, deployment, keyring, DEMO_SIGNING_SECRET)
    _print_end({**outcome.summary, **analysed, "review_console": console}, as_json, say)
    return 0 if outcome.ok else 1


def _print_end(summary: dict[str, Any], as_json: bool, say: Say) -> None:
    """The run's summary as one JSON line (`--json`), else how to open the review console (the
    rest of the summary was printed as it was made)."""
    if as_json:
        print(json.dumps(summary))
    else:
        say("\n".join(summary["review_console"]))


def _create_deployment(settings: Settings, jobs: list[str]) -> Deployment:
    """A fresh run id and this run's topics, created; a metrics port for each of `jobs`."""
    run_id = f"demo{uuid.uuid4().hex[:6]}-"
    prefix = run_id[:-1]
    names = topics.physical_names(prefix)
    topics.create_topics(
        settings.bootstrap_servers,
        [dataclasses.replace(spec, name=names[spec.name]) for spec in topics.TOPICS],
        say=lambda _: None,
        layout=settings.topics,
    )
    ports = dict(zip(jobs, endpoints.free_ports(len(jobs)), strict=True))
    return Deployment(settings, run_id, names, ports)


def _quarantine_uploads(service: ContentService, lines: Iterable[Line]) -> None:
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
            [sys.executable, "-m", f"modstream.jobs.{module}", *args],
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
    pools: Sequence[Pool] = POOLS,
    *,
    real: bool,
    on: str | None = None,
) -> dict[str, subprocess.Popen[bytes]]:
    """Moderation, the Action Service (enforce) and the reconciler; the scan job with `real`,
    running `pools`; local processes, or submitted to the cluster `on`
    (demo_cluster.SubmittedJob: a Popen's poll, send_signal, wait and kill)."""
    if on is None:
        start: Any = functools.partial(_start, deployment.settings, env=env)
    else:
        from modstream.demo import cluster as demo_cluster
        from modstream.stack import package

        built = package.build(package.default_dir(deployment.settings), deployment.settings)
        start = functools.partial(demo_cluster.submit, on, built, env=env)
    return {
        job: start(
            job,
            [*options, *deployment.job_args(job)],
            deployment.log_path(job),
        )
        for job, options in _job_options(policy_path, media_dir, real=real, pools=pools).items()
    }


def demo_pools(lines: Iterable[dict[str, Any]], scanned: set[str]) -> list[Pool]:
    """The scan pools the demo runs: every pool (modstream/scanning/pools.py) serving a modality
    the workload gives real content (`scanned`), in one scan job (one JVM on a 2-core machine
    instead of three; each pool its own source, Kafka group, admission and workers). A pool
    with nothing real to read would answer generated uploads' requests `error` (they carry no
    media), racing their generated evidence."""
    modalities = {
        value.get("modality")
        for line in lines
        if line.get("topic") == "content.versions"
        and isinstance(value := line.get("value"), dict)
        and value.get("content_id") in scanned
    }
    return serving(m for m in modalities if isinstance(m, str))


def _job_options(
    policy_path: Path, media_dir: Path, *, real: bool, pools: Sequence[Pool] = POOLS
) -> dict[str, list[str]]:
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
            *as_options(pools),
            "--checkpoint-interval-ms", "1000",
            "--media-root", str(media_dir),
            # each result's raw output, private and kept 30 days (modstream/detectors/raw_output.py)
            "--raw-output-dir", str(media_dir.parent / "raw-output"),
        ]  # fmt: skip
    return options


def _send(
    deployment: Deployment,
    demo: DemoWorkload,
    keyring: Keyring,
    say: Say,
    shown: Progress,
    *,
    count: int,
    real: bool,
) -> None:
    """The workload at once (a backlog); with `real`, at the pace of its event time, then the
    end markers once the scan job has answered."""
    settings, run_id, names = deployment.settings, deployment.run_id, deployment.names
    if real:
        say(f"demo: sending {len(demo.lines)} records at the pace of their event time")
        with shown.waiting(f"sending {len(demo.lines)} records at the pace of their event time"):
            _produce_paced(settings, demo.lines, names, keyring)
        expected = expected_scans(demo.lines, demo.policy, demo.scanned)
        wait_for_scans(settings, run_id, names, expected, shown)
        workload.produce(settings.bootstrap_servers, demo.markers, names)
    else:
        with shown.waiting(f"sending {len(demo.lines)} records"):
            workload.produce(settings.bootstrap_servers, demo.lines, names, keyring)
    say(
        f"demo: run {run_id[:-1]}: sent {len(demo.lines)} records "
        f"({count} content versions with their evidence and signals"
        + (", every modality scanned by the real detectors)" if real else ")")
    )


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
) -> Outcome:
    """The summary (printed now unless `as_json`: the caller prints it with the analytics)."""
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
        live=demo.live,
    )
    summary = {**summarize(results, started), "metrics": deployment.metrics_endpoints()}
    summary["run_id"] = deployment.run_id
    ok = succeeded(results, summary)
    if as_json:
        return Outcome(summary, ok)
    print_summary(
        results,
        summary,
        run_id=deployment.run_id,
        seed=seed,
        shadow_version=demo.policy["version"] + 1,
        retro_bank=demo.retro_bank,
        started=started,
    )
    return Outcome(summary, ok)


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
