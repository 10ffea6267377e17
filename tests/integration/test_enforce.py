"""The Action Service (modstream/jobs/enforce.py) and the reference Content Service on real
Redis/Kafka."""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
import redis

from modstream.contract.outputs import Completeness, Decision
from modstream.core.config import Settings
from modstream.enforcement.content_service import ContentService
from modstream.testing.enforcement import content_action as action
from modstream.testing.records import T0, upload
from modstream.testing.stack import Kafka

pytestmark = pytest.mark.integration


@pytest.fixture
def client(stack: Settings) -> redis.Redis:
    return redis.Redis.from_url(stack.redis_url)


def test_fences_exports_and_a_failed_invalidation(client: redis.Redis, tmp_path: Path) -> None:
    failing = {"on": False}

    def purge(content_id: str, paths: list[Path]) -> None:
        if failing["on"]:
            raise TimeoutError("CDN purge timed out")

    namespace = f"it-{uuid.uuid4().hex[:8]}"
    service = ContentService(client, tmp_path / "media", invalidate=purge, namespace=namespace)
    service.upload("c-1", 1, b"\x89PNG fake image bytes", T0)
    assert not service.is_exported("c-1", 1)  # quarantined until an action allows it
    assert service.apply("c-1", 1, 1, "public", None, T0).status == "applied"
    assert service.is_exported("c-1", 1)
    assert (tmp_path / "media" / "public" / "c-1.v1.thumb").exists()
    assert service.apply("c-1", 1, 1, "public", None, T0).status == "stale"
    failing["on"] = True
    assert service.apply("c-1", 1, 2, "hidden", None, T0).status == "applied"
    assert not service.is_exported("c-1", 1)
    effective = service.effective("c-1", T0)
    assert effective is not None and effective.visibility == "public"  # caches still serve it
    failing["on"] = False
    assert service.apply("c-1", 1, 2, "hidden", None, T0, repair=True).status == "applied"
    effective = service.effective("c-1", T0)
    assert effective is not None and effective.visibility == "hidden"
    service.upload("c-1", 2, b"edited", T0 + 10)
    assert service.apply("c-1", 1, 9, "public", None, T0).status == "superseded"
    assert not service.is_exported("c-1", 1) and not service.is_exported("c-1", 2)


def _deployment(kafka: Kafka, stack: Settings, tmp_path: Path) -> tuple[dict[str, str], list[str]]:
    prefix = f"it-{uuid.uuid4().hex[:10]}"
    names = ("moderation.actions", "enforcement.repairs", "content.visibility", "moderation.dlq")
    topics = {name: f"{prefix}.{name}" for name in names}
    kafka.create_topics(list(topics.values()))
    args = [
        "--checkpoint-dir",
        str(tmp_path / "ckpt"),
        "--checkpoint-interval-ms",
        "1000",
        "--transactional-id-prefix",
        prefix,
        "--group-id",
        prefix,
        "--bootstrap-servers",
        stack.bootstrap_servers,
        "--media-dir",
        str(tmp_path / "media"),
        "--intent-ttl-ms",
        "3000",
    ]
    for name, physical in topics.items():
        args += ["--topic", f"{name}={physical}"]
    return topics, args


def test_the_action_service_applies_in_revision_order_and_ignores_old_versions(
    kafka: Kafka, stack: Settings, tmp_path: Path, client: redis.Redis, start_job: Any
) -> None:
    topics, args = _deployment(kafka, stack, tmp_path)
    cid, old = f"c-{uuid.uuid4().hex[:8]}", f"o-{uuid.uuid4().hex[:8]}"
    service = ContentService(client, tmp_path / "media")
    service.upload(cid, 1, b"bytes", T0)
    service.upload(old, 1, b"v1", T0)
    service.upload(old, 2, b"v2", T0 + 1)
    job = start_job("enforce", *args)
    job.wait_running()
    records = [
        action(cid, 1, "public"),
        action(cid, 3, "hidden"),  # revision 3 delivered before revision 2
        action(cid, 2, "limited"),
        action(old, 4, "public", version=1),  # an action for a superseded version
    ]
    kafka.produce(
        topics["moderation.actions"], [(r["content_id"], json.dumps(r).encode()) for r in records]
    )
    seen = kafka.wait_for(
        topics["content.visibility"], lambda values: len(values) >= 4, timeout_s=90
    )
    state = {k.decode(): v.decode() for k, v in client.hgetall(f"content:{cid}").items()}
    assert (state["revision"], state["visibility"], state["applies"]) == ("3", "hidden", "2")
    assert client.get(f"intent:{records[2]['action_id']}") == b"STALE"
    assert client.get(f"intent:{records[1]['action_id']}") == b"COMPLETED"
    old_state = client.hgetall(f"content:{old}")
    assert old_state[b"version"] == b"2" and b"applies" not in old_state
    assert client.get(f"intent:{records[3]['action_id']}") == b"STALE"
    last = [v for v in seen if v["content_id"] == cid][-1]
    assert (last["decision_revision"], last["visibility"]) == (3, "hidden")


def test_killed_between_apply_and_completed_applies_nothing_twice(
    kafka: Kafka, stack: Settings, tmp_path: Path, client: redis.Redis, start_job: Any
) -> None:
    topics, args = _deployment(kafka, stack, tmp_path)
    cid = f"k-{uuid.uuid4().hex[:8]}"
    ContentService(client, tmp_path / "media").upload(cid, 1, b"bytes", T0)
    record = action(cid, 1, "hidden")
    doomed = start_job(
        "enforce", *args, env={"MODSTREAM_ENFORCE_CRASH_AFTER_APPLY": record["action_id"]}
    )
    doomed.wait_running()
    kafka.produce(topics["moderation.actions"], [(cid, json.dumps(record).encode())])
    doomed.process.wait(timeout=90)
    # The Flink JVM exited after apply, before COMPLETED; the job's client process follows.
    assert doomed.process.returncode != 0
    assert client.get(f"intent:{record['action_id']}") == b"PENDING"
    assert client.hget(f"content:{cid}", "applies") == b"1"
    restarted = start_job("enforce", *args)
    restarted.wait_running()
    kafka.wait_for(
        topics["content.visibility"],
        lambda values: any(v["content_id"] == cid for v in values),
        timeout_s=90,
    )
    assert client.hget(f"content:{cid}", "applies") == b"1"  # the fence refused a second apply
    assert client.get(f"intent:{record['action_id']}") == b"STALE"
    assert client.hget(f"content:{cid}", "visibility") == b"hidden"


def test_a_dlq_replay_of_a_stale_item_changes_nothing(
    kafka: Kafka, stack: Settings, tmp_path: Path, client: redis.Redis
) -> None:
    from modstream.contract import dead_letter
    from modstream.ops import dlq

    prefix = f"it-{uuid.uuid4().hex[:10]}"
    names = ("detector.results", "moderation.dlq")
    topics = {name: f"{prefix}.{name}" for name in names}
    kafka.create_topics(list(topics.values()))
    blocked, fresh = f"b-{uuid.uuid4().hex[:8]}", f"f-{uuid.uuid4().hex[:8]}"
    service = ContentService(client, tmp_path / "media")
    for cid in (blocked, fresh):
        service.upload(cid, 1, b"bytes", T0)
    service.apply(blocked, 1, 2, "hidden", None, T0)  # blocked since the item was dead-lettered
    letters = []
    for cid in (blocked, fresh):
        # Dead-lettered when the detector's record was refused (say, a transient failure).
        raw = json.dumps(evidence_for(cid))
        note = dead_letter(
            topics["detector.results"], cid, raw, "x", ts=T0, error_class="transient_exhausted"
        )
        letters.append((cid, note.model_dump_json().encode()))
    kafka.produce(topics["moderation.dlq"], letters)
    counts = dlq.replay(stack.bootstrap_servers, topics["moderation.dlq"], client, prefix=prefix)
    assert counts == {"blocked_or_deleted": 1, "current": 1}
    replayed = kafka.values(topics["detector.results"])
    assert [r["content_id"] for r in replayed] == [fresh]
    verdicts = [v for v in kafka.values(topics["moderation.dlq"]) if v["error_class"] == "stale"]
    assert len(verdicts) == 1 and verdicts[0]["key"] == blocked
    # The note carries the record it answers as its earlier attempt, and keeps its owner.
    earlier = json.loads(letters[0][1])
    assert verdicts[0]["attempts"] == 2 and verdicts[0]["owner"] == earlier["owner"]
    assert verdicts[0]["history"] == [
        {key: earlier[key] for key in ("ts", "error_class", "message", "job")}
    ]
    again = dlq.replay(stack.bootstrap_servers, topics["moderation.dlq"], client, prefix=prefix)
    assert again == {"already_replayed": 2}
    assert len(kafka.values(topics["detector.results"])) == 1  # nothing twice
    # The replayed input refused again: listed with the record replay sent back as its history.
    refused = dead_letter(topics["detector.results"], fresh, json.loads(
        letters[1][1])["raw"], "y", ts=T0, error_class="conflict")  # fmt: skip
    kafka.produce(topics["moderation.dlq"], [(fresh, refused.model_dump_json().encode())])
    listed = dlq.list_letters(stack.bootstrap_servers, topics["moderation.dlq"], client=client)
    [again_refused] = [letter for letter in listed if letter["error_class"] == "conflict"]
    assert again_refused["attempts"] == 2
    assert [entry["error_class"] for entry in again_refused["history"]] == ["transient_exhausted"]
    assert dlq.by_owner(listed) == {"ingest": {"conflict": 1, "stale": 1, "transient_exhausted": 2}}


def evidence_for(content_id: str) -> dict[str, Any]:
    """Evidence as the detector signed it (the test stack requires signatures)."""
    from modstream.testing.records import TEST_KEYRING, evidence
    from modstream.trust.signing import signed

    return signed("detector.results", evidence(content_id), TEST_KEYRING)


def test_a_hand_changed_visibility_is_found_and_repaired_within_the_sla(
    kafka: Kafka, stack: Settings, tmp_path: Path, client: redis.Redis, start_job: Any
) -> None:
    topics, args = _deployment(kafka, stack, tmp_path)
    prefix = topics["moderation.actions"].rsplit(".", 2)[0]
    # The reconciler's own output, what it reads for the exposure window and for the review
    # wait (review.tasks, review.decisions: modstream/jobs/review_wait.py). Without the review
    # topics on the broker its Kafka source read nothing at all (0 discrepancies in 120 s on an idle
    # machine).
    extra = {
        name: f"{prefix}.{name}"
        for name in (
            "moderation.discrepancies",
            "content.versions",
            "moderation.decisions",
            "enforcement.exposure",
            "review.tasks",
            "review.decisions",
        )
    }
    discrepancies = extra["moderation.discrepancies"]
    kafka.create_topics(list(extra.values()))
    reconciler_args = [
        "--checkpoint-dir", str(tmp_path / "ckpt-reconciler"),
        "--checkpoint-interval-ms", "1000",
        "--transactional-id-prefix", f"{discrepancies}-r",
        "--group-id", f"{discrepancies}-r",
        "--bootstrap-servers", stack.bootstrap_servers,
        "--sla-ms", "2000",
        "--max-retries", "3",
    ]  # fmt: skip
    for name, physical in {**topics, **extra}.items():
        reconciler_args += ["--topic", f"{name}={physical}"]
    cid = f"r-{uuid.uuid4().hex[:8]}"
    service = ContentService(client, tmp_path / "media")
    service.upload(cid, 1, b"bytes", T0)
    enforcer = start_job("enforce", *args)
    reconciler = start_job("reconciler", *reconciler_args)
    enforcer.wait_running()
    reconciler.wait_running()
    record = action(cid, 2, "hidden")
    # The upload's facts and the BLOCK's decision, for the exposure window (docs/enforcement.md).
    facts = upload(cid, surface="public_post", region="NL")
    kafka.produce(extra["content.versions"], [(cid, json.dumps(facts).encode())])
    kafka.produce(extra["moderation.decisions"], [(cid, _blocked(record).encode())])
    kafka.produce(topics["moderation.actions"], [(cid, json.dumps(record).encode())])
    kafka.wait_for(topics["content.visibility"], lambda values: len(values) >= 1, timeout_s=90)
    # A lost cache invalidation / an operator's mistake: users can see it again.
    drift = service.set_visibility_by_hand(cid, "public", int(time.time() * 1000))
    kafka.produce(topics["content.visibility"], [(cid, json.dumps(drift.record()).encode())])
    # Under load the reconciler may read the action more than the SLA before the first
    # visibility record (a legitimate `pending` retry): the drift's is the one with `public`.
    found = kafka.wait_for(
        discrepancies,
        lambda values: any(v["effective_visibility"] == "public" for v in values),
        timeout_s=120,  # the SLA (a few seconds) and a loaded machine's checkpoints
    )
    found = [v for v in found if v["effective_visibility"] == "public"]
    assert (found[0]["desired_visibility"], found[0]["effective_visibility"]) == (
        "hidden",
        "public",
    )
    assert found[0]["action"] == "retry" and found[0]["age_ms"] >= 2000
    deadline = time.monotonic() + 60
    while (service.effective(cid, T0) or drift).visibility != "hidden":
        assert time.monotonic() < deadline, "the repair was not applied"
        time.sleep(0.5)
    assert client.hget(f"content:{cid}", "visibility") == b"hidden"
    assert not service.is_exported(cid, 1)  # the export the hand change made is withdrawn
    repairs = kafka.values(topics["enforcement.repairs"])
    assert repairs and repairs[0]["repair_of"] == record["action_id"]
    assert client.get(f"intent:{repairs[0]['action_id']}") == b"COMPLETED"
    # Blocked before anyone saw it, then shown by the drift until the repair took effect: that
    # is the version's exposure window, once, measured by the reconciler.
    exposed = kafka.wait_for(extra["enforcement.exposure"], lambda values: len(values) >= 1)
    assert [(e["content_id"], e["surface"], e["region"], e["trigger"]) for e in exposed] == [
        (cid, "public_post", "NL", "evidence")
    ]
    assert exposed[0]["shown_ts"] == drift.ts and exposed[0]["exposure_ms"] >= 2000


def _blocked(record: dict[str, Any]) -> str:
    """The moderation.decisions record behind a BLOCK action."""
    return Decision(
        decision_id=f"d-{record['action_id'][:16]}",
        content_id=record["content_id"],
        content_version=record["content_version"],
        decision_revision=record["decision_revision"],
        outcome="BLOCK",
        reasons=["malware"],
        matched_rules=["malware-block"],
        policy_id="global",
        policy_version=1,
        evidence=[],
        completeness=Completeness(required=1, received=1, unknown=[]),
        trigger="evidence",
        state="blocked",
        ts=record["ts"],
    ).model_dump_json()


def test_purges_failing_at_random_heal_in_the_job(
    kafka: Kafka, stack: Settings, tmp_path: Path, client: redis.Redis, start_job: Any
) -> None:
    topics, args = _deployment(kafka, stack, tmp_path)
    service = ContentService(client, tmp_path / "media")
    items = [f"p-{uuid.uuid4().hex[:8]}" for _ in range(12)]
    for cid in items:
        service.upload(cid, 1, b"image bytes", T0)
        service.apply(cid, 1, 1, "public", None, T0)
    assert len(list((tmp_path / "media" / "public").iterdir())) == 2 * len(items)
    job = start_job("enforce", *args, "--purge-failure-rate", "0.5", "--purge-failure-seed", "3")
    job.wait_running()
    hides = [action(cid, 2, "hidden") for cid in items]
    kafka.produce(
        topics["moderation.actions"], [(r["content_id"], json.dumps(r).encode()) for r in hides]
    )

    def healed(values: list[dict[str, Any]]) -> bool:
        last = {v["content_id"]: v["visibility"] for v in values}
        return all(last.get(cid) == "hidden" for cid in items)

    seen = kafka.wait_for(topics["content.visibility"], healed, timeout_s=90)
    # Some purges failed (reported visible first), and every one healed on the job's timers.
    assert any(v["visibility"] == "public" for v in seen)
    assert list((tmp_path / "media" / "public").iterdir()) == []
    assert all(not client.hexists(service.key(cid), "purge") for cid in items)


def test_a_job_refuses_to_start_while_an_input_topic_is_missing(
    kafka: Kafka, stack: Settings, tmp_path: Path, start_job: Any
) -> None:
    """The reconciler reads review.tasks and review.decisions as well (the review wait): given
    a deployment without them, Flink's Kafka source read none of its topics and the job ran
    on, reporting nothing. It now exits at once, naming what is missing."""
    topics, _ = _deployment(kafka, stack, tmp_path)
    prefix = topics["moderation.actions"].rsplit(".", 2)[0]
    missing = f"{prefix}.review.tasks"
    args = ["--bootstrap-servers", stack.bootstrap_servers, "--checkpoint-dir", str(tmp_path)]
    for name, physical in {**topics, "review.tasks": missing}.items():
        args += ["--topic", f"{name}={physical}"]
    job = start_job("reconciler", *args)
    assert job.process.wait(timeout=120) == 2, job.output()[-3000:]
    said = job.output()
    assert "reconciler: input topics missing on the broker: " in said and missing in said
