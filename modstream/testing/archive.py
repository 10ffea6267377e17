"""A small archive for the archive, analytics and report tests, built without a broker: the
demo workload's inputs (modstream/demo/workload.py, seed 7) and the moderation job's outputs for
them (the golden replay, modstream/testing/golden.py), fed to the archive's writer with made-up
Kafka coordinates. `build(root)` writes it under `root`; an analytics query of one's own runs on
it as on a real archive.

Kafka timestamps: a decision is written 1 s after its event time; the Content Service serves a
revision 200 to 800 ms after that (content.visibility, made from the actions), so the report's
enforcement lag has a known spread.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

from modstream.analytics.archive_schema import TABLES
from modstream.analytics.archive_store import Archiver, load_manifest
from modstream.demo.workload import generate
from modstream.moderation import exposure as exposure_window
from modstream.testing.golden import GOLDEN

PARTITIONS = 2
INPUT_TOPICS = ("content.versions", "review.decisions", "moderation.appeals", "detector.results")
OUTPUT_TOPICS = ("moderation.decisions", "moderation.shadow", "moderation.actions", "review.tasks",
                 "moderation.dlq")  # fmt: skip
WRITTEN_AFTER_MS = 1_000


def golden(topic: str) -> list[dict[str, Any]]:
    lines = (GOLDEN / f"{topic}.jsonl").read_text().splitlines()
    return sorted((json.loads(line) for line in lines), key=lambda record: record["ts"])


def visibility(actions: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What the Content Service reports after applying each action."""
    return [
        {
            "content_id": action["content_id"],
            "content_version": action["content_version"],
            "decision_revision": action["decision_revision"],
            "visibility": action["visibility"],
            "ts": action["ts"] + WRITTEN_AFTER_MS + 200 + 100 * (index % 7),
        }
        for index, action in enumerate(actions)
    ]


@functools.cache
def records() -> dict[str, list[Any]]:
    """Contract topic -> its records (dicts, or raw text for a malformed one), in ts order;
    shared by the tests, which must not change them."""
    lines = generate(seed=7, versions=200)
    found: dict[str, list[Any]] = {
        topic: [line["value"] for line in lines if line["topic"] == topic] for topic in INPUT_TOPICS
    }
    for topic in OUTPUT_TOPICS:
        found[topic] = golden(topic)
    found["content.visibility"] = visibility(found["moderation.actions"])
    found["enforcement.exposure"] = exposure(found)
    found["review.access"] = access(found["review.tasks"])
    return found


def access(tasks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What the review console logs (modstream/console/evidence.py) for reviewers who claim,
    reveal and decide the first tasks, with a private note, and one refusal."""
    from modstream.console.evidence import access_record

    logged = []
    for index, task in enumerate(tasks[:24]):
        reviewer, at = f"reviewer-{index % 3}", task["ts"] + 60_000
        logged.append(access_record(reviewer, "claim", at, task))
        for ref in task.get("evidence", [])[:1]:
            logged.append(access_record(reviewer, "reveal", at + 1_000, task, evidence_ref=ref))
        outcome = ("BLOCK", "ALLOW")[index % 2]
        note = f"private note {index}"
        logged.append(
            access_record(reviewer, "decide", at + 2_000, task, outcome=outcome, note=note)
        )
    logged.append(access_record("reviewer-9", "refused", tasks[0]["ts"], detail="no grant"))
    return sorted(logged, key=lambda record: record["ts"])


def exposure(found: dict[str, list[Any]]) -> list[dict[str, Any]]:
    """What the reconciler measures (modstream/moderation/exposure.py) over these uploads, decisions
    and visibility records, taken in `ts` order."""
    steps = {
        "content.versions": exposure_window.on_upsert,
        "moderation.decisions": exposure_window.on_decision,
        "content.visibility": exposure_window.on_visibility,
    }
    merged = sorted(
        (
            (record["ts"], order, topic, record)
            for order, topic in enumerate(steps)
            for record in found[topic]
            if isinstance(record, dict)
            and isinstance(record.get("content_id"), str)
            and (topic != "content.versions" or record.get("type") == "upsert")
        ),
        key=lambda item: (item[0], item[1]),
    )
    states: dict[str, Any] = {}
    measured = []
    for ts, _, topic, record in merged:
        result = steps[topic](states.get(record["content_id"]), record, ts)
        states[record["content_id"]] = result.state
        measured += [output for _, _, output in result.outputs]
    return measured


def raw(value: Any) -> bytes:
    return (value if isinstance(value, str) else json.dumps(value)).encode("utf-8")


def feed(archiver: Archiver, topic: str, values: list[Any], offsets: dict[int, int]) -> None:
    """`values` of `topic` into `archiver`: partition by content_id, the next offsets."""
    table = next(t for t in TABLES.values() if t.topic == topic)
    for value in values:
        key = value.get("content_id", "") if isinstance(value, dict) else ""
        partition = sum(key.encode()) % PARTITIONS
        offset = offsets.get(partition, 0)
        ts = value.get("ts", 0) if isinstance(value, dict) else 0
        archiver.add(table, partition, offset, ts + WRITTEN_AFTER_MS, raw(value))
        offsets[partition] = offset + 1


def build(root: Path) -> Archiver:
    """The archive of `records()` at `root`, flushed once per topic; returns its writer."""
    archiver = Archiver(root, load_manifest(root))
    for topic, values in records().items():
        table = next(t for t in TABLES.values() if t.topic == topic)
        offsets: dict[int, int] = {}
        feed(archiver, topic, values, offsets)
        archiver.flush({(table.name, p): offset for p, offset in offsets.items()})
    return archiver
