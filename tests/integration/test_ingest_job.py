"""ingest_check on the real broker: DLQ routing, exactly-once output, restart from checkpoint."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from modstream.contract.common import MAX_RECORD_BYTES
from modstream.contract.dlq import RAW_LIMIT_BYTES
from modstream.testing.records import SECRET_TEXT, upload, without
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


# One malformed record of each kind, and the field its DLQ message must name.
MALFORMED: dict[str, tuple[bytes, str]] = {
    "missing field": (json.dumps(without(upload("m-1"), "author_id")).encode(), "author_id"),
    "wrong type": (json.dumps(upload("m-2", content_version="2")).encode(), "content_version"),
    "unknown enum": (json.dumps(upload("m-3", modality="smell")).encode(), "modality"),
    "not JSON": (b'{"event_id": "m-4", "text": "' + SECRET_TEXT.encode() + b'"', "Invalid JSON"),
    "over-long record": (
        json.dumps(upload("m-5", text=SECRET_TEXT + "x" * MAX_RECORD_BYTES)).encode(),
        "bytes",
    ),
    "over-long field": (json.dumps(upload("c" * 300)).encode(), "content_id"),
}


def test_malformed_records_reach_the_dlq_and_the_job_keeps_running(
    kafka: Kafka, topics: dict[str, str], start_job: Any, tmp_path: Path
) -> None:
    job: JobProcess = start_job("ingest_check", *job_args(topics, tmp_path / "ckpt", 1000))
    kafka.produce(topics["content.versions"], uploads("before", 3))
    kafka.produce(
        topics["content.versions"],
        [(f"bad-{i}", raw) for i, (raw, _) in enumerate(MALFORMED.values())],
    )
    kafka.produce(topics["content.versions"], uploads("after", 3))
    job.wait_running()

    letters = kafka.wait_for(topics["moderation.dlq"], lambda v: len(v) >= len(MALFORMED))
    valid = kafka.wait_for(topics["content.validated"], lambda v: len(v) >= 6)

    assert job.alive(), job.output()[-3000:]
    assert event_ids(valid, "before") == Counter({f"before-ev-{i}": 1 for i in range(3)})
    assert event_ids(valid, "after") == Counter({f"after-ev-{i}": 1 for i in range(3)})
    assert len(letters) == len(MALFORMED)
    by_key = {letter["key"]: letter for letter in letters}
    for i, (kind, (_, field)) in enumerate(MALFORMED.items()):
        letter = by_key[f"bad-{i}"]
        assert letter["error_class"] == "schema", kind
        assert letter["source_topic"] == topics["content.versions"], kind
        assert field in letter["message"], (kind, letter["message"])
        assert SECRET_TEXT not in letter["message"], kind
        assert len(letter["raw"].encode("utf-8")) <= RAW_LIMIT_BYTES, kind


def test_output_is_committed_on_checkpoint_and_never_duplicated_across_a_restart(
    kafka: Kafka, topics: dict[str, str], start_job: Any, tmp_path: Path
) -> None:
    checkpoints = tmp_path / "ckpt"
    validated = topics["content.validated"]
    args = job_args(topics, checkpoints, 4000)
    job: JobProcess = start_job("ingest_check", *args)
    job.wait_running()
    wait_for_checkpoint_after(checkpoints, 0)

    # 1. Written inside a transaction at once, visible to read_committed only after the next
    # checkpoint. Retried when a checkpoint happens to complete inside the observation window.
    for attempt in range(4):
        tag = f"first{attempt}"
        before = completed_checkpoints(checkpoints)
        kafka.produce(topics["content.versions"], uploads(tag, 20))
        kafka.wait_for(
            validated, lambda v, t=tag: len(event_ids(v, t)) == 20, committed=False, timeout_s=30
        )
        committed_now = event_ids(kafka.values(validated), tag)
        if completed_checkpoints(checkpoints) == before:
            assert committed_now == Counter(), "visible to read_committed before a checkpoint"
            break
    else:
        pytest.fail("a checkpoint completed inside every observation window; cannot judge")
    kafka.wait_for(validated, lambda v: len(event_ids(v, tag)) == 20, timeout_s=30)
    assert completed_checkpoints(checkpoints) > before
    first_tag = tag

    # 2. Processed but not yet checkpointed when the job is cancelled; then more while it is down.
    kafka.produce(topics["content.versions"], uploads("second", 20))
    kafka.wait_for(validated, lambda v: len(event_ids(v, "second")) == 20, committed=False)
    assert job.stop() == 0
    assert "cancelling on signal" in job.output()
    kafka.produce(topics["content.versions"], uploads("third", 20))

    # 3. Restart from the retained checkpoint: every record exactly once for read_committed.
    restarted: JobProcess = start_job("ingest_check", *args, "--restore-from", "latest")
    restarted.wait_running()
    assert "restoring from file:" in restarted.output()
    kafka.wait_for(validated, lambda v: len(event_ids(v, "third")) == 20, timeout_s=90)
    wait_for_checkpoint_after(checkpoints, completed_checkpoints(checkpoints))
    final = kafka.values(validated)
    for tag in (first_tag, "second", "third"):
        counts = event_ids(final, tag)
        assert len(counts) == 20, tag
        assert set(counts.values()) == {1}, f"duplicates for {tag}: {counts.most_common(3)}"
    assert kafka.values(topics["moderation.dlq"]) == []
    assert all(
        record.key.decode().startswith(("first", "second", "third"))
        for record in kafka.read(validated)
    )
