"""A savepoint of the `--engine pyflink` job restores into the `--engine batched` job with no
decision lost, duplicated or changed (issue 26, must-show; docs/OPERATIONS.md, "Changing the
engine").

The real stack is needed because what is tested is Flink's own restore: the PyFlink operators'
state (pickled values, the `user-timers` timer service, the event-time order's held input, the
sanctions' account) read by the batched engine's Java operators under the same uids, from a
savepoint taken by stop-with-savepoint on the real broker's exactly-once sink.

The workload is test_live_deadlines.py's backlog (hours old, with live traffic, so deadlines
are reached once the job is live and the video's waits 30 s), plus versions stamped a minute
ahead that the PyFlink engine still holds in its event-time order when it is stopped, one of
whose evidence arrives only after the restore, and two BLOCKs of one author, one before the
stop and one after (a strike kept in the sanctions' state across the change).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from modstream.demo import workload
from modstream.stack import cluster_jobs
from modstream.testing.backlogs import (
    BOUND_S,
    GRACE_MS,
    POLICY_KEY,
    comparable_backlog,
    small_policy,
)
from modstream.testing.backlogs import live_job_args as job_args
from modstream.testing.backlogs import unanswered_backlog as backlog
from modstream.testing.live import LiveTraffic, now_ms
from modstream.testing.records import evidence, upload
from modstream.testing.stack import JobProcess, Kafka, ModerationDeployment, free_ports, run_replay

pytestmark = pytest.mark.integration

# Held input: stamped this far ahead of the produce time, so the PyFlink job, stopped a few
# seconds after the backlog's first deadline decision, still holds it (max skew is 5 minutes).
HELD_AHEAD_MS = 60_000
OFFENDER = "author-held"
COMPARED = ("bl-", "held-", "strike-")


def ahead(at: int) -> list[workload.Line]:
    """A strike before the stop; versions held at the stop, one of them a second strike."""
    lines: list[tuple[str, dict[str, Any]]] = [
        ("content.versions", upload("strike-1", at=at - HELD_AHEAD_MS, author_id=OFFENDER)),
        ("detector.results", evidence("strike-1", at=at - HELD_AHEAD_MS, scores=OFFENSIVE)),
        ("content.versions", upload("held-1", at=at, surface="dm")),
        ("detector.results", evidence("held-1", at=at + 100)),
        ("content.versions", upload("held-2", at=at + 200, author_id=OFFENDER)),
        ("detector.results", evidence("held-2", at=at + 300, scores=OFFENSIVE)),
        ("content.versions", upload("held-3", at=at + 400, surface="dm")),
    ]
    return [{"topic": topic, "value": value} for topic, value in lines]


OFFENSIVE = {"offensive": 0.99}


def after_restore(at: int) -> list[workload.Line]:
    """held-3's evidence, produced once the batched job runs (still before its upload's ts
    is passed: both wait in the batched engine, one restored, one its own)."""
    return [{"topic": "detector.results", "value": evidence("held-3", at=at + 500)}]


def decisions(records: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    return comparable_backlog(records, COMPARED)


def account_actions(records: list[dict[str, Any]]) -> list[str]:
    return sorted(json.dumps(r, sort_keys=True) for r in records if r.get("user_id") == OFFENDER)


def stop_with_savepoint(job: JobProcess, address: str, directory: Path) -> str:
    """Stops the job's one job with a savepoint (not drained) and waits for its process to
    exit (its MiniCluster goes with it); the savepoint's directory."""
    (jid,) = [j["jid"] for j in cluster_jobs.jobs(address) if j["state"] == "RUNNING"]
    cluster_jobs.wait_tasks_running(address, jid)
    cluster_jobs.rest(
        address, f"/jobs/{jid}/stop", {"targetDirectory": directory.as_uri(), "drain": False}
    )
    job.process.wait(timeout=180)
    # Its exit code says nothing here: the local MiniCluster shuts down with the finished job,
    # sometimes before modstream/jobs/runtime.py's status poll reads FINISHED (it then fails on the
    # call).
    (metadata,) = directory.glob("savepoint-*/_metadata")
    return str(metadata.parent)


def wait_as_replay(kafka: Kafka, topics: dict[str, str], replayed: dict[str, Any]) -> None:
    """Until the committed decisions and the offender's account actions equal replay's;
    fails past the bound with what is missing and what is extra (twice is extra)."""
    wanted = decisions(replayed["moderation.decisions"])
    wanted_actions = account_actions(replayed.get("account.actions", []))
    began = time.monotonic()
    seen: list[tuple[Any, ...]] = []
    while time.monotonic() - began < BOUND_S + HELD_AHEAD_MS / 1000:
        seen = decisions(kafka.values(topics["moderation.decisions"]))
        actions = account_actions(kafka.values(topics["account.actions"]))
        if seen == wanted and actions == wanted_actions:
            return
        time.sleep(1)
    missing = sorted(set(wanted) - set(seen))
    extra = sorted(set(seen) - set(wanted)) + [d for d in seen if seen.count(d) > 1]
    raise AssertionError(("not as replay", missing, extra, actions, wanted_actions))


@pytest.mark.timeout(600)  # a failure waits out the bound before it says what differs
def test_a_pyflink_savepoint_restores_into_the_batched_engine_and_decides_as_replay(
    kafka: Kafka,
    start_job: Any,
    moderation_deployment: ModerationDeployment,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("MODSTREAM_POLICY_KEY", POLICY_KEY)
    policy = small_policy(tmp_path / "policy.yaml")
    topics = moderation_deployment.topics
    decided = topics["moderation.decisions"]
    (rest_port,) = free_ports(1)
    args = job_args(moderation_deployment, policy, GRACE_MS)
    old = ["--engine", "pyflink", "--flink-conf", f"rest.bind-port={rest_port}"]
    job: JobProcess = start_job("moderation", *args, *old)
    job.wait_running()
    with LiveTraffic(kafka, topics):
        held_at = now_ms() + HELD_AHEAD_MS
        lines = backlog(now_ms() - 2 * 3_600_000) + ahead(held_at)
        workload.produce(kafka.bootstrap_servers, lines, topics)
        kafka.wait_for(
            decided,
            lambda v: any(d[5] == "deadline" for d in decisions(v)),
            committed=False,
            timeout_s=BOUND_S,
        )
        savepoint = stop_with_savepoint(job, f"127.0.0.1:{rest_port}", tmp_path / "savepoints")
        before = decisions(kafka.values(decided))
        assert [d for d in before if d[0] == "strike-1"], ("no strike before the stop", before)
        assert not [d for d in before if d[0].startswith("held-")], ("held input decided", before)
        assert not [d for d in before if d[0] == "bl-video" and d[5] == "deadline"], before
        restored: JobProcess = start_job(
            "moderation", *args, "--engine", "batched", "--restore-from", savepoint
        )
        restored.wait_running()
        assert "held input restores" in restored.output(), restored.output()[-3000:]
        late = after_restore(held_at)
        workload.produce(kafka.bootstrap_servers, late, topics)
        events = tmp_path / "events.jsonl"
        workload.write(lines + late, events)
        replayed = run_replay(events, tmp_path / "replay", policy, POLICY_KEY)
        wait_as_replay(kafka, topics, replayed)
    assert restored.alive(), restored.output()[-3000:]
