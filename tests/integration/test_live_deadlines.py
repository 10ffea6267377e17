"""A backlog's reached deadlines and provisional expiries are decided once the job is live
(issue 32): uploads stamped hours ago whose detectors never answer, read by a live job, then
live traffic; every backlog version's decisions equal `modstream replay`'s of the same input
(same outcomes, revisions, triggers and `ts`) within `deadline_ms` + the evidence grace +
`--drained-after-ms` after event time became live (docs/moderation.md, "Time", "Deadlines").

Before, a deadline reached while catching up waited "again from now" on an event-time timer at
a processing time, and a provisional expiry the same: the backlog versions stayed at their fast
gate, scanning, for good.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from modstream import workload
from tests.conftest import evidence, upload
from tests.integration.conftest import (
    JobProcess,
    Kafka,
    ModerationDeployment,
    run_replay,
)
from tests.operators.policy_builders import global_document

pytestmark = pytest.mark.integration

POLICY_KEY = "it-live-deadlines-key"
# Small deadlines and TTL so the test is short (policy_rules/global.yaml: 5 s, 30 s, 2 min, 1 h).
DEADLINE_MS = {"text": 2_000, "image": 3_000, "video": 4_000, "audio": 3_000}
PROVISIONAL_TTL_MS = 20_000
GRACE_MS = 2_000
DRAINED_AFTER_MS = 10_000
STATE_TTL_MS = 3_600_000
# Every wait's end (docs/moderation.md, "Time", "Deadlines"): once event time is live, the
# longest deadline and the grace (the deadline's wait), then the grace again (the expiry's); a
# silent backlog lane holds event time for at most --drained-after-ms before it is live; and
# 30 s for the job's own pace on a loaded machine (checkpoints commit the decisions).
BOUND_S = (max(DEADLINE_MS.values()) + 2 * GRACE_MS + DRAINED_AFTER_MS) / 1000 + 30


def now_ms() -> int:
    return int(time.time() * 1000)


def small_policy(path: Path) -> Path:
    document = global_document(provisional_ttl_ms=PROVISIONAL_TTL_MS)
    for modality, deadline in DEADLINE_MS.items():
        document["detectors"][modality]["deadline_ms"] = deadline
    path.write_text(yaml.safe_dump(document))
    return path


def image(content_id: str, at: int, surface: str) -> dict[str, Any]:
    return upload(
        content_id,
        at=at,
        modality="image",
        mime_type="image/jpeg",
        size_bytes=50_000,
        surface=surface,
    )


def backlog(start: int) -> list[workload.Line]:
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


def comparable(decisions: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
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
        if d["content_id"].startswith("bl-")
    )


def test_a_backlogs_deadlines_and_expiries_are_decided_as_replay_once_live(
    kafka: Kafka,
    start_job: Any,
    moderation_deployment: ModerationDeployment,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("MODSTREAM_POLICY_KEY", POLICY_KEY)
    policy = small_policy(tmp_path / "policy.yaml")
    lines = backlog(now_ms() - 2 * 3_600_000)  # two hours ago
    events = tmp_path / "events.jsonl"
    workload.write(lines, events)
    replayed = comparable(
        run_replay(events, tmp_path / "replay", policy, POLICY_KEY)["moderation.decisions"]
    )
    triggers = {(d[0], d[1], d[5]) for d in replayed}
    assert {("bl-high", 1, "deadline"), ("bl-low", 1, "deadline")} <= triggers, replayed
    assert [d for d in replayed if d[0] == "bl-low" and d[3] == "PENDING" and d[5] == "deadline"]

    topics = moderation_deployment.topics
    args = [*moderation_deployment.args, "--policy", str(policy), "--restart-strategy", "none"]
    args += ["--evidence-grace-ms", str(GRACE_MS), "--drained-after-ms", str(DRAINED_AFTER_MS)]
    # The backlog is older than the state TTL: reached as event time jumps to live, it must not
    # retire a version whose deadline or expiry still waits.
    args += ["--state-ttl-ms", str(STATE_TTL_MS)]
    job: JobProcess = start_job("moderation", *args)
    job.wait_running()
    workload.produce(kafka.bootstrap_servers, lines, topics)
    decisions = topics["moderation.decisions"]
    time.sleep(3)  # the backlog read first

    # Live traffic: a text upload every 2 s until the backlog is decided as replay decides it.
    live_from = time.monotonic()
    seen: list[tuple[Any, ...]] = []
    index = 0
    while time.monotonic() - live_from < BOUND_S:
        live = upload(f"live-{index}", at=now_ms(), surface="dm")
        workload.produce(
            kafka.bootstrap_servers, [{"topic": "content.versions", "value": live}], topics
        )
        index += 1
        seen = comparable(kafka.values(decisions))
        if seen == replayed:
            break
        time.sleep(2)
    waited_s = time.monotonic() - live_from
    missing = sorted(set(replayed) - set(seen))
    extra = sorted(set(seen) - set(replayed))
    assert seen == replayed, (f"after {waited_s:.0f} s of live traffic", missing, extra)
    print(f"backlog decided as replay {waited_s:.1f} s after live traffic began")
    assert job.alive(), job.output()[-3000:]
