"""The moderation job with each batched operator's Python in a process of its own
(`--flink-conf modstream.python.worker-process=true`, deploy/flink-ext EmbeddedPython.Worker,
modstream/jobs/worker.py) on the real broker and Flink: the same decisions as the embedded
default, with the keyed operators at parallelism 2; and a worker killed mid-backlog fails its
task, Flink restarts the job from its last checkpoint with new workers, and every version is
still decided once."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from modstream.bench.measure import session_pids
from modstream.core.config import Settings
from modstream.demo import workload
from modstream.testing.backlogs import answered_backlog, comparable, settled
from modstream.testing.stack import JobProcess, Kafka, new_moderation_deployment

WAIT_S = 300
pytestmark = [pytest.mark.integration, pytest.mark.timeout(4 * WAIT_S)]
WORKERS = ("--flink-conf", "modstream.python.worker-process=true")
VERSION_WORKER = "modstream.jobs.moderation.batch.BatchedModerate#"


def workers(job: JobProcess) -> dict[int, str]:
    """The job's worker processes (its session: the job is started in one of its own): pid ->
    the handler their argument names."""
    found = {}
    for pid in session_pids(job.process.pid):
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"modstream.jobs.worker" in argv[:3]:
            found[pid] = argv[argv.index(b"modstream.jobs.worker") + 1].decode()
    return found


def flink_log(log_dir: Path) -> str:
    """The job's Flink logs (its JVM's: task failures and restarts)."""
    return "".join(log.read_text(errors="replace") for log in sorted(log_dir.glob("*.log")))


def backlog(versions: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Uploads (with a closing marker) and their evidence, and the newest record after them."""
    uploads, evidence = answered_backlog(int(time.time() * 1000) - 3 * 3_600_000, versions)
    last = max(line["value"]["ts"] for line in evidence)
    uploads = [*uploads, workload.marker(last + 60_000, "end")]
    return uploads, [*evidence, workload.marker(last + 120_000, "end-2")]


def test_worker_processes_decide_as_the_embedded_python_at_parallelism_two(
    kafka: Kafka,
    stack: Settings,
    start_job: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("MODSTREAM_POLICY_KEY", "it-policy-key")
    uploads, rest = backlog(60)
    wider = (*WORKERS, "--parallelism", "2", "--pre-key-parallelism", "1")
    runs = []
    for name, options in (("embedded", ()), ("workers", wider)):
        deployment = new_moderation_deployment(kafka, stack, tmp_path / name)
        workload.produce(kafka.bootstrap_servers, uploads + rest, deployment.topics)
        job: JobProcess = start_job(
            "moderation", *deployment.args, "--drained-after-ms", "3000", *options, session=True
        )
        job.wait_running()
        topic = deployment.topics["moderation.decisions"]
        runs.append(settled(kafka, topic, len(uploads), WAIT_S))
        started = workers(job)
        handlers = sorted(started.values())
        assert job.stop() == 0
        if options:  # decode at 1, the version operator at 2
            assert len([h for h in handlers if h.startswith(VERSION_WORKER)]) == 2, handlers
            assert any("BatchedDecode" in h for h in handlers), handlers
            time.sleep(2)
            alive = [pid for pid in started if Path(f"/proc/{pid}").exists()]
            assert not alive  # the job stopped: its workers ended
        else:
            assert not handlers  # embedded: no worker processes
    embedded, in_workers = runs
    revisions = [(d["content_id"], d["decision_revision"]) for d in in_workers]
    assert len(revisions) == len(set(revisions))  # none twice
    assert comparable(in_workers) == comparable(embedded)


def test_a_killed_worker_restarts_the_job_and_every_version_is_decided_once(
    kafka: Kafka,
    stack: Settings,
    start_job: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("MODSTREAM_POLICY_KEY", "it-policy-key")
    uploads, rest = backlog(400)
    deployment = new_moderation_deployment(kafka, stack, tmp_path / "killed")
    # The JVM's log where this test reads it: FLINK_LOG_DIR and FLINK_IDENT_STRING are kept
    # when already set (modstream/jobs/runtime.py), and an earlier test in this pytest process
    # may have set them.
    log_dir = tmp_path / "flink-logs"
    env = {"FLINK_LOG_DIR": str(log_dir), "FLINK_IDENT_STRING": "killed-worker"}
    job: JobProcess = start_job(
        "moderation",
        *deployment.args,
        *("--drained-after-ms", "3000", *WORKERS),
        env=env,
        session=True,
    )
    job.wait_running()
    topic = deployment.topics["moderation.decisions"]
    workload.produce(kafka.bootstrap_servers, uploads[: len(uploads) // 2], deployment.topics)
    kafka.wait_for(topic, lambda values: len(values) >= 20, timeout_s=WAIT_S)
    (victim,) = [pid for pid, name in workers(job).items() if name.startswith(VERSION_WORKER)]
    os.kill(victim, signal.SIGKILL)
    workload.produce(
        kafka.bootstrap_servers, uploads[len(uploads) // 2 :] + rest, deployment.topics
    )
    decided = settled(kafka, topic, len(uploads), WAIT_S)
    after = [pid for pid, name in workers(job).items() if name.startswith(VERSION_WORKER)]
    assert job.alive()
    assert after and victim not in after  # a new worker serves the restarted task
    assert "the Python worker process failed in " in flink_log(log_dir)
    revisions = [(d["content_id"], d["decision_revision"]) for d in decided]
    assert len(revisions) == len(set(revisions))  # none twice across the restart
    assert {d["content_id"] for d in decided} >= {line["value"]["content_id"] for line in uploads}
    assert job.stop() == 0
