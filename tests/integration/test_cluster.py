"""`modstream run moderation --jobmanager` on a real Flink session cluster (`modstream cluster`)."""

from __future__ import annotations

import json
import os
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from jobs.metrics import prometheus_name
from modstream import endpoints, workload
from modstream.config import Settings
from modstream.workload import generate
from tests.conftest import T0
from tests.integration.conftest import Kafka, ModerationDeployment
from tests.integration.processes import free_ports, modstream

pytestmark = pytest.mark.integration


def rest(address: str, path: str, method: str = "GET") -> Any:
    request = urllib.request.Request(f"http://{address}{path}", method=method)
    with urllib.request.urlopen(request, timeout=10) as response:
        body = response.read()
    return json.loads(body) if body else None


def test_moderation_job_submitted_to_a_session_cluster(
    stack: Settings, kafka: Kafka, tmp_path: Path, moderation_deployment: ModerationDeployment
) -> None:
    rest_port, rpc_port = free_ports(2)
    env = {
        **os.environ,
        "MODSTREAM_RUN_DIR": str(tmp_path / "run"),
        "MODSTREAM_KAFKA_PORT": str(stack.kafka_port),
        "MODSTREAM_KAFKA_CONTROLLER_PORT": str(stack.controller_port),
        "MODSTREAM_REDIS_PORT": str(stack.redis_port),
    }
    up = modstream(env, "cluster", "up", "--rest-port", str(rest_port), "--rpc-port", str(rpc_port))
    assert up.returncode == 0, up.stdout + up.stderr
    address = f"127.0.0.1:{rest_port}"
    try:
        topics = moderation_deployment.topics
        job_args = moderation_deployment.args
        submitted = modstream(env, "run", "moderation", "--jobmanager", address, "--", *job_args)
        assert submitted.returncode == 0, submitted.stdout[-3000:] + submitted.stderr[-3000:]
        jobs = rest(address, "/jobs/overview")["jobs"]
        assert [(job["name"], job["state"]) for job in jobs] == [("moderation", "RUNNING")]

        lines = generate(seed=21, versions=10, extras=False, malformed=False)
        workload.produce(stack.bootstrap_servers, [*lines, workload.marker(T0 + 3_600_000)], topics)
        wanted = {line["value"]["content_id"] for line in lines}
        actions = kafka.wait_for(
            topics["moderation.actions"],
            lambda v: {a["content_id"] for a in v} >= wanted,
            timeout_s=120,
        )
        assert all(action["policy_version"] == 1 for action in actions)
        _assert_served_for_prometheus()
        rest(address, f"/jobs/{jobs[0]['jid']}?mode=cancel", method="PATCH")
        deadline = time.monotonic() + 60
        while rest(address, "/jobs/overview")["jobs"][0]["state"] != "CANCELED":
            assert time.monotonic() < deadline, "the job did not cancel"
            time.sleep(1)
    finally:
        down = modstream(env, "cluster", "down")
        assert down.returncode == 0


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
