"""Every job on a real Flink session cluster (`modstream cluster up`) whose TaskManager has no
modstream and no Python of ours: the jobs bring theirs (`modstream package`, `modstream
submit`). The demo submits its four jobs there and ends with every action enforced; an upgrade
stops the moderation job with a savepoint and resubmits it from there, nothing decided twice."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from modstream.core import endpoints
from modstream.core.config import PROJECT_ROOT, Settings
from modstream.demo import workload
from modstream.demo.workload import generate
from modstream.jobs.metrics import prometheus_name
from modstream.stack import cluster, cluster_jobs
from modstream.testing.records import T0
from modstream.testing.stack import Kafka, ModerationDeployment, free_ports, modstream

# Minutes each (a cluster, the packaged job, all four jobs): `make test-slow`.
pytestmark = [pytest.mark.integration, pytest.mark.slow]


@pytest.fixture
def session_cluster(stack: Settings, tmp_path: Path) -> Iterator[tuple[str, dict[str, str]]]:
    """A session cluster of its own (4 slots), in a run directory of its own, for one test (a
    cluster shared by the demo and the upgrade made the upgraded job decide nothing); its
    address and the environment its commands run with. The TaskManagers' environment is
    checked: no PYTHONPATH, no virtualenv."""
    rest_port, rpc_port = free_ports(2)
    env = {
        **os.environ,
        "MODSTREAM_RUN_DIR": str(tmp_path / "run"),
        "MODSTREAM_KAFKA_PORT": str(stack.kafka_port),
        "MODSTREAM_KAFKA_CONTROLLER_PORT": str(stack.controller_port),
        "MODSTREAM_REDIS_PORT": str(stack.redis_port),
    }
    up = modstream(
        env,
        *("cluster", "up", "--rest-port", str(rest_port), "--rpc-port", str(rpc_port)),
        *("--slots", "4", "--taskmanager-memory", "4096m"),
    )
    assert up.returncode == 0, up.stdout + up.stderr
    try:
        run_settings = Settings.from_env(env)
        pids = cluster.daemon_pids(run_settings)
        assert pids
        for pid in pids:
            environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
            names = {entry.split(b"=", 1)[0] for entry in environ}
            assert not names & {b"PYTHONPATH", b"PYTHONHOME", b"VIRTUAL_ENV"}
        yield f"127.0.0.1:{rest_port}", env
    finally:
        down = modstream(env, "cluster", "down")
        assert down.returncode == 0


@pytest.mark.timeout(1500)  # on two busy cores: each job's Python archive is unpacked (~50 s)
def test_the_demo_submits_all_four_jobs_to_a_cluster_and_ends_enforced(
    stack: Settings, session_cluster: tuple[str, dict[str, str]]
) -> None:
    address, _ = session_cluster
    result = subprocess.run(
        [
            *(sys.executable, "-m", "modstream.cli.main", "demo", "--events", "30"),
            *("--detectors", "real", "--jobmanager", address, "--json"),
        ],
        cwd=PROJECT_ROOT,
        env=dict(os.environ),
        capture_output=True,
        text=True,
        timeout=1200,
        check=False,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    summary = json.loads(result.stdout.strip().splitlines()[-1])
    names = sorted(job["name"] for job in cluster_jobs.jobs(address))
    assert names == ["enforce", "moderation", "reconciler", "scan"]  # all of them, there
    assert summary["content_versions"] >= 30 and summary["actions"] > 0
    assert summary["applied"] == summary["actions"]
    assert summary["visibility_mismatches"] == 0
    assert summary["duplicate_revisions"] == 0
    # Every modality really read (issue 28 item 8): the readers answered, and each real media
    # kind (modstream/demo/media.py, all within the first 30 versions) was decided as its
    # label says, its decision citing where in the video or audio the words are.
    assert summary["results_by_detector"]["ocr_text"] > 0
    assert summary["results_by_detector"]["speech_text"] > 0
    read = summary["read_media"]
    assert len(read) == 6 and all(kind["ok"] for kind in read), read


@pytest.mark.timeout(1200)
def test_upgrade_resumes_the_moderation_job_from_a_savepoint(
    stack: Settings,
    kafka: Kafka,
    session_cluster: tuple[str, dict[str, str]],
    moderation_deployment: ModerationDeployment,
) -> None:
    address, env = session_cluster
    topics, job_args = moderation_deployment.topics, moderation_deployment.args
    package = ["--package", str(stack.run_dir / "package")]  # the demo's, built once
    submitted = modstream(
        env, "submit", "moderation", "--jobmanager", address, *package, "--", *job_args,
        timeout_s=600,
    )  # fmt: skip
    assert submitted.returncode == 0, submitted.stdout[-3000:] + submitted.stderr[-3000:]
    first = cluster_jobs.active_job(address, "moderation")
    cluster_jobs.wait_state(address, first, ("RUNNING",))

    def batch(seed: int, start_ts: int, prefix: str) -> list[workload.Line]:
        return generate(
            seed=seed, versions=6, start_ts=start_ts, extras=False, malformed=False, prefix=prefix
        )

    # Event time: the first batch, a marker past its deadlines, the second batch, a marker.
    before, after = batch(21, T0, "up1-"), batch(22, T0 + 1_200_000, "up2-")
    workload.produce(stack.bootstrap_servers, [*before, workload.marker(T0 + 600_000)], topics)
    wanted = {line["value"]["content_id"] for line in before}
    kafka.wait_for(
        topics["moderation.decisions"],
        lambda v: {d["content_id"] for d in v} >= wanted,
        timeout_s=180,
    )
    upgraded = modstream(
        env, "upgrade", "moderation", "--jobmanager", address, *package, "--", *job_args,
        timeout_s=600,
    )  # fmt: skip
    assert upgraded.returncode == 0, upgraded.stdout[-3000:] + upgraded.stderr[-3000:]
    assert "savepoint" in upgraded.stdout
    second = cluster_jobs.active_job(address, "moderation")
    assert second != first and cluster_jobs.job_state(address, first) == "FINISHED"

    workload.produce(stack.bootstrap_servers, [*after, workload.marker(T0 + 3_600_000)], topics)
    wanted |= {line["value"]["content_id"] for line in after}
    decisions = kafka.wait_for(
        topics["moderation.decisions"],
        lambda v: {d["content_id"] for d in v} >= wanted,
        timeout_s=180,
    )
    revisions = [(d["content_id"], d["decision_revision"]) for d in decisions]
    assert len(revisions) == len(set(revisions)), "a revision decided twice across the upgrade"
    _assert_served_for_prometheus()
    cluster_jobs.rest(address, f"/jobs/{second}?mode=cancel", method="PATCH")
    cluster_jobs.wait_state(address, second, ("CANCELED",))


def _assert_served_for_prometheus() -> None:
    """The cluster's reporter (docs/OPERATIONS.md) serves the job's own metrics."""
    deadline = time.monotonic() + 60
    while True:
        samples = [
            sample
            for port in endpoints.port_range(endpoints.CLUSTER_METRICS_PORTS)
            for sample in endpoints.samples(endpoints.scrape(port, timeout_s=5) or "")
        ]
        decisions = [
            value
            for name, labels, value in samples
            if name == prometheus_name("decisions") and labels.get("job_name") == "moderation"
        ]
        if sum(decisions) > 0:
            return
        assert time.monotonic() < deadline, "the cluster serves no decisions metric"
        time.sleep(2)


def test_submit_names_what_is_wrong(session_cluster: tuple[str, dict[str, str]]) -> None:
    address, env = session_cluster
    unknown = modstream(env, "submit", "ingest", "--jobmanager", address)
    assert unknown.returncode == 2 and "invalid choice: 'ingest'" in unknown.stderr
    (port,) = free_ports(1)
    nowhere = modstream(env, "upgrade", "moderation", "--jobmanager", f"127.0.0.1:{port}")
    assert nowhere.returncode == 1 and "no Flink cluster answers" in nowhere.stderr
    idle = modstream(env, "upgrade", "moderation", "--jobmanager", address)
    assert idle.returncode == 1 and "no running moderation job" in idle.stderr


def test_down_stops_every_taskmanager_even_one_added_after_up(
    session_cluster: tuple[str, dict[str, str]],
) -> None:
    """`cluster down` once stopped one TaskManager per line of conf/workers and left the ones
    `start_taskmanager` added (the fault runs add one after a kill) running."""
    _, env = session_cluster
    run_settings = Settings.from_env(env)
    cluster.start_taskmanager(run_settings)
    pids = cluster.daemon_pids(run_settings)
    assert len(pids) == 2, pids
    down = modstream(env, "cluster", "down")
    assert down.returncode == 0, down.stdout + down.stderr
    deadline = time.monotonic() + 30
    while any(map(_running, pids)) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert [pid for pid in pids if _running(pid)] == []


def _running(pid: int) -> bool:
    """Alive and not a zombie (a container's init may not reap it at once)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")
