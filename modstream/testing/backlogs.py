"""Backlogs as after an outage, for tests of event time on a live job: uploads stamped hours ago
that a job catches up on, and how to compare its decisions with another run's or replay's
(docs/moderation.md, "Time").

- The answered backlog (tests/integration/test_backlog.py): generated versions whose every
  detector answered within the shipped deadlines, so no deadline may fire; `settled` waits for
  a run's decisions to stop changing, `comparable` makes two runs comparable.
- The unanswered backlog (tests/integration/test_live_deadlines.py): a few versions whose
  detectors never answer, under `small_policy` (short deadlines and TTL), so their deadlines
  and expiries must be decided once the job is live, as `modstream replay` decides them.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import yaml

from modstream.demo import workload
from modstream.testing.policies import global_document
from modstream.testing.records import evidence, upload
from modstream.testing.stack import Kafka, ModerationDeployment

# The shipped policy's deadlines (policy_rules/global.yaml).
SHIPPED_DEADLINE_MS = {"text": 5_000, "image": 30_000, "video": 120_000, "audio": 60_000}


def answered_backlog(
    start_ts: int, versions: int
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(uploads, evidence) of generated versions whose every detector answered in time (a
    result stamped within the modality's deadline; `timeout` answers count as answers)."""
    lines = workload.generate(
        seed=12, versions=versions, start_ts=start_ts, extras=False, malformed=False
    )
    uploads = {
        line["value"]["content_id"]: line["value"]
        for line in lines
        if line["topic"] == "content.versions"
    }
    results_of: dict[str, list[dict[str, Any]]] = {}
    for line in lines:
        if line["topic"] == "detector.results":
            results_of.setdefault(line["value"]["content_id"], []).append(line)
    answered = []
    for content_id, uploaded in uploads.items():
        results = results_of.get(content_id, [])
        expected = len(workload.REQUIRED[uploaded["modality"]]) * uploaded["segments"]
        deadline = uploaded["ts"] + SHIPPED_DEADLINE_MS[uploaded["modality"]]
        keys = {(r["value"]["detector"], r["value"]["segment_id"]) for r in results}
        if len(keys) == expected and all(r["value"]["ts"] < deadline for r in results):
            answered.append(content_id)
    chosen = set(answered)
    upload_lines = [
        {"topic": "content.versions", "value": uploads[content_id]} for content_id in answered
    ]
    evidence_lines = sorted(
        (line for content_id in chosen for line in results_of[content_id]),
        key=lambda line: line["value"]["ts"],
    )
    return upload_lines, evidence_lines


def settled(kafka: Kafka, topic: str, versions: int, timeout_s: float) -> list[dict[str, Any]]:
    """The committed decisions once every version has one and nothing new came for 12 s (a
    decision is emitted only on change, so completeness alone cannot tell: a BLOCK stays)."""
    kafka.wait_for(
        topic,
        lambda values: len({d["content_id"] for d in values}) >= versions,
        timeout_s=timeout_s,
    )
    deadline = time.monotonic() + timeout_s
    seen, quiet_since = -1, time.monotonic()
    while time.monotonic() < deadline:
        values = kafka.values(topic)
        if len(values) != seen:
            seen, quiet_since = len(values), time.monotonic()
        elif time.monotonic() - quiet_since >= 12:
            return values
        time.sleep(3)
    raise AssertionError(f"{topic}: still changing after {timeout_s}s")


def comparable(decisions: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """Decisions as sorted tuples of what a run decided (not when it wrote it)."""
    return sorted(
        (
            d["content_id"],
            d["decision_revision"],
            d["outcome"],
            d.get("restriction"),
            d["state"],
            d["trigger"],
            d["ts"],
            tuple(d["reasons"]),
            tuple(d["matched_rules"]),
            d["completeness"]["received"],
            tuple(d["completeness"]["unknown"]),
        )
        for d in decisions
    )


# The unanswered backlog.
POLICY_KEY = "it-live-deadlines-key"
# Small deadlines and TTL so the test is short (policy_rules/global.yaml: 5 s, 30 s, 2 min, 1 h).
# The video's is longer than the others by more than the restore test's kill takes, so the job
# is killed after the first deadline decisions while the video's deadline still waits.
SMALL_DEADLINE_MS = {"text": 2_000, "image": 3_000, "video": 30_000, "audio": 3_000}
PROVISIONAL_TTL_MS = 20_000
GRACE_MS = 2_000
DRAINED_AFTER_MS = 10_000
STATE_TTL_MS = 3_600_000
# Every wait's end (docs/moderation.md, "Time", "Deadlines"): once event time is live, the
# longest deadline and the grace (the deadline's wait), then the grace again (the expiry's); a
# silent backlog lane holds event time for at most --drained-after-ms before it is live; and
# 60 s for the job's own pace on a loaded machine (checkpoints commit the decisions).
BOUND_S = (max(SMALL_DEADLINE_MS.values()) + 2 * GRACE_MS + DRAINED_AFTER_MS) / 1000 + 60


def small_policy(path: Path) -> Path:
    """The shipped policy with SMALL_DEADLINE_MS and PROVISIONAL_TTL_MS, written to `path`."""
    document = global_document(provisional_ttl_ms=PROVISIONAL_TTL_MS)
    for modality, deadline in SMALL_DEADLINE_MS.items():
        document["detectors"][modality]["deadline_ms"] = deadline
    path.write_text(yaml.safe_dump(document))
    return path


def image(content_id: str, at: int, surface: str) -> dict[str, Any]:
    """An image upload of 50 kB on `surface`."""
    return upload(
        content_id,
        at=at,
        modality="image",
        mime_type="image/jpeg",
        size_bytes=50_000,
        surface=surface,
    )


def unanswered_backlog(start: int) -> list[workload.Line]:
    """Hours old: high- and low-risk images whose detectors never answer, a video with one
    segment of two scanned, the second version of a text never scanned, a text decided on its
    evidence."""
    video = upload(
        "bl-video",
        at=start + 300,
        modality="video",
        mime_type="video/mp4",
        size_bytes=900_000,
        surface="comment",
        segments=2,
    )
    scanned = [
        evidence(
            "bl-video",
            at=start + 400,
            event_id=f"bl-video-{detector}-0",
            detector=detector,
            model_version="m-1",
            segment_id=0,
            scores=scores,
        )
        for detector, scores in (("media_check", {"malware": 0.0}), ("nsfw_image", {"nsfw": 0.0}))
    ]
    second = upload("bl-text", at=start + 500, content_version=2, event_id="bl-text-2")
    lines: list[tuple[str, dict[str, Any]]] = [
        ("content.versions", image("bl-high", start, "public_post")),
        ("content.versions", image("bl-low", start + 100, "comment")),
        ("content.versions", upload("bl-text", at=start + 200, event_id="bl-text-1")),
        ("content.versions", video),
        *(("detector.results", record) for record in scanned),
        ("content.versions", second),
        ("content.versions", upload("bl-done", at=start + 600, surface="dm")),
        ("detector.results", evidence("bl-done", at=start + 700)),
    ]
    return [{"topic": topic, "value": value} for topic, value in lines]


def comparable_backlog(
    decisions: list[dict[str, Any]], prefixes: tuple[str, ...] = ("bl-",)
) -> list[tuple[Any, ...]]:
    """The decisions of content ids starting with one of `prefixes` (default: the unanswered
    backlog's, `bl-*`) as sorted tuples."""
    return sorted(
        (
            d["content_id"],
            d["content_version"],
            d["decision_revision"],
            d["outcome"],
            d["state"],
            d["trigger"],
            d["ts"],
            tuple(d["reasons"]),
        )
        for d in decisions
        if d["content_id"].startswith(prefixes)
    )


def live_job_args(deployment: ModerationDeployment, policy: Path, grace_ms: int) -> list[str]:
    """The moderation job's options for the unanswered backlog: `policy`, no restarts, the
    grace, DRAINED_AFTER_MS and STATE_TTL_MS."""
    args = [*deployment.args, "--policy", str(policy), "--restart-strategy", "none"]
    args += ["--evidence-grace-ms", str(grace_ms), "--drained-after-ms", str(DRAINED_AFTER_MS)]
    # The backlog is older than the state TTL: reached as event time jumps to live, it must not
    # retire a version whose deadline or expiry still waits.
    return [*args, "--state-ttl-ms", str(STATE_TTL_MS)]
