"""Helpers for integration tests on a real stack (Kafka broker, Redis, Flink jobs in their own
MiniCluster processes): bounded Kafka reads and waits, jobs as processes, unique topics per
deployment, checkpoints, the `modstream` command and `modstream replay` as a user runs them.

The fixtures that hand these out (`stack`, `kafka`, `topics`, `start_job`,
`moderation_deployment`) are in the pytest plugin `modstream.testing.plugin`, loaded by pytest
wherever modstream is installed. An integration test of one's own policy or detector:

    import pytest
    from modstream.testing.records import upload
    from modstream.testing.stack import Kafka, ModerationDeployment

    @pytest.mark.integration
    def test_my_rule(kafka: Kafka, moderation_deployment: ModerationDeployment, start_job):
        job = start_job("moderation", *moderation_deployment.args)
        job.wait_running()
        kafka.produce(moderation_deployment.topics["content.versions"], [(None, ...)])
        kafka.wait_for(moderation_deployment.topics["moderation.decisions"], bool)

Nothing here waits unbounded: every wait has a timeout and fails saying what it saw.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import redis as redis_client
from kafka import KafkaAdminClient
from kafka.admin import NewTopic
from kafka.consumer.fetcher import ConsumerRecord

from modstream.core import kafkaio
from modstream.core.config import LOCALHOST, PROJECT_ROOT, Settings
from modstream.ops import replay
from modstream.stack.local import broker_reachable
from modstream.testing.records import T0, TEST_KEYRING, upload

REACH_TIMEOUT_S = 10.0


def unreachable(settings: Settings, timeout_s: float = REACH_TIMEOUT_S) -> str | None:
    """Why the stack of `settings` cannot be used (its broker or Redis not answering within
    `timeout_s`, with how to start it), or None when both answer."""
    how = (
        "`make test` starts it; by hand: `MODSTREAM_RUN_DIR=.run/test MODSTREAM_KAFKA_PORT="
        f"{settings.kafka_port} MODSTREAM_KAFKA_CONTROLLER_PORT={settings.controller_port} "
        f"MODSTREAM_REDIS_PORT={settings.redis_port} modstream up`"
    )
    reason = broker_reachable(settings.bootstrap_servers, timeout_s=timeout_s)
    if reason is not None:
        return (
            f"Kafka broker at {settings.bootstrap_servers} is not reachable within "
            f"{timeout_s:.0f}s ({reason}); {how}"
        )
    try:
        redis_client.Redis(
            host=LOCALHOST, port=settings.redis_port, socket_timeout=3, socket_connect_timeout=3
        ).ping()
    except (redis_client.RedisError, OSError) as error:
        return f"Redis at {LOCALHOST}:{settings.redis_port} is not reachable ({error}); {how}"
    return None


class Kafka:
    """Small, bounded helpers over kafka-python for tests."""

    def __init__(self, bootstrap_servers: str) -> None:
        self.bootstrap_servers = bootstrap_servers

    def create_topics(self, names: list[str], partitions: int = 2) -> None:
        admin = KafkaAdminClient(
            bootstrap_servers=self.bootstrap_servers,
            request_timeout_ms=15_000,
            bootstrap_timeout_ms=15_000,
        )
        try:
            admin.create_topics(
                [NewTopic(name, partitions, 1) for name in names], timeout_ms=15_000
            )
        finally:
            admin.close()

    def produce(self, topic: str, records: list[tuple[str | None, bytes | None]]) -> None:
        kafkaio.produce(self.bootstrap_servers, topic, records)

    def read(self, topic: str, *, committed: bool = True) -> list[ConsumerRecord]:
        """Every record of `topic` up to its current end (the LSO for read_committed)."""
        return kafkaio.read_to_end(self.bootstrap_servers, topic, committed=committed)

    def values(self, topic: str, *, committed: bool = True) -> list[dict[str, Any]]:
        return [json.loads(record.value) for record in self.read(topic, committed=committed)]

    def wait_for(
        self,
        topic: str,
        predicate: Callable[[list[dict[str, Any]]], bool],
        *,
        committed: bool = True,
        timeout_s: float = 60.0,
    ) -> list[dict[str, Any]]:
        """Poll until predicate(values) holds; fail with what was seen after timeout_s."""
        deadline = time.monotonic() + timeout_s
        while True:
            values = self.values(topic, committed=committed)
            if predicate(values):
                return values
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"{topic}: condition not met within {timeout_s}s; {len(values)} records seen"
                )
            time.sleep(0.5)

    def wait_for_committed(
        self, group_id: str, topics: list[str], timeout_s: float = 60.0
    ) -> list[str]:
        """Poll until consumer group `group_id` has committed an offset on a partition of
        `topics`; returns those `topic#partition`. A job's Kafka source commits a checkpoint's
        offsets on its fetcher thread once the poll in flight returns (up to 10 s on a quiet
        partition), not when the checkpoint completes."""
        from modstream.jobs.restore import committed_partitions

        deadline = time.monotonic() + timeout_s
        while not (committed := committed_partitions(self.bootstrap_servers, group_id, topics)):
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"consumer group {group_id!r}: no committed offset on {topics} within"
                    f" {timeout_s}s"
                )
            time.sleep(0.5)
        return committed


@dataclass
class JobProcess:
    """One Flink job in its own process and MiniCluster; SIGTERM cancels it cleanly."""

    process: subprocess.Popen[bytes]
    log: Path

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def wait_running(self, timeout_s: float = 180.0) -> None:
        deadline = time.monotonic() + timeout_s
        while " running" not in self.output():
            if self.process.poll() is not None:
                raise AssertionError(
                    f"job exited with {self.process.returncode}:\n{self.output()[-3000:]}"
                )
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"job not running after {timeout_s}s:\n{self.output()[-3000:]}"
                )
            time.sleep(0.3)

    def alive(self) -> bool:
        return self.process.poll() is None

    def kill_group(self, timeout_s: float = 30.0) -> None:
        """SIGKILL the job's whole process group (its Python process and the MiniCluster's JVM
        with it), as a crashed machine would; the job must have been started with
        `session=True`."""
        os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=timeout_s)

    def stop(self, timeout_s: float = 90.0) -> int:
        if self.alive():
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=30)
                raise AssertionError(f"job ignored SIGTERM for {timeout_s}s") from None
        return self.process.returncode


def completed_checkpoints(checkpoint_dir: Path) -> int:
    """The highest completed checkpoint number under checkpoint_dir (0 when none)."""
    numbers = [
        int(meta.parent.name.split("-")[1]) for meta in checkpoint_dir.glob("*/chk-*/_metadata")
    ]
    return max(numbers, default=0)


def wait_for_checkpoint_after(checkpoint_dir: Path, number: int, timeout_s: float = 60.0) -> int:
    deadline = time.monotonic() + timeout_s
    while (latest := completed_checkpoints(checkpoint_dir)) <= number:
        if time.monotonic() > deadline:
            raise AssertionError(f"no checkpoint after #{number} within {timeout_s}s")
        time.sleep(0.2)
    return latest


def start_job_process(
    log: Path, module: str, *args: str, env: dict[str, str] | None = None, session: bool = False
) -> JobProcess:
    """`python -m modstream.jobs.<module> *args` in the project, its output in `log`;
    `session`: in a process group of its own, for `JobProcess.kill_group`."""
    with open(log, "wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", f"modstream.jobs.{module}", *args],
            cwd=PROJECT_ROOT,
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**os.environ, **(env or {})},
            start_new_session=session,
        )
    return JobProcess(process, log)


@dataclass
class ModerationDeployment:
    """Unique physical topics for one moderation job under test, and the job's options."""

    prefix: str
    topics: dict[str, str]
    args: list[str]


def new_moderation_deployment(
    kafka: Kafka, stack: Settings, checkpoint_dir: Path
) -> ModerationDeployment:
    """Topics unique to one moderation deployment on the real broker, and the job's options."""
    from modstream.moderation.step import ALL_TOPICS

    prefix = f"it-{uuid.uuid4().hex[:10]}"
    topics = {name: f"{prefix}.{name}" for name in ALL_TOPICS}
    kafka.create_topics(list(topics.values()))
    args = [
        "--checkpoint-dir",
        str(checkpoint_dir),
        "--checkpoint-interval-ms",
        "3000",
        "--transactional-id-prefix",
        prefix,
        "--group-id",
        prefix,
        "--policy",
        str(PROJECT_ROOT / "policy_rules" / "global.yaml"),
        "--bootstrap-servers",
        stack.bootstrap_servers,
        "--out-of-orderness-ms",
        "1000",
    ]
    for name, physical in topics.items():
        args += ["--topic", f"{name}={physical}"]
    grant_test_reviewers(kafka, topics)
    return ModerationDeployment(prefix, topics, args)


# The reviewers the tests' own reviews name (records.py `review_decision`: alice; versions.py
# `review`: r1), granted every queue from 2000 on by the suite's lead, so their reviews apply where
# the job checks grants (modstream/review/access.py). A review of a task the job issued needs a
# lease too.
TEST_REVIEWERS = ("alice", "r1")


def grant_test_reviewers(kafka: Kafka, topics: dict[str, str]) -> None:
    """Each of TEST_REVIEWERS granted every queue on this deployment's review.grants."""
    from modstream.core.limits import EARLIEST_TS
    from modstream.demo import workload
    from modstream.review.queue import grant_record

    lines = [
        {"topic": "review.grants", "value": grant_record(name, ["*"], "lead-1", EARLIEST_TS)}
        for name in TEST_REVIEWERS
    ]
    workload.produce(kafka.bootstrap_servers, lines, topics, TEST_KEYRING)


def run_replay(
    events: Path,
    out: Path,
    policy: Path,
    policy_key: str,
    *,
    parallelism: int = 1,
    timeout_s: float = 900,
    extra_args: tuple[str, ...] = (),
) -> dict[str, list[dict[str, Any]]]:
    """`modstream replay` as a user runs it (its own process and MiniCluster); the records of
    every output file, by topic. Fails with the command's output when it does not exit 0."""
    result = subprocess.run(
        replay.command(events, policy, out, parallelism, *extra_args),
        cwd=PROJECT_ROOT,
        env={**os.environ, "MODSTREAM_POLICY_KEY": policy_key},
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
    )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-4000:]
    return {
        path.stem: [json.loads(line) for line in path.read_text().splitlines()]
        for path in out.glob("*.jsonl")
    }


def free_ports(count: int) -> list[int]:
    """`count` ports free on loopback now (for a stack or a job of a test's own)."""
    sockets = [socket.socket() for _ in range(count)]
    try:
        for sock in sockets:
            sock.bind(("127.0.0.1", 0))
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


def modstream(
    env: dict[str, str], *args: str, timeout_s: float = 300
) -> subprocess.CompletedProcess[str]:
    """Run the `modstream` command as a user would, in the project, bounded in time."""
    return subprocess.run(
        [sys.executable, "-m", "modstream.cli.main", *args],
        cwd=PROJECT_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
    )


def running_processes_mentioning(marker: str) -> list[str]:
    """Live processes whose command line holds `marker` (pid: command), this one aside."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            state = (entry / "stat").read_text().rsplit(")", 1)[-1].split()[0]
        except OSError:
            continue
        if marker in cmdline and state != "Z":
            found.append(f"{entry.name}: {cmdline[:120]}")
    return found


# The ingest job (python -m modstream.jobs.ingest_check).


def ingest_job_args(topics: dict[str, str], checkpoint_dir: Path, interval_ms: int) -> list[str]:
    """The ingest_check job's options on the `topics` fixture's topics."""
    prefix = topics["_prefix"]
    args = [
        "--checkpoint-dir",
        str(checkpoint_dir),
        "--checkpoint-interval-ms",
        str(interval_ms),
        "--transactional-id-prefix",
        prefix,
        "--group-id",
        prefix,
    ]
    for name in ("content.versions", "content.validated", "moderation.dlq"):
        args += ["--topic", f"{name}={topics[name]}"]
    return args


def tagged_uploads(tag: str, count: int) -> list[tuple[str, bytes]]:
    """`count` uploads as (key, value) to produce, their event ids `<tag>-ev-<n>`."""
    records = [upload(f"{tag}-{i}", at=T0 + i, event_id=f"{tag}-ev-{i}") for i in range(count)]
    return [(record["content_id"], json.dumps(record).encode()) for record in records]


def event_ids(values: list[dict[str, Any]], tag: str) -> Counter[str]:
    """How often each event id of `tag` is among `values`: exactly once is once each."""
    return Counter(v["event_id"] for v in values if v["event_id"].startswith(f"{tag}-"))
