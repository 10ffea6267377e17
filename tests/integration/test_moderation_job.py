"""The moderation job on the real broker: each action exactly once across a cancel and a
restart from the last checkpoint, for a read_committed consumer."""

from __future__ import annotations

import json
import logging
from collections import Counter
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest

from modstream.core.config import ROCKSDB_OPTIONS
from modstream.demo import workload
from modstream.demo.workload import generate
from modstream.testing.records import T0
from modstream.testing.stack import (
    JobProcess,
    Kafka,
    ModerationDeployment,
    completed_checkpoints,
    wait_for_checkpoint_after,
)

pytestmark = pytest.mark.integration


def produce_lines(kafka: Kafka, topics: dict[str, str], lines: list[dict[str, Any]]) -> None:
    workload.produce(kafka.bootstrap_servers, lines, topics)


def decided_once(
    kafka: Kafka, topics: dict[str, str], lines: list[dict[str, Any]], checkpoints: Path
) -> list[dict[str, Any]]:
    """Waits for an action for every upload of `lines` and a checkpoint after it; asserts each
    action and each decision revision committed once. The committed decisions."""
    actions = topics["moderation.actions"]
    wanted = {line["value"]["content_id"] for line in lines if line["topic"] == "content.versions"}
    kafka.wait_for(actions, lambda v: {a["content_id"] for a in v} >= wanted, timeout_s=180)
    wait_for_checkpoint_after(checkpoints, completed_checkpoints(checkpoints))
    counts = Counter(action["action_id"] for action in kafka.values(actions))
    assert set(counts.values()) == {1}, counts.most_common(3)
    decisions = kafka.values(topics["moderation.decisions"])
    revisions = Counter((d["content_id"], d["decision_revision"]) for d in decisions)
    assert set(revisions.values()) == {1}
    return decisions


def tick(at: int) -> dict[str, Any]:
    """An upload far ahead in event time: it moves the watermark past earlier deadlines."""
    return workload.marker(at, f"tick-{at}")


@pytest.mark.parametrize("engine", ["batched", pytest.param("pyflink", marks=pytest.mark.slow)])
def test_actions_exactly_once_across_cancel_and_restart_then_reevaluation(
    engine: str,
    kafka: Kafka,
    start_job: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    moderation_deployment: ModerationDeployment,
    caplog: pytest.LogCaptureFixture,
) -> None:
    monkeypatch.setenv("MODSTREAM_POLICY_KEY", "it-policy-key")
    topics = moderation_deployment.topics
    args = (*moderation_deployment.args, "--engine", engine)

    first = generate(seed=3, versions=40, extras=False, malformed=False)
    second = generate(seed=4, versions=40, start_ts=T0 + 3_600_000, extras=False, malformed=False)
    job: JobProcess = start_job("moderation", *args)
    job.wait_running()
    produce_lines(kafka, topics, [*first, tick(T0 + 1_800_000)])
    actions = topics["moderation.actions"]
    kafka.wait_for(
        actions,
        lambda v: {a["content_id"] for a in v} >= {line["value"]["content_id"] for line in first},
        timeout_s=120,
    )
    # More input, processed but not all checkpointed, then cancel.
    produce_lines(kafka, topics, second[: len(second) // 2])
    kafka.wait_for(actions, lambda v: len(v) > 0, committed=False)
    assert job.stop() == 0
    produce_lines(kafka, topics, [*second[len(second) // 2 :], tick(T0 + 7_200_000)])

    restarted: JobProcess = start_job("moderation", *args, "--restore-from", "latest")
    restarted.wait_running()
    assert "restoring from file:" in restarted.output()
    decisions = decided_once(kafka, topics, first + second, tmp_path / "ckpt")
    # The input is a year old: event time passed the deadlines while the job read a backlog, so a
    # deadline waits for the detectors' real time (docs/moderation.md, "Time"). It decides only
    # where evidence stamped after it came (the detector was late, as replay decides it); where
    # evidence never came, it is still waiting.
    expired = {d["content_id"] for d in decisions if d["trigger"] == "deadline"}
    assert expired and expired <= late_evidence(first + second)

    reevaluate_through_the_index(kafka, topics, tmp_path, caplog)


ROCKSDB = ("--flink-conf", "state.backend.type=rocksdb")
ROCKSDB += ("--flink-conf", "execution.checkpointing.incremental=true")


@pytest.mark.timeout(420)
def test_a_leveled_rocksdb_checkpoint_restores_under_the_jobs_rocksdb_options(
    kafka: Kafka,
    start_job: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    moderation_deployment: ModerationDeployment,
) -> None:
    """ROCKSDB_OPTIONS turned universal compaction on (docs/BENCHMARKS.md, stop 45). An
    incremental checkpoint is RocksDB's own files, so a job that ran RocksDB's leveled default
    before must restore from its retained checkpoint under the new options: every version
    decided, every action once."""
    monkeypatch.setenv("MODSTREAM_POLICY_KEY", "it-policy-key")
    topics = moderation_deployment.topics
    leveled = (*ROCKSDB, "--flink-conf", "state.backend.rocksdb.compaction.style=LEVEL")
    options = [f"{key}={value}" for key, value in ROCKSDB_OPTIONS.items()]
    options = [arg for option in options for arg in ("--flink-conf", option)]
    first = generate(seed=3, versions=60, extras=False, malformed=False)
    second = generate(seed=4, versions=40, start_ts=T0 + 3_600_000, extras=False, malformed=False)
    job: JobProcess = start_job("moderation", *moderation_deployment.args, *leveled)
    job.wait_running()
    checkpoints = tmp_path / "ckpt"
    # Six batches, a checkpoint after each: each checkpoint flushes RocksDB's memtables to a new
    # level-0 file, and from the fourth leveled compaction moves files to level 1.
    step = len(first) // 6 + 1
    for start in range(0, len(first), step):
        produce_lines(kafka, topics, first[start : start + step])
        wait_for_checkpoint_after(checkpoints, completed_checkpoints(checkpoints))
    produce_lines(kafka, topics, [tick(T0 + 1_800_000)])
    wait_for_checkpoint_after(checkpoints, completed_checkpoints(checkpoints))
    assert job.stop() == 0
    produce_lines(kafka, topics, [*second, tick(T0 + 7_200_000)])

    restarted: JobProcess = start_job(
        "moderation", *moderation_deployment.args, *ROCKSDB, *options, "--restore-from", "latest"
    )
    restarted.wait_running()
    assert "restoring from file:" in restarted.output()
    decided_once(kafka, topics, first + second, checkpoints)


@pytest.mark.parametrize(
    ("first_options", "restored_options"),
    [
        ((), ("--parallelism", "2", "--pre-key-parallelism", "1")),
        # A bound of a few records: memory fills and spills again and again, so a key's input
        # is in keyed state and in memory at once, and a key readied by one watermark is often
        # spilled before the next call (a call every 1 s).
        (("--held-input-max-chars", "4000", "--batch-interval-ms", "1000"), ()),
    ],
    ids=["restored-rescaled", "spilled-to-keyed-state"],
)
@pytest.mark.timeout(420)
def test_input_held_at_a_checkpoint_is_decided_once_after_a_restore(
    first_options: tuple[str, ...],
    restored_options: tuple[str, ...],
    kafka: Kafka,
    start_job: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    moderation_deployment: ModerationDeployment,
) -> None:
    """The batched engine holds input waiting for the watermark in memory and writes it into
    each checkpoint as raw keyed state (HeldInput.java). The newest upload waits for the
    watermark when a checkpoint is taken and the job is stopped, so it is in no state but that;
    the job restored at two keyed subtasks (each takes the key groups it owns), or after a run
    whose bound moved what it held to keyed state every few records, decides it and every
    version once."""
    monkeypatch.setenv("MODSTREAM_POLICY_KEY", "it-policy-key")
    topics = moderation_deployment.topics
    first = generate(seed=5, versions=30, extras=False, malformed=False)
    held = tick(T0 + 1_800_000)
    second = generate(seed=6, versions=20, start_ts=T0 + 3_600_000, extras=False, malformed=False)
    job: JobProcess = start_job("moderation", *moderation_deployment.args, *first_options)
    job.wait_running()
    produce_lines(kafka, topics, [*first, held])
    actions = topics["moderation.actions"]
    uploads = {line["value"]["content_id"] for line in first if line["topic"] == "content.versions"}
    kafka.wait_for(actions, lambda v: {a["content_id"] for a in v} >= uploads, timeout_s=120)
    checkpoints = tmp_path / "ckpt"
    wait_for_checkpoint_after(checkpoints, completed_checkpoints(checkpoints))
    assert job.stop() == 0
    decided = {a["content_id"] for a in kafka.values(actions, committed=False)}
    assert held["value"]["content_id"] not in decided  # still waiting for the watermark
    produce_lines(kafka, topics, [*second, tick(T0 + 7_200_000)])

    restarted: JobProcess = start_job(
        "moderation", *moderation_deployment.args, *restored_options, "--restore-from", "latest"
    )
    restarted.wait_running()
    assert "restoring from file:" in restarted.output()
    decided_once(kafka, topics, [*first, held, *second], checkpoints)


def late_evidence(lines: list[dict[str, Any]]) -> set[str]:
    """Content ids with a detector result stamped after the upload's deadline."""
    deadline_ms = {"text": 5_000, "image": 30_000, "video": 120_000, "audio": 60_000}
    due = {
        line["value"]["content_id"]: line["value"]["ts"] + deadline_ms[line["value"]["modality"]]
        for line in lines
        if line["topic"] == "content.versions"
    }
    return {
        line["value"]["content_id"]
        for line in lines
        if line["topic"] == "detector.results"
        and line["value"]["ts"] > due[line["value"]["content_id"]]
    }


def latest_decisions(decisions: list[dict[str, Any]]) -> dict[tuple[str, int], dict[str, Any]]:
    latest: dict[tuple[str, int], dict[str, Any]] = {}
    for decision in decisions:
        key = (decision["content_id"], decision["content_version"])
        if key not in latest or decision["decision_revision"] > latest[key]["decision_revision"]:
            latest[key] = decision
    return latest


def selectable(decisions: list[dict[str, Any]]) -> list[tuple[str, int]]:
    """What re-evaluation under v2 must select, from the decisions (not the index): every
    version whose latest decision was made under v1, not deleted, not decided by a human."""
    human = {(d["content_id"], d["content_version"]) for d in decisions if d["trigger"] == "review"}
    return sorted(
        key
        for key, d in latest_decisions(decisions).items()
        if d["policy_version"] < 2 and d["state"] != "deleted" and key not in human
    )


def reevaluate_through_the_index(
    kafka: Kafka, topics: dict[str, str], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A reviewer decides one version; then a stricter policy version and `modstream reevaluate`,
    selecting from moderation.index: new revisions come from stored evidence with trigger
    `reevaluation`, only where the decision changes, never for the human decision (sticky), and
    running it twice re-decides nothing twice."""
    caplog.set_level(logging.INFO, logger="modstream.core.progress")
    from modstream.ops import reevaluate
    from modstream.testing.policies import global_document, version_record
    from modstream.testing.records import review_decision

    decisions = kafka.values(topics["moderation.decisions"])
    reviewed = next(
        cid
        for (cid, _), d in sorted(latest_decisions(decisions).items())
        if d["outcome"] != "BLOCK" and d["state"] != "deleted" and not cid.startswith("tick-")
    )
    review = review_decision(
        event_id="rv-it", task_id="t-it", content_id=reviewed, outcome="BLOCK", ts=T0 + 7_250_000
    )
    # Event time is the newest record's less the bound: the second tick lets the first be
    # decided, and stops event time short of the second until the next tick.
    ticks = [tick(T0 + 7_270_000), tick(T0 + 7_290_000)]
    produce_lines(kafka, topics, [{"topic": "review.decisions", "value": review}, *ticks])
    kafka.wait_for(
        topics["moderation.index"],
        lambda v: any(e["content_id"] == reviewed and e["human"] for e in v),
        timeout_s=120,
    )
    kafka.wait_for(
        topics["moderation.decisions"],
        lambda v: any(d["content_id"] == f"tick-{T0 + 7_270_000}" for d in v),
        timeout_s=120,
    )
    wait_for_checkpoint_after(tmp_path / "ckpt", completed_checkpoints(tmp_path / "ckpt"))
    decisions = kafka.values(topics["moderation.decisions"])
    assert {d["content_id"] for d in decisions if d["trigger"] == "review"} == {reviewed}
    expected = selectable(decisions)
    assert len(expected) > 40 and (reviewed, 1) not in expected

    strict = version_record(
        global_document(2, default="PENDING"), ts=T0 + 7_300_000, key=b"it-policy-key"
    )
    kafka.produce(topics["policy.rules"], [("global", json.dumps(strict).encode())])
    said: list[str] = []

    def run(dry_run: bool) -> None:
        reevaluate.run(
            kafka.bootstrap_servers,
            reevaluate.Selection("global", 2),
            rate_per_s=500,
            ts=T0 + 7_400_000,
            index_topic=topics["moderation.index"],
            target_topic=topics["moderation.reevaluate"],
            dry_run=dry_run,
            sample=3,
            say=said.append,
            progress_every_s=0.05,
        )

    run(dry_run=True)
    assert said[0].startswith(f"reevaluate: {len(expected)} content version(s) decided before")
    assert "skipped 1 human decision(s) (sticky" in said[1], said
    assert said[2:] == [f"reevaluate:   {cid} v{ver}" for cid, ver in expected[:3]]
    assert kafka.values(topics["moderation.reevaluate"]) == []  # a dry run produces nothing
    run(dry_run=False)
    run(dry_run=False)  # twice: the same event ids, re-decided once
    target = topics["moderation.reevaluate"]
    produced = f"reevaluate: produced {len(expected)} request(s) to {target} in"
    assert len([line for line in said if line.startswith(produced)]) == 2, said
    shown = [r.getMessage() for r in caplog.records if r.name == "modstream.core.progress"]
    assert f": {len(expected)}/{len(expected)} requests (100.0%)" in shown[-1], shown
    requests = kafka.values(topics["moderation.reevaluate"])
    assert sorted((r["content_id"], r["content_version"]) for r in requests) == sorted(expected * 2)
    assert set(Counter(r["event_id"] for r in requests).values()) == {2}

    produce_lines(kafka, topics, [tick(T0 + 9_000_000), tick(T0 + 9_100_000)])
    kafka.wait_for(
        topics["moderation.decisions"],
        lambda v: any(d["content_id"] == f"tick-{T0 + 9_000_000}" for d in v),
        timeout_s=180,
    )
    # Every subtask passed the tick's event time before the next checkpoint's barrier.
    wait_for_checkpoint_after(tmp_path / "ckpt", completed_checkpoints(tmp_path / "ckpt"))
    decisions = kafka.values(topics["moderation.decisions"])
    redecided = [d for d in decisions if d["trigger"] == "reevaluation"]
    assert redecided and all(d["policy_version"] == 2 for d in redecided)
    assert any(d["outcome"] == "PENDING" for d in redecided)
    keys = [(d["content_id"], d["content_version"]) for d in redecided]
    assert set(keys) <= set(expected)  # nothing outside the selection, never the reviewed one
    assert len(keys) == len(set(keys)), "a version re-decided twice"
    # Re-evaluation emits a revision only where the decision changes (contract: a new revision
    # only when outcome, restriction or state changes).
    by_version: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for decision in decisions:
        by_version.setdefault((decision["content_id"], decision["content_version"]), []).append(
            decision
        )
    checked = 0
    for revisions in by_version.values():
        revisions.sort(key=lambda d: d["decision_revision"])
        for before, after in pairwise(revisions):
            if after["trigger"] == "reevaluation":
                checked += 1
                assert (after["outcome"], after.get("restriction"), after["state"]) != (
                    before["outcome"],
                    before.get("restriction"),
                    before["state"],
                ), after
    assert checked == len(redecided)
    # The index now names v2 for every re-decided version: a dry run selects only the rest.
    remaining = selectable(decisions)
    assert not set(remaining) & set(keys)
    assert set(remaining) - set(expected) <= {(f"tick-{T0 + 7_290_000}", 1)}  # decided since
    said.clear()
    run(dry_run=True)
    assert said[0].startswith(f"reevaluate: {len(remaining)} content version(s) decided before")


def test_one_violation_decided_again_and_again_is_one_strike_and_an_appeal_reverses_it(
    kafka: Kafka,
    start_job: Any,
    monkeypatch: pytest.MonkeyPatch,
    moderation_deployment: ModerationDeployment,
) -> None:
    from modstream.testing.records import evidence, upload

    monkeypatch.setenv("MODSTREAM_POLICY_KEY", "it-policy-key")
    topics, args = moderation_deployment.topics, moderation_deployment.args
    text = {"modality": "text", "mime_type": "text/plain", "surface": "comment"}
    abusive = {"detector": "offensive_text", "model_version": "m1", "scores": {"offensive": 0.99}}
    first = evidence("s-1", at=T0 + 100, event_id="ev-1", **abusive)
    edit_evidence = evidence("s-1", at=T0 + 2_100, event_id="ev-3", content_version=2, **abusive)
    lines = [
        {"topic": "content.versions", "value": upload("s-1", at=T0, author_id="author-s", **text)},
        {"topic": "detector.results", "value": first},
        {"topic": "detector.results", "value": first},  # a duplicate
        {"topic": "detector.results", "value": {**first, "event_id": "ev-2", "ts": T0 + 200}},
        {
            "topic": "moderation.reevaluate",
            "value": {"event_id": "re-1", "content_id": "s-1", "content_version": 1,
                      "reason": "retry", "ts": T0 + 1_000},
        },
        # The same offense re-decided: an edit that violates the same way, the same day.
        {"topic": "content.versions", "value": upload(
            "s-1", at=T0 + 2_000, content_version=2, event_id="up-2", author_id="author-s", **text
        )},
        {"topic": "detector.results", "value": edit_evidence},
        {"topic": "moderation.appeals", "value": {
            "event_id": "ap-1", "appeal_id": "a1", "content_id": "s-1", "content_version": 1,
            "decision_revision": 2, "user_id": "author-s", "ts": T0 + 10_000,
        }},
        # r1 (granted every queue: tests/integration/conftest.py) leases the appeal's task.
        {"topic": "review.leases", "value": {
            "event_id": "ls-1", "task_id": "appeal-a1", "queue": "appeals", "content_id": "s-1",
            "content_version": 1, "reviewer_id": "r1", "ts": T0 + 15_000,
            "expires_ts": T0 + 915_000,
        }},
        {"topic": "review.decisions", "value": {
            "event_id": "rv-1", "task_id": "appeal-a1", "content_id": "s-1",
            "content_version": 1, "reviewer_id": "r1", "outcome": "ALLOW",
            "reason": "not harassment", "ts": T0 + 20_000,
        }},
        tick(T0 + 120_000),
    ]  # fmt: skip
    job: JobProcess = start_job("moderation", *args)
    job.wait_running()
    produce_lines(kafka, topics, lines)
    sanctions = kafka.wait_for(
        topics["account.actions"],
        lambda values: any(v["sanction"] == "strike_reversed" for v in values),
        timeout_s=120,
    )
    sanctions = kafka.values(topics["account.actions"])
    assert [(s["sanction"], s["user_id"], s["content_id"]) for s in sanctions] == [
        ("strike", "author-s", "s-1"),
        ("strike_reversed", "author-s", "s-1"),
    ]
    assert sanctions[1]["strike_count"] == 0
    notices = kafka.values(topics["user.notifications"])
    blocked = [n for n in notices if n["outcome"] == "BLOCK" and n["content_id"] == "s-1"]
    assert blocked and blocked[0]["reason_code"] == "harassment"


def test_a_review_read_before_its_lease_waits_for_it_on_the_live_job(
    kafka: Kafka,
    start_job: Any,
    moderation_deployment: ModerationDeployment,
) -> None:
    """The fault campaign's one discrepancy (docs/BENCHMARKS.md, stop 48): a console sends the
    lease, then the review, on two topics; read the other way round, after event time passed
    both, the review was refused (`conflict`) live and applied in replay. Here the review is
    sent first and read alone; it waits (nothing in the DLQ) until the lease, stamped before
    it, is read, then decides the appeal as in `ts` order. No upload follows them: input read
    behind the watermark of a stream that is behind (stamped a year back) is decided all the
    same, though its event time does not move (BatchedVersions.java, `LATE_CALL_MS`)."""
    from modstream.testing.records import evidence, upload

    topics, args = moderation_deployment.topics, moderation_deployment.args
    text = {"modality": "text", "mime_type": "text/plain", "surface": "comment"}
    abusive = {"detector": "offensive_text", "model_version": "m1", "scores": {"offensive": 0.99}}
    lines = [
        {"topic": "content.versions", "value": upload("w-1", at=T0, author_id="author-w", **text)},
        {"topic": "detector.results", "value": evidence("w-1", at=T0 + 100, **abusive)},
        {"topic": "moderation.appeals", "value": {
            "event_id": "ap-w", "appeal_id": "aw", "content_id": "w-1", "content_version": 1,
            "decision_revision": 2, "user_id": "author-w", "ts": T0 + 10_000,
        }},
        tick(T0 + 120_000),
    ]  # fmt: skip
    lease = {
        "event_id": "ls-w", "task_id": "appeal-aw", "queue": "appeals", "content_id": "w-1",
        "content_version": 1, "reviewer_id": "r1", "ts": T0 + 15_000, "expires_ts": T0 + 915_000,
    }  # fmt: skip
    review = {
        "event_id": "rv-w", "task_id": "appeal-aw", "content_id": "w-1", "content_version": 1,
        "reviewer_id": "r1", "outcome": "ALLOW", "reason": "not harassment", "ts": T0 + 20_000,
    }  # fmt: skip
    job: JobProcess = start_job("moderation", *args)
    job.wait_running()
    produce_lines(kafka, topics, lines)
    kafka.wait_for(
        topics["review.tasks"], lambda v: any(t["task_id"] == "appeal-aw" for t in v), timeout_s=120
    )
    # Read alone, long after event time passed it: it waits for its lease, no letter. Behind
    # it on the same partition (keyed by content id), a review by a reviewer with no grant is
    # refused at once: its letter says the job has read the first.
    marker = {**review, "event_id": "rv-marker", "reviewer_id": "r-ungranted", "ts": T0 + 21_000}
    produce_lines(
        kafka,
        topics,
        [
            {"topic": "review.decisions", "value": review},
            {"topic": "review.decisions", "value": marker},
        ],
    )
    kafka.wait_for(
        topics["moderation.dlq"], lambda v: any("rv-marker" in r["raw"] for r in v), timeout_s=60
    )
    assert [d["trigger"] for d in decisions_of(kafka, topics, "w-1")][-1] != "appeal"
    assert not [r for r in kafka.values(topics["moderation.dlq"]) if "rv-w" in r["raw"]]
    produce_lines(kafka, topics, [{"topic": "review.leases", "value": lease}])
    decided = kafka.wait_for(
        topics["moderation.decisions"],
        lambda v: any(d["content_id"] == "w-1" and d["trigger"] == "appeal" for d in v),
        timeout_s=60,
    )
    appeal = [d for d in decided if d["content_id"] == "w-1" and d["trigger"] == "appeal"]
    assert [(d["outcome"], d["ts"]) for d in appeal] == [("ALLOW", T0 + 20_000)]
    letters = [r for r in kafka.values(topics["moderation.dlq"]) if r.get("key") == "w-1"]
    assert [(r["error_class"], "rv-marker" in r["raw"]) for r in letters] == [("signature", True)]


def decisions_of(kafka: Kafka, topics: dict[str, str], content_id: str) -> list[dict[str, Any]]:
    return [
        d for d in kafka.values(topics["moderation.decisions"]) if d["content_id"] == content_id
    ]
