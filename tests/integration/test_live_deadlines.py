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

import threading
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from modstream.demo import workload
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
# The video's is longer than the others by more than the restore test's kill takes, so the job
# is killed after the first deadline decisions while the video's deadline still waits.
DEADLINE_MS = {"text": 2_000, "image": 3_000, "video": 30_000, "audio": 3_000}
PROVISIONAL_TTL_MS = 20_000
GRACE_MS = 2_000
DRAINED_AFTER_MS = 10_000
STATE_TTL_MS = 3_600_000
# Every wait's end (docs/moderation.md, "Time", "Deadlines"): once event time is live, the
# longest deadline and the grace (the deadline's wait), then the grace again (the expiry's); a
# silent backlog lane holds event time for at most --drained-after-ms before it is live; and
# 60 s for the job's own pace on a loaded machine (checkpoints commit the decisions).
BOUND_S = (max(DEADLINE_MS.values()) + 2 * GRACE_MS + DRAINED_AFTER_MS) / 1000 + 60


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


class LiveTraffic:
    """A text upload stamped now every second, in the background, until stopped: the live
    traffic a real system has, also while a job is down."""

    def __init__(self, kafka: Kafka, topics: dict[str, str]) -> None:
        self.kafka, self.topics = kafka, topics
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        index = 0
        while not self._stop.is_set():
            live = upload(f"live-{index}", at=now_ms(), surface="dm")
            line: workload.Line = {"topic": "content.versions", "value": live}
            workload.produce(self.kafka.bootstrap_servers, [line], self.topics)
            index += 1
            self._stop.wait(1.0)

    def __enter__(self) -> LiveTraffic:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(timeout=30)


Replayed = tuple[Path, list[workload.Line], list[tuple[Any, ...]]]


@pytest.fixture(scope="module")
def replayed_backlog(tmp_path_factory: pytest.TempPathFactory) -> Replayed:
    """The small policy, a backlog stamped two hours ago (older than every deadline, the
    provisional TTL and the state TTL the jobs run with) and replay's decisions of it: one
    replay for the module's tests."""
    folder = tmp_path_factory.mktemp("backlog")
    policy = small_policy(folder / "policy.yaml")
    lines = backlog(now_ms() - 2 * 3_600_000)
    events = folder / "events.jsonl"
    workload.write(lines, events)
    replayed = comparable(
        run_replay(events, folder / "replay", policy, POLICY_KEY)["moderation.decisions"]
    )
    triggers = {(d[0], d[1], d[5]) for d in replayed}
    assert {("bl-high", 1, "deadline"), ("bl-low", 1, "deadline")} <= triggers, replayed
    assert [d for d in replayed if d[0] == "bl-low" and d[3] == "PENDING" and d[5] == "deadline"]
    return policy, lines, replayed


def job_args(deployment: ModerationDeployment, policy: Path, grace_ms: int) -> list[str]:
    args = [*deployment.args, "--policy", str(policy), "--restart-strategy", "none"]
    args += ["--evidence-grace-ms", str(grace_ms), "--drained-after-ms", str(DRAINED_AFTER_MS)]
    # The backlog is older than the state TTL: reached as event time jumps to live, it must not
    # retire a version whose deadline or expiry still waits.
    return [*args, "--state-ttl-ms", str(STATE_TTL_MS)]


def decided_as_replay(
    kafka: Kafka, topic: str, replayed: list[tuple[Any, ...]], bound_s: float
) -> float:
    """Seconds until the backlog's committed decisions equal replay's; fails past `bound_s`
    with what is missing and what is extra (a decision twice is extra)."""
    began = time.monotonic()
    seen: list[tuple[Any, ...]] = []
    while time.monotonic() - began < bound_s:
        seen = comparable(kafka.values(topic))
        if seen == replayed:
            return time.monotonic() - began
        time.sleep(1)
    missing = sorted(set(replayed) - set(seen))
    extra = sorted(set(seen) - set(replayed)) + [d for d in seen if seen.count(d) > 1]
    raise AssertionError((f"not as replay after {bound_s:.0f} s", missing, extra))


def test_a_backlogs_deadlines_and_expiries_are_decided_as_replay_once_live(
    kafka: Kafka,
    start_job: Any,
    moderation_deployment: ModerationDeployment,
    replayed_backlog: Replayed,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("MODSTREAM_POLICY_KEY", POLICY_KEY)
    policy, lines, replayed = replayed_backlog
    topics = moderation_deployment.topics
    job: JobProcess = start_job("moderation", *job_args(moderation_deployment, policy, GRACE_MS))
    job.wait_running()
    workload.produce(kafka.bootstrap_servers, lines, topics)
    time.sleep(3)  # the backlog read first, then live traffic
    with LiveTraffic(kafka, topics):
        waited_s = decided_as_replay(kafka, topics["moderation.decisions"], replayed, BOUND_S)
    print(f"backlog decided as replay {waited_s:.1f} s after live traffic began")
    assert job.alive(), job.output()[-3000:]


# How long the restore test's kill waits for a checkpoint to commit the first deadline decision
# written (read uncommitted). On a loaded machine one checkpoint may commit many seconds of
# decisions at once (a clean-clone CI run read every backlog decision committed when it first
# read a committed deadline), so the kill does not wait for the commit past this: the video's
# deadline is decided no sooner than its deadline less the text's (28 s) after the text's.
KILL_WAIT_S = 10.0


def kill_after_first_deadline(kafka: Kafka, topic: str, job: JobProcess) -> dict[str, Any]:
    """Kills the job (SIGKILL) once a backlog deadline decision is committed, or `KILL_WAIT_S`
    after one was first written (read uncommitted) if no checkpoint committed it by then;
    returns what it saw, for the caller's failure message."""
    began = time.monotonic()
    written_s: float | None = None
    committed = False
    while time.monotonic() - began < BOUND_S:
        committed = any(d[5] == "deadline" for d in comparable(kafka.values(topic)))
        if committed:
            break
        if written_s is None and any(
            d[5] == "deadline" for d in comparable(kafka.values(topic, committed=False))
        ):
            written_s = time.monotonic() - began
        if written_s is not None and time.monotonic() - began - written_s > KILL_WAIT_S:
            break
        time.sleep(0.5)
    else:
        raise AssertionError(f"no deadline decision written within {BOUND_S:.0f} s")
    job.process.kill()  # first, so what is read next is what the killed job committed
    job.process.wait(timeout=30)
    killed_s = time.monotonic() - began
    return {"written_s": written_s, "committed": committed, "killed_s": killed_s}


def test_a_job_killed_while_the_backlog_waits_and_restored_decides_it_as_replay(
    kafka: Kafka,
    start_job: Any,
    moderation_deployment: ModerationDeployment,
    replayed_backlog: Replayed,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Issue 32, must-show 3: the same backlog with live traffic during and after it; the job
    is killed (SIGKILL) once the first deadline decisions of the backlog are committed (or
    `KILL_WAIT_S` after they were written), while the video's deadline waits, and restored
    with `--restore-from latest`: once live again, exactly replay's decisions, none twice.

    A provisional expiry reached before a deadline that waited is decided with that deadline,
    in the same firing, once the job is live (modstream/moderation/step.py `on_timer`), so what
    waits at the kill is a deadline: the video's, the longest."""
    monkeypatch.setenv("MODSTREAM_POLICY_KEY", POLICY_KEY)
    policy, lines, replayed = replayed_backlog
    topics = moderation_deployment.topics
    decisions = topics["moderation.decisions"]
    args = job_args(moderation_deployment, policy, GRACE_MS)
    job: JobProcess = start_job("moderation", *args)
    job.wait_running()
    with LiveTraffic(kafka, topics):
        workload.produce(kafka.bootstrap_servers, lines, topics)
        waited = kill_after_first_deadline(kafka, decisions, job)
        committed = comparable(kafka.values(decisions))
        waiting = [d for d in replayed if d[0] == "bl-video" and d[5] == "deadline"]
        assert waiting and not set(waiting) & set(committed), ("not killed mid-way", waited)
        restored: JobProcess = start_job("moderation", *args, "--restore-from", "latest")
        restored.wait_running()
        waited_s = decided_as_replay(kafka, decisions, replayed, BOUND_S)
    print(f"restored: backlog decided as replay {waited_s:.1f} s after the job was running")
    assert restored.alive(), restored.output()[-3000:]
