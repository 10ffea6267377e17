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

from modstream.demo import workload
from modstream.testing.backlogs import BOUND_S, GRACE_MS, POLICY_KEY, small_policy
from modstream.testing.backlogs import comparable_backlog as comparable
from modstream.testing.backlogs import live_job_args as job_args
from modstream.testing.backlogs import unanswered_backlog as backlog
from modstream.testing.live import LiveTraffic, now_ms
from modstream.testing.stack import JobProcess, Kafka, ModerationDeployment, run_replay

pytestmark = pytest.mark.integration

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
