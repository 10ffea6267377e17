"""A moderation job restarted on its consumer group's committed offsets with no checkpoint to
restore refuses to start and says why (issue 27, point 8): resumed with empty state, the
versions it had read but not decided would never be decided, their reviews would go `stale` and
strikes would reset. `--accept-empty-state` starts it anyway, and says so in its log."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from modstream.demo import workload
from modstream.testing.records import upload
from modstream.testing.stack import JobProcess, Kafka, ModerationDeployment

pytestmark = pytest.mark.integration


def test_a_restart_with_committed_offsets_and_no_checkpoint_refuses_to_start(
    kafka: Kafka,
    start_job: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    moderation_deployment: ModerationDeployment,
) -> None:
    monkeypatch.setenv("MODSTREAM_POLICY_KEY", "it-policy-key")
    topics, args = moderation_deployment.topics, moderation_deployment.args
    group = moderation_deployment.prefix
    job: JobProcess = start_job("moderation", *args)
    job.wait_running()
    line = {"topic": "content.versions", "value": upload("c-read", at=int(time.time() * 1000))}
    workload.produce(kafka.bootstrap_servers, [line], topics)
    kafka.wait_for(topics["moderation.decisions"], lambda v: len(v) >= 1)
    # Stopped once the group's offsets are on the broker, not at a checkpoint: the source commits
    # a completed checkpoint's offsets after its poll in flight returns, up to 10 s later (the
    # batched engine decides within that, and the restart then found nothing to refuse).
    kafka.wait_for_committed(group, [topics["content.versions"]])
    assert job.stop() == 0

    # The same deployment (group, transactional ids) with its checkpoints gone.
    elsewhere = ["--checkpoint-dir", str(tmp_path / "lost")]
    refused: JobProcess = start_job("moderation", *args, *elsewhere)
    assert refused.process.wait(timeout=120) != 0
    output = refused.output()
    assert f"consumer group {group!r} has committed offsets" in output, output[-3000:]
    assert f"{topics['content.versions']}#" in output
    assert "--restore-from" in output and "--accept-empty-state" in output
    assert " running" not in output

    accepted: JobProcess = start_job("moderation", *args, *elsewhere, "--accept-empty-state")
    accepted.wait_running()
    assert "starting with EMPTY state" in accepted.output()
    assert accepted.stop() == 0
