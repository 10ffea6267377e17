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
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import redis
import yaml

from modstream import kafkaio, stack, topics, workload
from modstream.config import Settings
from modstream.content_service import ContentService
from modstream.workload import generate
from operators.moderation import VISIBILITY
from operators.signing import Keyring

DONE = (b"COMPLETED", b"STALE")  # intents the Action Service has finished

WAIT_TIMEOUT_S = 300.0
DEMO_POLICY_KEY = "modstream-demo-key"  # used when MODSTREAM_POLICY_KEY is not set
# The demo requires signatures on every authority topic (docs/reliability/signing.md); keys
# come from this dev secret unless MODSTREAM_SIGNING_DEV_SECRET (or a keys file) is set.
DEMO_SIGNING_SECRET = "modstream-demo-signing"


def _signing_env() -> dict[str, str]:
    """What the demo's jobs and its own producers use: signatures required on all four
    authority topics, keys derived from a dev secret."""
    return {
        "MODSTREAM_SIGNING_DEV_SECRET": os.environ.get("MODSTREAM_SIGNING_DEV_SECRET")
        or DEMO_SIGNING_SECRET,
        "MODSTREAM_SIGNATURES_REQUIRED": "all",
    }


def _mine(settings: Settings, topic: str, run_id: str) -> list[dict[str, Any]]:
    """This run's valid records of `topic`; a malformed one is skipped with a warning."""
    records = [
        r
        for r in kafkaio.read_to_end(settings.bootstrap_servers, topic)
        if r.value is not None and run_id in r.value.decode("utf-8", errors="replace")
    ]
    values, skipped = kafkaio.decode_values(records, kafkaio.schema_topic(topic))
    if skipped:
        print(f"demo: {topic}: skipped {skipped} malformed record(s)", file=sys.stderr)
    return values


def _scan_calls_saved(
    settings: Settings,
    names: dict[str, str],
    run_id: str,
    lines: list[dict[str, Any]],
    decided: set[tuple[str, int]],
    policy_document: dict[str, Any],
) -> dict[str, int]:
    """Detector calls cost ordering saved (operators/scan_plan.py: calls_saved): the required
    (detector, segment) pairs of the decided uploads that got neither a scan request nor a
    result, split into model calls and gate-check calls."""
    from operators import scan_plan
    from operators.policy import load_policy

    uploads = [
        line["value"]
        for line in lines
        if line["topic"] == "content.versions"
        and isinstance(line["value"], dict)
        and line["value"].get("type") == "upsert"
        and (line["value"].get("content_id"), line["value"].get("content_version")) in decided
    ]
    asked: set[tuple[str, int, str, int]] = set()
    sources = [names[f"scan.requests.{m}"] for m in ("text", "image", "video", "audio")]
    for topic in [*sources, names["detector.results"]]:
        for record in _mine(settings, topic, run_id):
            segment = record.get("segment_id") or 0
            asked.add(
                (record["content_id"], record["content_version"], record["detector"], segment)
            )
    return scan_plan.calls_saved(uploads, load_policy(policy_document), asked)


RECONCILER_SLA_MS = 20_000
# Texts for `--detectors real`: mostly benign, some abusive, so the real model has work to do.
SAMPLE_TEXTS = (
    "Lovely weather for a walk in the park today",
    "Our team won the match, what a game!",
    "Does anyone have a good recipe for bread?",
    "The meeting moved to Thursday at ten",
    "you are a stupid idiot and everyone hates you",
    "Thanks for the help yesterday, much appreciated",
    "shut up you worthless piece of garbage",
    "New photos from the trip are up",
)  # a backlog of thousands of actions takes seconds to enforce on 2 cores


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


class _LagWatch(threading.Thread):
    """Decision-to-enforcement lag as a reader sees it: from the moment an action is readable
    (committed) on moderation.actions to the moment content.visibility shows its revision."""

    def __init__(self, settings: Settings, run_id: str, names: dict[str, str]) -> None:
        super().__init__(daemon=True)
        self.settings = settings
        self.run_id = run_id
        self.names = names
        self.seen_action: dict[tuple[str, int, int], float] = {}
        self.seen_visible: dict[tuple[str, int, int], float] = {}
        self.stopping = threading.Event()

    def run(self) -> None:
        from kafka import KafkaConsumer

        consumer = KafkaConsumer(
            self.names["moderation.actions"],
            self.names["content.visibility"],
            bootstrap_servers=self.settings.bootstrap_servers,
            isolation_level="read_committed",
            auto_offset_reset="latest",
            enable_auto_commit=False,
            group_id=None,
        )
        try:
            while not self.stopping.is_set():
                for partition, records in consumer.poll(timeout_ms=200).items():
                    now = time.monotonic()
                    mine = [
                        r
                        for r in records
                        if r.value is not None
                        and self.run_id in r.value.decode("utf-8", errors="replace")
                    ]
                    schema = kafkaio.schema_topic(partition.topic)
                    for value in kafkaio.decode_values(mine, schema)[0]:  # malformed: skipped
                        key = (
                            value["content_id"],
                            value["content_version"],
                            value["decision_revision"],
                        )
                        book = (
                            self.seen_action
                            if partition.topic == self.names["moderation.actions"]
                            else self.seen_visible
                        )
                        book.setdefault(key, now)
        finally:
            consumer.close()

    def lags_ms(self) -> list[float]:
        return sorted(
            max(0.0, (self.seen_visible[key] - at) * 1000)
            for key, at in self.seen_action.items()
            if key in self.seen_visible
        )


def _percentile(values: list[float], fraction: float) -> int:
    if not values:
        return 0
    return int(values[min(len(values) - 1, int(fraction * len(values)))])


def _real_content(
    lines: list[dict[str, Any]], media_dir: Path, now: int
) -> tuple[list[dict[str, Any]], set[str]]:
    """For `--detectors real`: text uploads get real texts and image uploads real image files
    (their generated evidence is dropped: the scan job answers), and event time starts now, so
    that detector results (stamped with the time they were made) meet their deadlines."""
    from modstream.hashing_demo import jpeg

    uploads = media_dir / "uploads"
    uploads.mkdir(parents=True, exist_ok=True)
    start = min(
        line["value"]["ts"]
        for line in lines
        if line["topic"] == "content.versions"
        and isinstance(line["value"], dict)
        and isinstance(line["value"].get("ts"), int)
    )
    scanned: set[str] = set()
    out: list[dict[str, Any]] = []
    for index, line in enumerate(lines):
        value = line["value"]
        if isinstance(value, dict):
            value = dict(value)
            if isinstance(value.get("ts"), int):
                value["ts"] = now + (value["ts"] - start)
            if line["topic"] == "content.versions" and value.get("type") == "upsert":
                body: bytes | None = None
                if value.get("modality") == "text":
                    value["text"] = SAMPLE_TEXTS[index % len(SAMPLE_TEXTS)]
                    body = value["text"].encode("utf-8")
                elif value.get("modality") == "image":
                    body = jpeg(index)
                    path = uploads / f"{value['content_id']}.v{value['content_version']}.jpg"
                    path.write_bytes(body)
                    value["media_ref"] = path.as_uri()
                if body is not None:
                    value["size_bytes"] = len(body)
                    value["sha256"] = hashlib.sha256(body).hexdigest()
                    scanned.add(value["content_id"])
        out.append({"topic": line["topic"], "value": value})
    kept = [
        line
        for line in out
        if not (
            line["topic"] == "detector.results"
            and isinstance(line["value"], dict)
            and line["value"].get("content_id") in scanned
        )
    ]
    return kept, scanned


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


def run(
    settings: Settings,
    count: int = 200,
    seed: int = 7,
    *,
    as_json: bool = False,
    detectors: str = "generated",
) -> int:
    started = time.monotonic()

    def say(message: str) -> None:
        if not as_json:
            print(message, flush=True)

    say("demo: starting the local stack")
    stack.up(settings, say=say)
    # Each run is its own deployment: topics, consumer groups, transactional ids and
    # checkpoints under its run id, so nothing one run leaves unread reaches the next one.
    run_id = f"demo{uuid.uuid4().hex[:6]}-"
    prefix = run_id[:-1]
    names = {spec.name: f"{prefix}.{spec.name}" for spec in topics.TOPICS}
    topics.create_topics(
        settings.bootstrap_servers,
        [dataclasses.replace(spec, name=names[spec.name]) for spec in topics.TOPICS],
        say=lambda _: None,
    )
    key = os.environ.get("MODSTREAM_POLICY_KEY") or DEMO_POLICY_KEY
    policy_path = settings.project_root / "policy_rules" / "global.yaml"
    policy = yaml.safe_load(policy_path.read_text())
    shadow_base = dict(policy, version=policy["version"])  # the run's policy.rules is new
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
    media_dir = settings.run_dir / "demo" / "media"
    real = detectors == "real"
    scanned: set[str] = set()
    if real:
        lines, scanned = _real_content(lines, media_dir, now + 5_000)
    lines.insert(0, {"topic": "policy.rules", "value": shadow_record})
    retro_bank = _bank_addition_after_allow(lines, run_id)
    if retro_bank is not None:
        lines.append(retro_bank)
    last_ts = max(line["value"].get("ts", 0) for line in lines if isinstance(line["value"], dict))
    marker = f"{run_id}end"
    # Just past the last deadline: once the end marker is decided, every deadline has fired.
    # Never further: event time does not run ahead of the clock (docs/moderation.md, "Time"),
    # and with real detectors the records are live, so the clock brings event time there.
    after_deadlines = last_ts + max(
        int(spec.get("deadline_ms", 0)) for spec in policy.get("detectors", {}).values()
    )
    # The second marker, further than the job's out-of-orderness bound, moves event time past
    # the first where time follows the data alone (a backlog: the generated workload).
    markers = [
        workload.marker(after_deadlines + 1_000, marker),
        workload.marker(after_deadlines + 11_000, f"{marker}2"),
    ]
    if not real:
        lines += markers

    # The platform side: every upload's bytes are quarantined in the Content Service first.
    client = redis.Redis.from_url(settings.redis_url)
    service = ContentService(client, media_dir)
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

    logs = settings.run_dir / "demo"
    logs.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "MODSTREAM_POLICY_KEY": key, **_signing_env()}
    keyring = Keyring.from_env(env)

    def deployment(job: str) -> list[str]:
        args = [
            "--group-id", f"{prefix}-{job}",
            "--transactional-id-prefix", f"{prefix}-{job}",
            "--checkpoint-dir", str(logs / "checkpoints" / prefix / job),
        ]  # fmt: skip
        for name, physical in names.items():
            args += ["--topic", f"{name}={physical}"]
        return args

    jobs = {
        "moderation": _start(
            settings,
            "moderation",
            [
                "--policy", str(policy_path),
                "--checkpoint-interval-ms", "1000" if real else "2000",
                "--out-of-orderness-ms", "1000",
                "--idleness-ms", "2000",
                *deployment("moderation"),
            ],
            logs / f"moderation-{run_id}log",
            env,
        ),
        "enforce": _start(
            settings,
            "enforce",
            [
                "--checkpoint-interval-ms", "1000",
                "--media-dir", str(media_dir),
                *deployment("enforce"),
            ],
            logs / f"enforce-{run_id}log",
            env,
        ),
        "reconciler": _start(
            settings,
            "reconciler",
            [
                "--checkpoint-interval-ms", "1000",
                "--sla-ms", str(RECONCILER_SLA_MS),
                "--media-dir", str(media_dir),  # its audits read what is served there
                *deployment("reconciler"),
            ],
            logs / f"reconciler-{run_id}log",
            env,
        ),
    }  # fmt: skip
    if real:
        jobs["scan"] = _start(
            settings,
            "scan",
            [
                "--modalities",
                "text,image",
                "--checkpoint-interval-ms",
                "1000",
                "--media-root",
                str(media_dir),
                *deployment("scan"),
            ],
            logs / f"scan-{run_id}log",
            env,
        )
    watch = _LagWatch(settings, run_id, names)
    try:
        for name, job in jobs.items():
            _wait_running(job, logs / f"{name}-{run_id}log")
        say(f"demo: {', '.join(jobs)} jobs running (logs in {logs})")
        watch.start()
        time.sleep(2)
        if real:
            say(f"demo: sending {len(lines)} records at the pace of their event time")
            _produce_paced(settings, lines, names, keyring)
            _wait_for_scans(settings, run_id, names, scanned, say)
            workload.produce(settings.bootstrap_servers, markers, names)
        else:
            workload.produce(settings.bootstrap_servers, lines, names, keyring)
        say(
            f"demo: run {run_id[:-1]}: sent {len(lines)} records "
            f"({count} content versions with their evidence and signals"
            + (", text and images scanned by the real detectors)" if real else ")")
        )
        deadline = time.monotonic() + WAIT_TIMEOUT_S
        while True:
            decisions = _mine(settings, names["moderation.decisions"], run_id)
            if any(d["content_id"] == marker for d in decisions):
                break
            if time.monotonic() > deadline or any(j.poll() is not None for j in jobs.values()):
                print(f"demo: FAILED: no committed decision for the end marker; see {logs}")
                return 1
            say(f"demo:   committed so far: {len(decisions)} decisions")
            time.sleep(3)
        actions = _mine(settings, names["moderation.actions"], run_id)
        while True:
            done = [a for a in actions if client.get(f"intent:{a['action_id']}") in DONE]
            if len(done) == len(actions) or time.monotonic() > deadline:
                break
            say(f"demo:   enforced so far: {len(done)} of {len(actions)} actions")
            time.sleep(2)
        say(f"demo: waiting {RECONCILER_SLA_MS / 1000:.0f} s (the reconciler's SLA) and a bit")
        time.sleep(RECONCILER_SLA_MS / 1000 + 6)
    finally:
        watch.stopping.set()
        for job in jobs.values():
            if job.poll() is None:
                job.send_signal(signal.SIGTERM)
        for job in jobs.values():
            try:
                job.wait(timeout=90)
            except subprocess.TimeoutExpired:
                job.kill()

    decisions = [
        d
        for d in _mine(settings, names["moderation.decisions"], run_id)
        if not d["content_id"].startswith(marker)
    ]
    actions = _mine(settings, names["moderation.actions"], run_id)
    tasks = _mine(settings, names["review.tasks"], run_id)
    shadows = _mine(settings, names["moderation.shadow"], run_id)
    letters = _mine(settings, names["moderation.dlq"], run_id)
    discrepancies = _mine(settings, names["moderation.discrepancies"], run_id)
    sanctions = _mine(settings, names["account.actions"], run_id)
    notices = _mine(settings, names["user.notifications"], run_id)
    decided = {(d["content_id"], d["content_version"]) for d in decisions}
    saved = _scan_calls_saved(settings, names, run_id, lines, decided, policy)
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
    # What users should see: the current (highest) version's final decision, per content.
    final: dict[str, dict[str, Any]] = {}
    for (content_id, content_version), decision in latest.items():
        if content_id not in final or content_version > final[content_id]["content_version"]:
            final[content_id] = decision
    mismatched = set()
    for content_id, decision in final.items():
        desired = "hidden" if decision["state"] == "deleted" else VISIBILITY[decision["outcome"]]
        effective = service.effective(content_id, int(time.time() * 1000))
        if effective is None or effective.visibility != desired:
            mismatched.add(content_id)
    applied = sum(1 for a in actions if client.get(f"intent:{a['action_id']}") in DONE)
    lags = watch.lags_ms()
    lag_summary = {
        "p50": _percentile(lags, 0.50),
        "p99": _percentile(lags, 0.99),
        "measured": len(lags),
    }
    summary: dict[str, Any] = {
        "content_versions": len(latest),
        "decisions": len(decisions),
        "actions": len(actions),
        "applied": applied,
        "visibility_mismatches": len(mismatched),
        "discrepancies_open": len({d["content_id"] for d in discrepancies} & mismatched),
        "discrepancies_seen": len(discrepancies),
        "dlq": len(letters),
        "review_tasks": len(tasks),
        "shadow_decisions": len(shadows),
        "account_actions": len(sanctions),
        "notifications": len(notices),
        "scan_calls_saved": saved,
        "duplicate_revisions": sum(n - 1 for n in revisions.values()),
        "enforcement_lag_ms": lag_summary,
        "elapsed_s": round(time.monotonic() - started, 1),
    }
    ok = (
        bool(latest)
        and summary["duplicate_revisions"] == 0
        and applied == len(actions)
        and not mismatched
    )
    if as_json:
        print(json.dumps(summary))
        return 0 if ok else 1

    def row(title: str, counts: Counter[str]) -> None:
        print(f"  {title:<28} " + ", ".join(f"{k} {n}" for k, n in sorted(counts.items())))

    print()
    print(f"modstream demo summary (run {run_id[:-1]}, seed {seed})")
    print(f"  content versions decided      {len(latest)}")
    print(f"  decision revisions            {len(decisions)}")
    row("latest outcome", Counter(d["outcome"] for d in latest.values()))
    row("latest state", Counter(d["state"] for d in latest.values()))
    row("revisions by trigger", Counter(d["trigger"] for d in decisions))
    row("actions by visibility", Counter(a["visibility"] for a in actions))
    bank_ts = {retro_bank["value"]["ts"]} if retro_bank is not None else set()
    retroactive = [d for d in decisions if d["trigger"] == "policy_change" and d["ts"] in bank_ts]
    print(f"  retroactive (bank addition)   {len(retroactive)} decision(s), policy_change")
    print(f"  actions enforced              {applied} of {len(actions)}")
    print(f"  visibility mismatches         {len(mismatched)} (after the reconciler's SLA)")
    print(f"  discrepancies seen / open     {len(discrepancies)} / {summary['discrepancies_open']}")
    print(
        f"  enforcement lag               p50 {lag_summary['p50']} ms, "
        f"p99 {lag_summary['p99']} ms ({len(lags)} actions)"
    )
    row("review tasks by queue", Counter(f"{t['kind']}:{t['queue']}" for t in tasks))
    print(f"  shadow decisions (policy v{shadow_base['version'] + 1})   {len(shadows)}")
    row("account actions", Counter(s["sanction"] for s in sanctions))
    print(f"  notifications                 {len(notices)}")
    print(
        f"  model calls saved             {saved['models']} by cost order (+ {saved['checks']} "
        f"checks; {saved['required']} calls with every required detector asked)"
    )
    row("dead letters by class", Counter(letter["error_class"] for letter in letters))
    print(
        f"  duplicate revisions seen by a read_committed consumer: {summary['duplicate_revisions']}"
    )
    print(
        f"  elapsed {time.monotonic() - started:.1f}s; the stack is still up (`make down` stops it)"
    )
    return 0 if ok else 1


def _bank_addition_after_allow(lines: list[dict[str, Any]], run_id: str) -> dict[str, Any] | None:
    """A `hash.bank` addition for the sha256 of an upload whose generated evidence is all low
    (so the demo allows it first), a second after that evidence: the job re-decides it at the
    bank's ts (`trigger: policy_change`, docs/moderation.md "Hash banks and retroaction").
    None where the workload has no generated evidence (real detectors)."""
    uploads = {
        (v["content_id"], v["content_version"]): v
        for line in lines
        if line["topic"] == "content.versions"
        and isinstance(v := line["value"], dict)
        and v.get("type") == "upsert"
        and v.get("sha256")
        and not str(v.get("content_id", "")).endswith("banked-1")
    }
    highest: dict[tuple[str, int], tuple[float, int]] = {}
    for line in lines:
        value = line["value"]
        if line["topic"] != "detector.results" or not isinstance(value, dict):
            continue
        version = (value.get("content_id"), value.get("content_version"))
        scores = value.get("scores") or {}
        score = max(scores.values(), default=1.0) if value.get("status") == "ok" else 1.0
        seen = highest.get(version, (0.0, 0))  # type: ignore[arg-type]
        highest[version] = (max(seen[0], score), max(seen[1], int(value.get("ts", 0))))  # type: ignore[index]
    calm = sorted((score, ts, key) for key, (score, ts) in highest.items() if key in uploads)
    if not calm:
        return None
    _, evidence_ts, version = calm[0]
    return {
        "topic": "hash.bank",
        "value": {
            "event_id": f"{run_id}hb-retro",
            "bank": "known_bad",
            "hash_type": "sha256",
            "hash": uploads[version]["sha256"],
            "op": "add",
            "ts": evidence_ts + 1_000,
        },
    }


def _wait_for_scans(
    settings: Settings,
    run_id: str,
    names: dict[str, str],
    scanned: set[str],
    say: Any,
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
            for r in _mine(settings, names["detector.results"], run_id)
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
    deadline = time.monotonic() + 180
    while " running" not in log_path.read_text(errors="replace"):
        if job.poll() is not None or time.monotonic() > deadline:
            raise stack.StackError(f"a demo job did not start; see {log_path}")
        time.sleep(0.5)
    time.sleep(3)  # the sources are assigned their partitions
