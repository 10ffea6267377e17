"""The fault-injection harness (issue 13): the four jobs on a standalone Flink session cluster,
a generated workload produced at a steady pace, processes killed, paused and restarted while it
runs, then every record checked against `modstream replay` of the same input.

    python -m tests.faults.harness [--versions N] [--json]     (`make test-faults`)

The harness owns everything it breaks: its own Kafka broker and Redis (`modstream.stack.local`, its
own run directory and free ports), its own session cluster (`modstream.stack.cluster`), topics,
transactional ids and checkpoints unique to the run. Faults are small functions, the schedule a list
of (share of the workload sent, fault); each is counted and timed: recovery is the time from the
fault to the first output committed after the process came back.

Why the scan job writes to a side topic: the moderation job's evidence is the workload's own (so
replay of the same file is the oracle); the scan job still runs, is killed and is checked for
duplicates, on the text scan requests the moderation job sends it.

The last line printed is one JSON object; the exit status is 1 when a check found a duplicate, a
missing record or a discrepancy, or a fault could not be carried out.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
import uuid
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import redis
import yaml

from modstream.contract.records import decode_values, schema_topic
from modstream.core import kafkaio, topics
from modstream.core.config import PROJECT_ROOT, Settings
from modstream.demo import workload
from modstream.demo.workload import LEAD, REVIEWERS
from modstream.enforcement.content_service import ContentService
from modstream.moderation import step as moderation
from modstream.ops import replay
from modstream.review.queue import LEASE_MS, grant_record, lease_record
from modstream.stack import cluster
from modstream.stack import local as stack
from modstream.testing import faults as checks
from modstream.testing.faults import merge
from modstream.testing.stack import free_ports
from modstream.trust.signing import Keyring

POLICY = PROJECT_ROOT / "policy_rules" / "global.yaml"
POLICY_KEY = "modstream-faults-policy"
SIGNING_SECRET = "modstream-faults-signing"
JOBS = ("moderation", "scan", "enforce", "reconciler")
CHECKPOINT_INTERVAL_MS = 2_000
# The moderation job's transactions time out after this during the late restore only (it runs
# from a savepoint with it, dies, and is restored after longer); every other fault runs with the
# default 600 s, which Flink's own recovery after a TaskManager kill stays well within
# (docs/RELIABILITY.md, "Not guaranteed").
TRANSACTION_TIMEOUT_MS = 15_000
RECONCILER_SLA_MS = 20_000
# The short run's detector deadlines are at most this (policy_rules/global.yaml's run to 2 min):
# a deadline that waited while the job caught up after its late restore fires up to the longest
# deadline plus the grace after the job is live again, and the run waits for it (--settle-s).
SHORT_DEADLINE_CAP_MS = 20_000
# Longer than a Kafka client's request timeout (Flink's KafkaSink producer: 30 s).
PAUSE_S = 35.0
RECOVERY_TIMEOUT_S = 240.0
DONE = (b"COMPLETED", b"STALE")
SCAN_RESULTS = "scan.results.side"
Line = dict[str, Any]


# The workload -------------------------------------------------------------------------------


def signals(lines: list[Line], rng: random.Random, prefix: str, scale: float) -> list[Line]:
    """What `workload.generate` has only a few of, in the issue's numbers (scaled to the run):
    reports from a thousand reporters, reviews, appeals each closed by a review. Stamped within
    the uploads' time span, after the upload they name."""
    uploads = [
        line["value"]
        for line in lines
        if line["topic"] == "content.versions"
        and isinstance(line["value"], dict)
        and line["value"].get("type") == "upsert"
        and line["value"].get("content_version") == 1
        and str(line["value"].get("event_id", "")).startswith("up-")
    ]
    uploads = uploads[: max(1, int(len(uploads) * 0.9))]
    # The reviewers' grants (review.grants), after the workload's own: every queue, so their
    # proactive reviews and the appeals' reviews apply (modstream/review/access.py).
    granted = min(upload["ts"] for upload in uploads) + 1
    out: list[Line] = [
        {"topic": "review.grants", "value": grant_record(f"mod-{index}", ["*"], LEAD, granted)}
        for index in range(REVIEWERS)
    ]
    for index in range(int(5_000 * scale)):
        target = rng.choice(uploads)
        at = target["ts"] + rng.randrange(1_000, 60_000)
        report_id = f"{prefix}rep-f{index}"
        out.append(
            {
                "topic": "moderation.reports",
                "value": {
                    "event_id": report_id,
                    "report_id": report_id,
                    "content_id": target["content_id"],
                    "content_version": 1,
                    "reporter_id": f"{prefix}reporter{rng.randrange(1_000)}",
                    "reason": "spam",
                    "ts": at,
                },
            }
        )
    for index in range(int(300 * scale)):
        target = rng.choice(uploads)
        outcome = rng.choice(["BLOCK", "ALLOW", "RESTRICT"])
        out.append(review(f"{prefix}rv-f{index}", "external", target, outcome, rng))
    for index, target in enumerate(rng.sample(uploads, min(len(uploads), int(100 * scale)))):
        at = target["ts"] + rng.randrange(20_000, 40_000)
        appeal_id = f"{prefix}ap-f{index}"
        out.append(
            {
                "topic": "moderation.appeals",
                "value": {
                    "event_id": appeal_id,
                    "appeal_id": appeal_id,
                    "content_id": target["content_id"],
                    "content_version": 1,
                    "decision_revision": 1,
                    "user_id": target["author_id"],
                    "ts": at,
                },
            }
        )
        closing = review(f"{appeal_id}-rv", f"appeal-{appeal_id}", target, "ALLOW", rng)
        closing["value"]["ts"] = at + rng.randrange(1_000, 10_000)
        # The appeal's task leased by its reviewer just before the decision.
        task = {"task_id": f"appeal-{appeal_id}", "queue": "appeals", **target}
        leased = closing["value"]["ts"] - 1
        lease = lease_record(task, closing["value"]["reviewer_id"], leased, LEASE_MS)
        out += [{"topic": "review.leases", "value": lease}, closing]
    return out


def review(
    event_id: str, task_id: str, target: dict[str, Any], outcome: str, rng: random.Random
) -> Line:
    return {
        "topic": "review.decisions",
        "value": {
            "event_id": event_id,
            "task_id": task_id,
            "content_id": target["content_id"],
            "content_version": 1,
            "reviewer_id": f"mod-{rng.randrange(20)}",
            "outcome": outcome,
            "reason": "appeal_granted" if task_id.startswith("appeal-") else "harness_review",
            "ts": target["ts"] + rng.randrange(10_000, 60_000),
        },
    }


def ts_of(line: Line) -> int:
    value = line["value"]
    ts = value.get("ts") if isinstance(value, dict) else None
    return ts if isinstance(ts, int) else 0


# The run ------------------------------------------------------------------------------------


@dataclasses.dataclass
class Fault:
    share: float  # of the workload sent when it starts
    name: str
    inject: Callable[[Run], None]


class OutputWatch(threading.Thread):
    """When committed records arrive on the watched output topics: recovery is measured as the
    first arrival after a process came back."""

    def __init__(self, bootstrap_servers: str, physical: dict[str, str]) -> None:
        super().__init__(daemon=True)
        self.bootstrap_servers = bootstrap_servers
        self.physical = physical  # contract name -> physical
        self.arrivals: dict[str, list[float]] = {name: [] for name in physical}
        self.counts: Counter[str] = Counter()
        self.stopping = threading.Event()

    def run(self) -> None:
        from kafka import KafkaConsumer

        contract = {physical: name for name, physical in self.physical.items()}
        consumer = KafkaConsumer(
            *self.physical.values(),
            bootstrap_servers=self.bootstrap_servers,
            isolation_level="read_committed",
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            group_id=None,
            request_timeout_ms=15_000,
        )
        try:
            while not self.stopping.is_set():
                try:
                    polled = consumer.poll(timeout_ms=200)
                except Exception as error:  # the broker is down or paused: that is the test
                    print(f"faults: watch: poll failed ({type(error).__name__})", file=sys.stderr)
                    time.sleep(1)
                    continue
                now = time.monotonic()
                for partition, records in polled.items():
                    name = contract[partition.topic]
                    self.counts[name] += len(records)
                    self.arrivals[name].append(now)
        finally:
            consumer.close()

    def first_after(self, name: str, since: float, timeout_s: float) -> float | None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            later = [at for at in self.arrivals[name] if at > since]
            if later:
                return min(later)
            time.sleep(0.5)
        return None


class Run:
    """One harness run: its stack, cluster, topics, jobs, workload, faults and findings."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.started = time.monotonic()
        self.prefix = f"faults{uuid.uuid4().hex[:6]}"
        self.run_dir = Path(
            args.run_dir or PROJECT_ROOT / ".run" / "faults" / self.prefix
        ).resolve()
        kafka_port, controller_port, redis_port, self.rest_port, self.rpc_port = free_ports(5)
        self.settings = Settings(
            project_root=PROJECT_ROOT,
            run_dir=self.run_dir,
            kafka_port=kafka_port,
            controller_port=controller_port,
            redis_port=redis_port,
            media_dir=self.run_dir / "media",
        )
        self.media_dir = self.run_dir / "media"
        self.names = {spec.name: f"{self.prefix}.{spec.name}" for spec in topics.TOPICS}
        self.names[SCAN_RESULTS] = f"{self.prefix}.{SCAN_RESULTS}"
        self.address = f"127.0.0.1:{self.rest_port}"
        self.counts: Counter[str] = Counter()
        self.recoveries: list[dict[str, Any]] = []
        self.failures: list[str] = []
        self.produce_lock = threading.Lock()
        self.sent = 0
        self.total = 1
        self.ticking = threading.Event()
        self.watch: OutputWatch | None = None
        self.jobs_log = self.run_dir / "jobs"
        self.policy = POLICY

    def write_policy(self) -> None:
        """The short run's policy: global.yaml with each detector deadline capped at
        SHORT_DEADLINE_CAP_MS, so the settle that waits for deadlines stays short."""
        if not self.args.short:
            return
        document = yaml.safe_load(POLICY.read_text())
        for spec in document.get("detectors", {}).values():
            if "deadline_ms" in spec:
                spec["deadline_ms"] = min(int(spec["deadline_ms"]), SHORT_DEADLINE_CAP_MS)
        self.policy = self.run_dir / "policy.yaml"
        self.policy.write_text(yaml.safe_dump(document, sort_keys=False))

    # Small helpers.
    def say(self, message: str) -> None:
        if not self.args.quiet:
            print(f"faults [{time.monotonic() - self.started:7.1f}s] {message}", flush=True)

    def environment(self) -> None:
        """The jobs (on the TaskManagers and in `flink run`), replay and this process read
        their stack, keys and signing rules from the environment."""
        os.environ.update(
            {
                "MODSTREAM_RUN_DIR": str(self.run_dir),
                "MODSTREAM_KAFKA_PORT": str(self.settings.kafka_port),
                "MODSTREAM_KAFKA_CONTROLLER_PORT": str(self.settings.controller_port),
                "MODSTREAM_REDIS_PORT": str(self.settings.redis_port),
                "MODSTREAM_MEDIA_ROOT": str(self.media_dir),
                "MODSTREAM_POLICY_KEY": POLICY_KEY,
                "MODSTREAM_SIGNING_DEV_SECRET": SIGNING_SECRET,
                "MODSTREAM_SIGNATURES_REQUIRED": "all",
            }
        )

    def rest(self, path: str, method: str = "GET", body: dict[str, Any] | None = None) -> Any:
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(
            f"http://{self.address}{path}",
            data=data,
            method=method,
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=15) as response:
            text = response.read()
        return json.loads(text) if text else None

    def job_id(self, name: str) -> str | None:
        for job in self.rest("/jobs/overview")["jobs"]:
            if job["name"] == name and job["state"] not in ("CANCELED", "FAILED", "FINISHED"):
                return str(job["jid"])
        return None

    def wait_state(self, jid: str, states: tuple[str, ...], timeout_s: float = 180) -> str:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            state = str(self.rest(f"/jobs/{jid}")["state"])
            if state in states:
                return state
            time.sleep(0.5)
        raise RuntimeError(f"job {jid} not in {states} within {timeout_s:.0f}s")

    def wait_running(self, names: tuple[str, ...] = JOBS, timeout_s: float = 240) -> None:
        """Until every named job runs all its tasks (a restarted job is RUNNING before its
        tasks are)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            jobs = self.rest("/jobs/overview")["jobs"]
            running = {
                job["name"]
                for job in jobs
                if job["state"] == "RUNNING" and job["tasks"]["running"] == job["tasks"]["total"]
            }
            if set(names) <= running:
                return
            time.sleep(1)
        raise RuntimeError(f"jobs {names} not all running within {timeout_s:.0f}s")

    def checkpoint_dir(self, job: str) -> Path:
        return self.run_dir / "checkpoints" / job

    def completed_checkpoints(self, job: str) -> set[Path]:
        return {meta.parent for meta in self.checkpoint_dir(job).glob("*/chk-*/_metadata")}

    def wait_new_checkpoint(self, job: str, timeout_s: float = 120) -> Path:
        """Returns as soon as a new checkpoint's _metadata exists (polled every 20 ms): the
        moment after a checkpoint completes, before its transactions are surely committed."""
        before = self.completed_checkpoints(job)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            new = self.completed_checkpoints(job) - before
            if new:
                return max(new, key=lambda p: int(p.name.split("-")[1]))
            time.sleep(0.02)
        raise RuntimeError(f"no new {job} checkpoint within {timeout_s:.0f}s")

    def recovered(self, fault: str, since: float, back_at: float, output: str) -> None:
        """Recovery of one fault: from `since` (the kill) to the first `output` committed after
        `back_at` (the process came back)."""
        assert self.watch is not None
        first = self.watch.first_after(output, back_at, RECOVERY_TIMEOUT_S)
        seconds = None if first is None else round(first - since, 1)
        self.recoveries.append({"fault": fault, "output": output, "recovery_s": seconds})
        if seconds is None:
            self.failures.append(f"{fault}: no {output} within {RECOVERY_TIMEOUT_S:.0f}s")
        self.say(f"{fault}: {output} flowing again after {seconds} s")

    # The jobs.
    def job_args(self, job: str, *, short_timeout: bool = False) -> list[str]:
        args = [
            "--bootstrap-servers", self.settings.bootstrap_servers,
            "--group-id", f"{self.prefix}-{job}",
            "--transactional-id-prefix", f"{self.prefix}-{job}",
            "--checkpoint-dir", str(self.checkpoint_dir(job)),
            "--checkpoint-interval-ms", str(CHECKPOINT_INTERVAL_MS),
        ]  # fmt: skip
        mapping = {name: physical for name, physical in self.names.items() if name != SCAN_RESULTS}
        if job == "scan":
            mapping["detector.results"] = self.names[SCAN_RESULTS]
        for name, physical in mapping.items():
            args += ["--topic", f"{name}={physical}"]
        extra = {
            "moderation": [
                "--policy", str(self.policy),
                "--out-of-orderness-ms", "1000",
                "--idleness-ms", "2000",
            ],
            "scan": ["--modalities", "text", "--media-root", str(self.media_dir)],
            "enforce": ["--media-dir", str(self.media_dir)],
            "reconciler": ["--sla-ms", str(RECONCILER_SLA_MS)],
        }[job]  # fmt: skip
        if short_timeout:
            extra += ["--transaction-timeout-ms", str(TRANSACTION_TIMEOUT_MS)]
        if job == "enforce" and self.args.purge_failure_rate > 0:
            extra += ["--purge-failure-rate", str(self.args.purge_failure_rate)]
        return args + extra

    def submit(self, job: str, *restore: str, short_timeout: bool = False) -> None:
        self.jobs_log.mkdir(parents=True, exist_ok=True)
        with open(self.jobs_log / f"submit-{job}.log", "ab") as log:
            code = cluster.submit(
                job,
                self.address,
                [*self.job_args(job, short_timeout=short_timeout), *restore],
                output=log,
                local=True,
            )
        if code != 0:
            raise RuntimeError(f"submitting {job} failed ({code}); see {self.jobs_log}")

    def cancel(self, job: str) -> str:
        jid = self.job_id(job)
        if jid is None:
            raise RuntimeError(f"no {job} job to cancel")
        self.rest(f"/jobs/{jid}?mode=cancel", method="PATCH")
        self.wait_state(jid, ("CANCELED",), timeout_s=120)
        return jid

    # Setup and teardown.
    def up(self) -> None:
        self.environment()
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.write_policy()
        self.say(f"run {self.prefix}: stack and cluster in {self.run_dir}")
        stack.up(self.settings, say=self.say)
        specs = [dataclasses.replace(spec, name=self.names[spec.name]) for spec in topics.TOPICS]
        results = next(spec for spec in topics.TOPICS if spec.name == "detector.results")
        specs.append(dataclasses.replace(results, name=self.names[SCAN_RESULTS]))
        topics.create_topics(self.settings.bootstrap_servers, specs, say=lambda _: None)
        cluster.up(
            self.settings,
            rest_port=self.rest_port,
            rpc_port=self.rpc_port,
            slots=len(JOBS),
            say=self.say,
            conf={"taskmanager.memory.process.size": "3072m"},
            local_python=True,  # restores timed as before packaging (cluster.LOCAL_PYTHON_MARKER)
        )
        for job in JOBS:
            self.say(f"submitting {job}")
            self.submit(job)
        self.wait_running()
        self.say("all four jobs running")
        watched = ("moderation.decisions", "content.visibility", SCAN_RESULTS)
        self.watch = OutputWatch(
            self.settings.bootstrap_servers, {name: self.names[name] for name in watched}
        )
        self.watch.start()

    def down(self) -> None:
        if self.watch is not None:
            self.watch.stopping.set()
        try:
            cluster.down(self.settings, say=self.say)
        finally:
            stack.down(self.settings, say=self.say)

    # The workload.
    def workload(self) -> tuple[list[Line], list[Line], int]:
        """The lines to send (generated, extra signals, end markers), the markers alone, and
        the cutoff: decisions stamped after it are not compared (the live run's event time
        stops near it, a replay's runs to the end of time)."""
        versions = self.args.versions
        policy = yaml.safe_load(self.policy.read_text())
        span_ms = versions * 200 + 1_000
        # The last upload is stamped about when the pacer sends it: the run starts as a backlog
        # and ends live, so deadlines of evidence that never comes fire as they would live.
        start_ts = int(time.time() * 1000) + int(self.args.duration_s * 1000) - span_ms
        lines = workload.generate(
            seed=self.args.seed,
            versions=versions,
            start_ts=start_ts,
            policy_document=policy,
            policy_key=POLICY_KEY.encode(),
            prefix=f"{self.prefix}-",
        )
        rng = random.Random(self.args.seed)
        lines = merge(lines, signals(lines, rng, f"{self.prefix}-", versions / 20_000))
        last_ts = max(ts_of(line) for line in lines)
        self.max_deadline_ms = max(
            int(spec.get("deadline_ms", 0)) for spec in policy.get("detectors", {}).values()
        )
        after_deadlines = last_ts + self.max_deadline_ms
        end = f"{self.prefix}-end"
        markers = [
            workload.marker(after_deadlines + 1_000, end),
            workload.marker(after_deadlines + 11_000, f"{end}2"),
        ]
        return lines + markers, markers, after_deadlines + 1_000

    def upload(self, lines: list[Line]) -> None:
        """The platform side: every upload's bytes quarantined before its record is sent."""
        service = ContentService(redis.Redis.from_url(self.settings.redis_url), self.media_dir)
        for line in lines:
            value = line["value"]
            if (
                line["topic"] == "content.versions"
                and isinstance(value, dict)
                and value.get("type") == "upsert"
                and isinstance(value.get("content_id"), str)
                and isinstance(value.get("content_version"), int)
            ):
                body = (value.get("text") or f"{value['content_id']} media").encode("utf-8")
                service.upload(value["content_id"], value["content_version"], body, value["ts"])

    def produce(self, lines: list[Line], keyring: Keyring) -> None:
        """Sends the lines on a compressed clock: from a backlog at the start to live at the
        end, `duration_s` in all; then a live tick every second until told to stop (event time
        follows the clock once the data ends, as it would with live traffic). Never while a
        broker fault holds the lock, so the input is sent exactly once."""
        first = min(
            ts_of(line) for line in lines if line["topic"] == "content.versions" and ts_of(line)
        )
        last = max(ts_of(line) for line in lines[:-2])  # the markers go last, at once
        began = time.monotonic()
        speed = max(1.0, (last - first) / (self.args.duration_s * 1000))
        position = 0
        while position < len(lines):
            due = first + (time.monotonic() - began) * 1000 * speed
            cut = position
            while cut < len(lines) - 2 and ts_of(lines[cut]) <= due:
                cut += 1
            if cut == len(lines) - 2 and time.monotonic() - began >= self.args.duration_s:
                cut = len(lines)
            if cut > position:
                with self.produce_lock:
                    workload.produce(
                        self.settings.bootstrap_servers, lines[position:cut], self.names, keyring
                    )
                position = cut
                self.sent = position
            time.sleep(0.1)
        self.say(f"all {len(lines)} records sent; live ticks from now on")
        while not self.ticking.is_set():
            at = int(time.time() * 1000)
            with self.produce_lock:
                workload.produce(
                    self.settings.bootstrap_servers,
                    [workload.marker(at, f"{self.prefix}-tick-{at}")],
                    self.names,
                )
            time.sleep(1)

    def run_faults(self, schedule: list[Fault]) -> None:
        for fault in schedule:
            while self.sent < fault.share * self.total:
                time.sleep(0.2)
            self.say(f"FAULT {fault.name} (sent {self.sent}/{self.total})")
            try:
                fault.inject(self)
            except Exception as error:  # a fault that could not be carried out fails the run
                self.failures.append(f"{fault.name}: {type(error).__name__}: {error}")
                self.say(f"FAULT {fault.name} FAILED: {error}")

    def progress(self, stop: threading.Event) -> None:
        while not stop.wait(15):
            seen = dict(self.watch.counts) if self.watch is not None else {}
            self.say(f"sent {self.sent}/{self.total}; committed outputs so far {seen}")

    # Collecting what happened.
    def committed(self, name: str) -> list[dict[str, Any]]:
        records = kafkaio.read_to_end(
            self.settings.bootstrap_servers, self.names[name], timeout_s=120
        )
        values, skipped = decode_values(records, schema_topic(name))
        if skipped:
            self.say(f"{name}: {skipped} record(s) not decodable")
        return values

    def dump(self, folder: str, records: dict[str, list[dict[str, Any]]]) -> None:
        """The records the checks read, kept in the run directory as evidence."""
        (self.run_dir / folder).mkdir(parents=True, exist_ok=True)
        for name, values in records.items():
            with open(self.run_dir / folder / f"{name}.jsonl", "w", encoding="utf-8") as out:
                out.writelines(json.dumps(value) + "\n" for value in values)

    def wait_end(self, end: str, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if any(d["content_id"] == end for d in self.committed("moderation.decisions")):
                return
            time.sleep(5)
        raise RuntimeError(f"the end marker {end} was not decided within {timeout_s:.0f}s")

    def wait_enforced(self, timeout_s: float, quiet_s: float = 45) -> None:
        """Until every action's intent is done, or none got done for `quiet_s` (an intent whose
        record a Redis kill rolled back stays open; the checks compare what is served)."""
        client = redis.Redis.from_url(self.settings.redis_url)
        deadline = time.monotonic() + timeout_s
        last, progress_at = -1, time.monotonic()
        open_ids: list[str] = []
        while time.monotonic() < deadline and time.monotonic() - progress_at < quiet_s:
            actions = [
                a
                for a in self.committed("moderation.actions")
                if not a["content_id"].startswith(f"{self.prefix}-tick-")
            ]
            open_ids = [
                action["action_id"]
                for action in actions
                if client.get(f"intent:{action['action_id']}") not in DONE
            ]
            self.say(f"enforced {len(actions) - len(open_ids)} of {len(actions)} actions")
            if not open_ids:
                return
            if len(open_ids) != last:
                last, progress_at = len(open_ids), time.monotonic()
            time.sleep(5)
        self.say(f"intents not done: {open_ids[:5]} (the checks compare what is served)")

    def served(self, content_ids: set[str]) -> dict[str, tuple[str | None, bool | None]]:
        service = ContentService(redis.Redis.from_url(self.settings.redis_url), self.media_dir)
        now = int(time.time() * 1000)
        out: dict[str, tuple[str | None, bool | None]] = {}
        for content_id in content_ids:
            effective = service.effective(content_id, now)
            if effective is None:
                out[content_id] = (None, None)
            else:
                exported = service.is_exported(content_id, effective.content_version)
                out[content_id] = (effective.visibility, exported)
        return out

    def replay(self, lines: list[Line], keyring: Keyring) -> dict[str, list[dict[str, Any]]]:
        work = Path(tempfile.mkdtemp(prefix="replay-", dir=self.run_dir))
        events = work / "events.jsonl"
        workload.write(lines, events, keyring)
        result = subprocess.run(
            replay.command(events, self.policy, work / "out"),
            cwd=PROJECT_ROOT,
            capture_output=True,
            text=True,
            timeout=1800,
            check=False,
        )
        if result.returncode != 0:
            raise RuntimeError(f"replay failed: {result.stdout[-2000:]}{result.stderr[-3000:]}")
        return {
            path.stem: [json.loads(line) for line in path.read_text().splitlines()]
            for path in (work / "out").glob("*.jsonl")
        }


# The faults: one small function each ---------------------------------------------------------


def kill_taskmanager(run: Run, *, after_checkpoint: bool = False) -> None:
    """kill -9 every TaskManager (all four jobs lose their tasks), then start a new one."""
    if after_checkpoint:
        chk = run.wait_new_checkpoint("moderation")
        run.say(f"  moderation {chk.name} completed; killing now")
    since = time.monotonic()
    for pid in cluster.daemon_pids(run.settings):
        os.kill(pid, signal.SIGKILL)
    run.counts["taskmanager_kills"] += 1
    cluster.start_taskmanager(run.settings)
    back = time.monotonic()
    run.recovered(
        "taskmanager kill" + (" after checkpoint" if after_checkpoint else ""),
        since,
        back,
        "moderation.decisions",
    )
    run.wait_running()


def kill_taskmanager_after_checkpoint(run: Run) -> None:
    kill_taskmanager(run, after_checkpoint=True)


def late_restore(run: Run) -> None:
    """The moderation job, running with a short transaction timeout (resumed from a savepoint
    with it), dies right after a checkpoint completes (its TaskManager is killed, the job
    cancelled so nothing restarts it), and is started again (default restore: the newest usable
    checkpoint) only after the broker has aborted its open transactions."""
    location = _stop_with_savepoint(run)
    run.submit("moderation", "--restore-from", location, short_timeout=True)
    run.wait_running()
    chk = run.wait_new_checkpoint("moderation")
    chk = run.wait_new_checkpoint("moderation")
    since = time.monotonic()
    for pid in cluster.daemon_pids(run.settings):
        os.kill(pid, signal.SIGKILL)
    run.say(f"  moderation {chk.name} completed; TaskManager killed")
    run.cancel("moderation")
    cluster.start_taskmanager(run.settings)
    # The broker looks for timed-out transactions every 10 s.
    wait = TRANSACTION_TIMEOUT_MS / 1000 + 15 - (time.monotonic() - since)
    if wait > 0:
        time.sleep(wait)
    run.say(f"  restoring moderation {time.monotonic() - since:.0f} s after it died")
    run.submit("moderation")
    run.counts["late_restores"] += 1
    run.recovered("late restore", since, time.monotonic(), "moderation.decisions")
    run.wait_running()


def restart_broker(run: Run) -> None:
    """The Kafka broker stopped and started again (no input is sent meanwhile)."""
    broker = stack.Kafka(run.settings)
    with run.produce_lock:
        since = time.monotonic()
        broker.stop(say=run.say)
        broker.start(say=run.say)
    run.counts["broker_restarts"] += 1
    run.recovered("broker restart", since, time.monotonic(), "moderation.decisions")
    run.wait_running()


def kill_redis(run: Run) -> None:
    """kill -9 Redis (its append-only file is fsynced every second) and start it again."""
    server = stack.Redis(run.settings)
    pid = server.pid()
    if pid is None:
        raise RuntimeError("redis is not running")
    since = time.monotonic()
    os.kill(pid, signal.SIGKILL)
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, 0)  # our child: reaped, so its pid file names no live process
    server.start(say=run.say)
    run.counts["redis_restarts"] += 1
    run.recovered("redis kill", since, time.monotonic(), "content.visibility")


def kill_scan_job(run: Run) -> None:
    """The scan job cancelled and submitted again from its newest checkpoint."""
    since = time.monotonic()
    run.cancel("scan")
    run.submit("scan", "--restore-from", "latest")
    run.counts["scan_kills"] += 1
    run.recovered("scan job kill", since, time.monotonic(), SCAN_RESULTS)
    run.wait_running()


def _stop_with_savepoint(run: Run) -> str:
    """Stop the moderation job with a savepoint (the operator's pause); its location."""
    jid = run.job_id("moderation")
    if jid is None:
        raise RuntimeError("no moderation job")
    target = run.run_dir / "savepoints"
    trigger = run.rest(
        f"/jobs/{jid}/stop", "POST", {"targetDirectory": str(target), "drain": False}
    )
    since = time.monotonic()
    while time.monotonic() - since < 180:
        status = run.rest(f"/jobs/{jid}/savepoints/{trigger['request-id']}")
        if status["status"]["id"] == "COMPLETED":
            operation = status.get("operation") or {}
            if "location" not in operation:
                raise RuntimeError(f"stop with savepoint failed: {operation}")
            return str(operation["location"])
        time.sleep(0.5)
    raise RuntimeError("stop with savepoint did not complete")


def pause_resume_moderation(run: Run) -> None:
    """The operator's pause: stop with a savepoint, resume from it."""
    since = time.monotonic()
    location = _stop_with_savepoint(run)
    run.say(f"  paused at savepoint {location}; resuming")
    run.submit("moderation", "--restore-from", location)
    run.counts["job_pauses"] += 1
    run.recovered("pause and resume", since, time.monotonic(), "moderation.decisions")
    run.wait_running()


def _sigstop(run: Run, pids: list[int], what: str) -> None:
    since = time.monotonic()
    for pid in pids:
        os.kill(pid, signal.SIGSTOP)
    time.sleep(PAUSE_S)
    for pid in pids:
        os.kill(pid, signal.SIGCONT)
    run.counts["pauses"] += 1
    run.recovered(
        f"{what} SIGSTOP {PAUSE_S:.0f} s", since, time.monotonic(), "moderation.decisions"
    )


def pause_broker(run: Run) -> None:
    """SIGSTOP the broker for longer than a client's request timeout, then SIGCONT."""
    pid = stack.Kafka(run.settings).pid()
    if pid is None:
        raise RuntimeError("the broker is not running")
    with run.produce_lock:
        _sigstop(run, [pid], "broker")
    run.wait_running()


def pause_taskmanager(run: Run) -> None:
    """SIGSTOP a TaskManager for longer than a client's request timeout, then SIGCONT."""
    _sigstop(run, cluster.daemon_pids(run.settings)[:1], "taskmanager")
    run.wait_running()


FULL = [
    Fault(0.08, "kill -9 TaskManager right after a checkpoint", kill_taskmanager_after_checkpoint),
    Fault(0.18, "kill -9 Redis", kill_redis),
    Fault(0.26, "pause and resume the moderation job", pause_resume_moderation),
    Fault(0.34, "restart the broker", restart_broker),
    Fault(0.42, "kill the scan job", kill_scan_job),
    Fault(0.50, "late restore of the moderation job", late_restore),
    Fault(0.62, "SIGSTOP the broker", pause_broker),
    Fault(0.72, "SIGSTOP a TaskManager", pause_taskmanager),
    Fault(0.82, "kill -9 TaskManager", kill_taskmanager),
]
SHORT = [
    Fault(0.15, "kill -9 TaskManager right after a checkpoint", kill_taskmanager_after_checkpoint),
    Fault(0.40, "late restore of the moderation job", late_restore),
    Fault(0.70, "kill -9 Redis", kill_redis),
]
SCHEDULES = {"full": FULL, "short": SHORT, "none": []}


def execute(args: argparse.Namespace) -> dict[str, Any]:
    run = Run(args)
    schedule = SCHEDULES["short" if args.short else args.schedule]
    summary: dict[str, Any] = {"run": run.prefix, "versions": args.versions}
    try:
        run.up()
        keyring = Keyring.from_env()
        lines, markers, cutoff = run.workload()
        run.total = len(lines)
        run.upload(lines)
        run.say(
            f"workload: {len(lines)} records ({args.versions} versions); "
            f"faults: {', '.join(f.name for f in schedule)}"
        )
        stop_progress = threading.Event()
        threading.Thread(target=run.progress, args=(stop_progress,), daemon=True).start()
        producer = threading.Thread(target=run.produce, args=(lines, keyring), daemon=True)
        producer.start()
        run.run_faults(schedule)
        run.wait_end(markers[0]["value"]["content_id"], timeout_s=900)
        ended = time.monotonic()
        run.say("end marker decided")
        run.wait_enforced(timeout_s=300)
        run.say(f"waiting {RECONCILER_SLA_MS / 1000:.0f} s (the reconciler's SLA) and a bit")
        time.sleep(RECONCILER_SLA_MS / 1000 + 10)
        # A deadline that waited while the job caught up fires at most the detectors' longest
        # deadline plus the grace after the job is live again (docs/moderation.md, "Time").
        settle_s = (
            args.settle_s
            if args.settle_s is not None
            else (run.max_deadline_ms + moderation.EVIDENCE_GRACE_MS) / 1000 + 5
        )
        remaining = ended + settle_s - time.monotonic()
        if remaining > 0:
            run.say(f"waiting {remaining:.0f} s more for deadlines that waited to fire")
            time.sleep(remaining)
            run.wait_enforced(timeout_s=120)
        # The moderation job keeps deciding as the clock moves event time on (provisional
        # expiries): stopped, and its last actions applied, what is read next is one moment.
        run.ticking.set()
        run.cancel("moderation")
        run.wait_enforced(timeout_s=120)
        live = {
            name: run.committed(name)
            for name in (
                "moderation.decisions",
                "moderation.actions",
                "user.notifications",
                "account.actions",
            )
        }
        scan_results = run.committed(SCAN_RESULTS)
        run.dump("live", {**live, SCAN_RESULTS: scan_results})
        run.ticking.set()
        stop_progress.set()
        content_ids = {d["content_id"] for d in live["moderation.decisions"]}
        served = run.served(content_ids)
        run.down()
        run.say("replaying the same input")
        replayed = run.replay(lines, keyring)
        ignore = frozenset(
            c
            for c in content_ids
            if c.startswith(f"{run.prefix}-tick-") or c.startswith(f"{run.prefix}-end")
        )
        findings = checks.check(live, replayed, served, cutoff, ignore)
        scan_dupes = checks.duplicates(scan_results, key=lambda r: r["event_id"])
        findings.duplicates["scan_results"] = scan_dupes
        counts = findings.counts()
        recoveries = [r["recovery_s"] for r in run.recoveries if r["recovery_s"] is not None]
        summary.update(
            {
                "wall_s": round(time.monotonic() - run.started, 1),
                "decisions": len(live["moderation.decisions"]),
                "actions": len(live["moderation.actions"]),
                "faults": run.recoveries,
                "fault_failures": run.failures,
                "samples": findings.samples(),
                "run_dir": str(run.run_dir),
                "events": len(lines),
                "taskmanager_kills": run.counts["taskmanager_kills"],
                "broker_restarts": run.counts["broker_restarts"],
                "redis_restarts": run.counts["redis_restarts"],
                "late_restores": run.counts["late_restores"],
                "pauses": run.counts["pauses"],
                "job_pauses": run.counts["job_pauses"],
                "scan_kills": run.counts["scan_kills"],
                "purge_failure_rate": args.purge_failure_rate,
                **counts,
                "recovery_s": max(recoveries, default=None),
            }
        )
        return summary
    except BaseException:
        run.ticking.set()
        try:
            run.down()
        except Exception as error:
            print(f"faults: teardown: {error}", file=sys.stderr)
        raise


def _terminate(signum: int, _frame: Any) -> None:
    raise SystemExit(128 + signum)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tests.faults.harness", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--versions", type=int, default=20_000)
    parser.add_argument("--seed", type=int, default=13)
    parser.add_argument(
        "--duration-s",
        type=float,
        default=None,
        help="how long the workload is sent over (default: by size)",
    )
    parser.add_argument(
        "--short", action="store_true", help="three faults (the `make test` variant)"
    )
    parser.add_argument(
        "--schedule",
        choices=sorted(SCHEDULES),
        default="full",
        help="which faults; `none` runs the same checks without any (a baseline)",
    )
    parser.add_argument(
        "--purge-failure-rate",
        type=float,
        default=0.1,
        help="share of the enforce job's cache purges that fail (default 0.1; 0: off)",
    )
    parser.add_argument(
        "--settle-s",
        type=float,
        default=None,
        help="seconds after the end marker before the outputs are read (default: the longest "
        "detector deadline plus the grace, for deadlines that waited)",
    )
    parser.add_argument("--run-dir", type=Path, default=None)
    parser.add_argument(
        "--keep", action="store_true", help="keep the run directory when the run passes"
    )
    parser.add_argument("--json", action="store_true", help="only the JSON line")
    args = parser.parse_args(argv)
    args.quiet = args.json
    if args.duration_s is None:
        args.duration_s = max(120.0, args.versions * 0.03)
    # A SIGTERM (a test's timeout, Ctrl-C's sibling) tears down what this run started.
    signal.signal(signal.SIGTERM, _terminate)
    summary = execute(args)
    ok = (
        summary["duplicates"] == 0
        and summary["missing"] == 0
        and summary["discrepancies"] == 0
        and not summary["fault_failures"]
    )
    if ok and not args.keep:
        shutil.rmtree(summary["run_dir"], ignore_errors=True)
    print(json.dumps(summary), flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
