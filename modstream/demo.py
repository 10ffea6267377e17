"""`modstream demo`: the stack, the topics, the moderation job on a generated workload, a summary.

The workload (modstream/workload.py) has text, images, video with segments and audio;
evidence with duplicates, late and missing results; reports, a review, an appeal (and a
conflicting second one), an edit, a delete, a re-evaluation, a hash-bank entry with a matching
upload, a signed shadow policy version and malformed records. Detector results come from the
generator until the real detectors run. Records of this run carry its run id, so the summary
counts only them even when earlier demos left records behind.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import yaml

from modstream import kafkaio, stack, topics, workload
from modstream.config import Settings
from modstream.workload import generate

WAIT_TIMEOUT_S = 300.0
DEMO_POLICY_KEY = "modstream-demo-key"  # used when MODSTREAM_POLICY_KEY is not set


def _next_policy_version(settings: Settings, key: bytes, policy: dict[str, Any]) -> int:
    from modstream.policy_cli import load_store

    store, _ = load_store(settings.bootstrap_servers, "policy.rules", key)
    # Every version the topic holds, the active one included, is a record with a document.
    seen = [
        record["version"] for record in store.records(policy["policy_id"]) if "document" in record
    ]
    return max([policy["version"], *seen])


def _mine(settings: Settings, topic: str, run_id: str) -> list[dict[str, Any]]:
    return [
        json.loads(r.value)
        for r in kafkaio.read_to_end(settings.bootstrap_servers, topic)
        if run_id in r.value.decode("utf-8", errors="replace")
    ]


def run(settings: Settings, count: int = 200, seed: int = 7) -> int:
    started = time.monotonic()
    print("demo: starting the local stack")
    stack.up(settings)
    topics.create_topics(settings.bootstrap_servers, say=lambda _: None)
    key = os.environ.get("MODSTREAM_POLICY_KEY") or DEMO_POLICY_KEY
    policy_path = settings.project_root / "policy_rules" / "global.yaml"
    policy = yaml.safe_load(policy_path.read_text())
    shadow_base = dict(policy, version=_next_policy_version(settings, key.encode(), policy))

    run_id = f"demo{uuid.uuid4().hex[:6]}-"
    now = int(time.time() * 1000)
    start_ts = now - count * 200 - 600_000
    lines = generate(seed=seed, versions=count, start_ts=start_ts, prefix=run_id)
    # A signed shadow candidate from the start: every decision is also made under it.
    from modstream.policy_cli import version_record

    candidate = dict(shadow_base, version=shadow_base["version"] + 1, default="PENDING")
    shadow_record = version_record(
        candidate,
        mode="shadow",
        author="demo",
        ts=start_ts - 1_000,
        parent_version=policy["version"],
        key=key.encode(),
        event_id=f"{run_id}shadow",
    )
    lines.insert(0, {"topic": "policy.rules", "value": shadow_record})
    last_ts = max(line["value"].get("ts", 0) for line in lines if isinstance(line["value"], dict))
    marker = f"{run_id}end"
    lines.append(workload.marker(last_ts + 300_000, marker))
    lines.append(workload.marker(last_ts + 400_000, f"{marker}2"))

    log_path = settings.run_dir / "demo" / f"moderation-{run_id}log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "MODSTREAM_POLICY_KEY": key}
    with open(log_path, "wb") as log:
        job = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "jobs.moderation",
                "--policy",
                str(policy_path),
                "--checkpoint-interval-ms",
                "2000",
                "--out-of-orderness-ms",
                "1000",
                "--idleness-ms",
                "2000",
            ],
            cwd=settings.project_root,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
        )
    try:
        _wait_running(job, log_path)
        print(f"demo: moderation job running (log {log_path})")
        workload.produce(settings.bootstrap_servers, lines)
        print(
            f"demo: run {run_id[:-1]}: sent {len(lines)} records "
            f"({count} content versions with their evidence and signals)"
        )
        deadline = time.monotonic() + WAIT_TIMEOUT_S
        while True:
            decisions = _mine(settings, "moderation.decisions", run_id)
            if any(d["content_id"] == marker for d in decisions):
                break
            if time.monotonic() > deadline or job.poll() is not None:
                print(f"demo: FAILED: no committed decision for the end marker; see {log_path}")
                return 1
            print(f"demo:   committed so far: {len(decisions)} decisions")
            time.sleep(3)
    finally:
        if job.poll() is None:
            job.send_signal(signal.SIGTERM)
            job.wait(timeout=90)

    decisions = [
        d
        for d in _mine(settings, "moderation.decisions", run_id)
        if not d["content_id"].startswith(marker)
    ]
    actions = _mine(settings, "moderation.actions", run_id)
    tasks = _mine(settings, "review.tasks", run_id)
    shadows = _mine(settings, "moderation.shadow", run_id)
    letters = _mine(settings, "moderation.dlq", run_id)
    revisions = Counter(
        (d["content_id"], d["content_version"], d["decision_revision"]) for d in decisions
    )
    latest: dict[tuple[str, int], dict[str, Any]] = {}
    for decision in decisions:
        version = (decision["content_id"], decision["content_version"])
        if (
            version not in latest
            or decision["decision_revision"] > latest[version]["decision_revision"]
        ):
            latest[version] = decision

    def line(title: str, counts: Counter[str]) -> None:
        print(f"  {title:<28} " + ", ".join(f"{k} {n}" for k, n in sorted(counts.items())))

    print()
    print(f"modstream demo summary (run {run_id[:-1]}, seed {seed})")
    print(f"  content versions decided      {len(latest)}")
    print(f"  decision revisions            {len(decisions)}")
    line("latest outcome", Counter(d["outcome"] for d in latest.values()))
    line("latest state", Counter(d["state"] for d in latest.values()))
    line("revisions by trigger", Counter(d["trigger"] for d in decisions))
    line("actions by visibility", Counter(a["visibility"] for a in actions))
    line("review tasks by queue", Counter(f"{t['kind']}:{t['queue']}" for t in tasks))
    print(f"  shadow decisions (policy v{shadow_base['version'] + 1})   {len(shadows)}")
    line("dead letters by class", Counter(letter["error_class"] for letter in letters))
    duplicates = sum(n - 1 for n in revisions.values())
    print(f"  duplicate revisions seen by a read_committed consumer: {duplicates}")
    print(
        f"  elapsed {time.monotonic() - started:.1f}s; the stack is still up (`make down` stops it)"
    )
    return 0 if duplicates == 0 and latest else 1


def _wait_running(job: subprocess.Popen[bytes], log_path: Path) -> None:
    deadline = time.monotonic() + 180
    while " running" not in log_path.read_text(errors="replace"):
        if job.poll() is not None or time.monotonic() > deadline:
            raise stack.StackError(f"the moderation job did not start; see {log_path}")
        time.sleep(0.5)
    time.sleep(3)  # the sources are assigned their partitions
