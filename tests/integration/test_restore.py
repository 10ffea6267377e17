"""Where a job starts, on the real broker (modstream/jobs/restore.py): the newest checkpoint by
default, never one whose transactions the broker aborted, and never next to a live instance of the
same transactional ids."""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path

import pytest

from modstream.jobs import restore
from modstream.testing.stack import (
    JobProcess,
    Kafka,
    completed_checkpoints,
    event_ids,
    wait_for_checkpoint_after,
)
from modstream.testing.stack import ingest_job_args as job_args
from modstream.testing.stack import tagged_uploads as uploads

pytestmark = pytest.mark.integration


def exactly_once(kafka: Kafka, topic: str, tags: list[str], count: int) -> None:
    final = kafka.values(topic)
    for tag in tags:
        counts = event_ids(final, tag)
        assert len(counts) == count, f"{tag}: {len(counts)} of {count}"
        assert set(counts.values()) == {1}, f"duplicates for {tag}: {counts.most_common(3)}"


@pytest.mark.timeout(420)
def test_a_restore_passes_over_a_checkpoint_whose_transaction_the_broker_aborted(
    kafka: Kafka, topics: dict[str, str], start_job: object, tmp_path: Path
) -> None:
    """A 3 s transaction timeout under a 25 s checkpoint interval makes the broker abort the
    transaction of records written early in an interval before the checkpoint holding them
    completes: its commit then fails and the connector only logs it. That is the state a restore
    later than the timeout finds after a crash between a checkpoint and its commit. Restoring
    that newest checkpoint (what `--restore-from latest` did) restores offsets past records whose
    outputs are gone; the restore passes over it and reads them again."""
    checkpoints = tmp_path / "ckpt"
    validated = topics["content.validated"]
    prefix = topics["_prefix"]
    slow = [
        *job_args(topics, checkpoints, 25_000),
        "--transaction-timeout-ms",
        "3000",
        "--restart-strategy",
        "none",
    ]
    job: JobProcess = start_job("ingest_check", *slow)  # type: ignore[operator]
    job.wait_running()
    first = wait_for_checkpoint_after(checkpoints, 0, timeout_s=90)
    kafka.produce(topics["content.versions"], uploads("lost", 10))
    kafka.wait_for(validated, lambda v: len(event_ids(v, "lost")) == 10, committed=False)
    holding = wait_for_checkpoint_after(checkpoints, first, timeout_s=60)
    time.sleep(1)  # the failed commit
    job.process.kill()  # kill -9 the whole job before its next checkpoint
    job.process.wait(timeout=30)
    assert completed_checkpoints(checkpoints) == holding
    states = restore.transaction_states(kafka.bootstrap_servers, prefix)
    assert restore.aborted_ids(states, prefix, holding) == [f"{prefix}-0-{holding}"], states
    assert event_ids(kafka.values(validated), "lost") == Counter()

    kafka.produce(topics["content.versions"], uploads("after", 10))
    restarted: JobProcess = start_job(  # type: ignore[operator]
        "ingest_check", *job_args(topics, checkpoints, 2_000)
    )
    restarted.wait_running()
    output = restarted.output()
    assert f"passing over {next(checkpoints.glob(f'*/chk-{holding}'))}" in output, output
    assert f"/chk-{first}" in output.split("restoring from", 1)[1].splitlines()[0]
    kafka.wait_for(validated, lambda v: len(event_ids(v, "after")) == 10, timeout_s=90)
    exactly_once(kafka, validated, ["lost", "after"], 10)


def test_a_restart_resumes_from_the_newest_checkpoint_by_default(
    kafka: Kafka, topics: dict[str, str], start_job: object, tmp_path: Path
) -> None:
    checkpoints = tmp_path / "ckpt"
    validated = topics["content.validated"]
    args = job_args(topics, checkpoints, 1_000)
    job: JobProcess = start_job("ingest_check", *args)  # type: ignore[operator]
    job.wait_running()
    kafka.produce(topics["content.versions"], uploads("one", 10))
    kafka.wait_for(validated, lambda v: len(event_ids(v, "one")) == 10, timeout_s=60)
    wait_for_checkpoint_after(checkpoints, completed_checkpoints(checkpoints))
    assert job.stop() == 0
    kafka.produce(topics["content.versions"], uploads("two", 10))

    again: JobProcess = start_job("ingest_check", *args)  # type: ignore[operator]
    again.wait_running()
    assert "restoring from file:" in again.output()
    kafka.wait_for(validated, lambda v: len(event_ids(v, "two")) == 10, timeout_s=60)
    exactly_once(kafka, validated, ["one", "two"], 10)


def test_a_second_instance_with_the_same_transactional_ids_refuses_to_start(
    kafka: Kafka, topics: dict[str, str], start_job: object, tmp_path: Path
) -> None:
    validated = topics["content.validated"]
    first: JobProcess = start_job(  # type: ignore[operator]
        "ingest_check", *job_args(topics, tmp_path / "a", 1_000)
    )
    first.wait_running()
    wait_for_checkpoint_after(tmp_path / "a", 1)
    second: JobProcess = start_job(  # type: ignore[operator]
        "ingest_check", *job_args(topics, tmp_path / "b", 1_000)
    )
    assert second.process.wait(timeout=120) != 0
    assert "another instance is writing with transactional id prefix" in second.output()
    # The first instance was not fenced: it goes on writing, exactly once.
    kafka.produce(topics["content.versions"], uploads("later", 10))
    kafka.wait_for(validated, lambda v: len(event_ids(v, "later")) == 10, timeout_s=60)
    assert first.alive()
    exactly_once(kafka, validated, ["later"], 10)
