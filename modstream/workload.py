"""A seeded, contract-shaped workload for replay, the demo and benchmarks.

Content versions of every modality (video with segments), evidence per required detector and
segment with realistic delays, duplicates, evidence that carries an earlier `ts` than its
upsert, missing and timed-out evidence (deadlines), edits, deletes, reports, a review, an
appeal, a re-evaluation, a hash-bank entry with a matching upload, a signed policy version
and malformed records. Same seed, same records.

Authority records (detector results, reviews, appeals, bank entries) are generated unsigned and
signed where they leave: `for_kafka` / `produce` and `write` sign each with its producer's key
from the deployment's keyring (`Keyring.from_env()` unless one is given), so a stack that
requires signatures gets them and one without keys gets the records as generated. A line that
already carries `signature` is sent as it is (tests forge records that way).
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from typing import Any

from operators.signing import AUTHORITY_TOPICS, Keyring, sign, signed

T0 = 1_764_460_800_000
REQUIRED = {
    "text": ["offensive_text"],
    "image": ["media_check", "nsfw_image"],
    "video": ["media_check", "nsfw_image"],
    "audio": ["media_check"],
}
LABELS = {"offensive_text": "offensive", "nsfw_image": "nsfw", "media_check": "malware"}
MIME = {"text": "text/plain", "image": "image/jpeg", "video": "video/mp4", "audio": "audio/mpeg"}
Line = dict[str, Any]


@dataclass(frozen=True)
class Mix:
    """What a generated workload holds per version: the modality drawn from `modalities` (one
    entry per share), video segments between `video_segments` (inclusive), and the chance of
    a duplicated detector result, of evidence stamped before its upload (out of order), of a
    report and of a human review decision."""

    modalities: tuple[str, ...] = ("text", "text", "image", "image", "video", "audio")
    video_segments: tuple[int, int] = (3, 3)
    duplicate: float = 0.05
    out_of_order: float = 0.05
    report: float = 0.0
    review: float = 0.0


DEFAULT_MIX = Mix()  # replay, the demo and the tests (their golden outputs): never changes
# The benchmarks' mix (issue 14): 60% text, 30% image, 8% video of 4-16 segments, 2% audio;
# duplicates 2%, out of order 5%, reports 0.5%, reviews 0.1% of versions.
BENCH_MIX = Mix(
    modalities=("text",) * 30 + ("image",) * 15 + ("video",) * 4 + ("audio",),
    video_segments=(4, 16),
    duplicate=0.02,
    out_of_order=0.05,
    report=0.005,
    review=0.001,
)


def _score(rng: random.Random) -> float:
    roll = rng.random()
    if roll < 0.85:
        return round(rng.betavariate(1.2, 14), 4)
    if roll < 0.95:
        return round(rng.uniform(0.5, 0.9), 4)
    return round(rng.uniform(0.9, 1.0), 4)


def generate(
    seed: int = 7,
    versions: int = 200,
    *,
    start_ts: int = T0,
    policy_document: dict[str, Any] | None = None,
    policy_key: bytes | None = None,
    malformed: bool = True,
    extras: bool = True,
    prefix: str = "",
    mix: Mix = DEFAULT_MIX,
) -> list[Line]:
    """Lines `{"topic", "value"}` in delivery order (ts order; late evidence after its upsert)."""
    rng = random.Random(seed)
    timed: list[tuple[int, int, Line]] = []
    sequence = 0

    def emit(topic: str, value: Any, ts: int) -> None:
        nonlocal sequence
        sequence += 1
        timed.append((ts, sequence, {"topic": topic, "value": value}))

    uploads: list[dict[str, Any]] = []
    for index in range(versions):
        modality = rng.choice(mix.modalities)
        ts = start_ts + index * 200 + rng.randrange(0, 150)
        content_id = f"{prefix}c{seed}-{index}"
        segments = _segments(rng, mix) if modality == "video" else 1
        upsert: dict[str, Any] = {
            "event_id": f"up-{content_id}-1",
            "type": "upsert",
            "content_id": content_id,
            "content_version": 1,
            "ts": ts,
            "author_id": f"u{rng.randrange(40)}",
            "modality": modality,
            "surface": rng.choice(["public_post", "comment", "comment", "profile", "dm"]),
            "region": rng.choice(["DE", "US", "BR", "IN"]),
            "audience": rng.choice(["all", "all", "adult", "minor"]),
            "account_risk": round(rng.random(), 3),
            "size_bytes": rng.randrange(100, 900_000),
            "mime_type": MIME[modality],
            "sha256": f"{rng.getrandbits(256):064x}",
            "segments": segments,
        }
        if modality == "text":
            upsert["text"] = f"generated text {index}"
            upsert["size_bytes"] = rng.randrange(10, 4000)
        uploads.append(upsert)
        emit("content.versions", upsert, ts)
        missing = rng.random() < 0.05
        for detector in REQUIRED[modality]:
            for segment in range(segments):
                if missing and detector == REQUIRED[modality][-1] and segment == 0:
                    continue  # never arrives: the deadline decides
                early = rng.random() < mix.out_of_order
                delay = -rng.randrange(1, 50) if early else rng.randrange(50, 8_000)
                status = "timeout" if rng.random() < 0.02 else "ok"
                event_id = f"ev-{content_id}-{detector}-{segment}"
                result: dict[str, Any] = {
                    "event_id": event_id,
                    "content_id": content_id,
                    "content_version": 1,
                    "detector": detector,
                    "model_version": f"{detector}-1",
                    "status": status,
                    "ts": ts + delay,
                    "segment_id": segment if segments > 1 else None,
                    "scores": {LABELS[detector]: _score(rng)} if status == "ok" else None,
                    "evidence_ref": f"evidence://{content_id}/{detector}/{segment}",
                }
                # Early evidence is delivered right after its upsert, carrying its earlier ts.
                emit("detector.results", result, ts if early else ts + delay)
                if rng.random() < mix.duplicate:
                    emit(
                        "detector.results",
                        dict(result, event_id=event_id + "-dup"),
                        ts + max(delay, 0) + 10,
                    )
        _human(rng, mix, upsert, emit)

    if extras and uploads:
        _extras(rng, uploads, emit, start_ts + versions * 200, policy_document, policy_key, prefix)
    if malformed:
        end = start_ts + versions * 200 + 5_000
        emit("content.versions", {"event_id": f"{prefix}bad-1", "type": "upsert"}, end)
        emit(
            "content.versions",
            dict(uploads[0], event_id=f"{prefix}bad-2", modality="hologram"),
            end,
        )
        emit("detector.results", dict(uploads[0], event_id=f"{prefix}bad-3"), end)
        emit("moderation.reports", f"not json at all {prefix}", end)
    return [line for _, _, line in sorted(timed, key=lambda item: (item[0], item[1]))]


def _segments(rng: random.Random, mix: Mix) -> int:
    low, high = mix.video_segments
    return low if low == high else rng.randint(low, high)


def _human(rng: random.Random, mix: Mix, upsert: dict[str, Any], emit: Any) -> None:
    """The mix's report and review decision for one version, each by its chance (none drawn
    when the chance is 0, so the default mix's sequence is unchanged)."""
    content_id, ts = upsert["content_id"], upsert["ts"]
    if mix.report and rng.random() < mix.report:
        at = ts + rng.randrange(1_000, 60_000)
        report = {
            "event_id": f"rep-{content_id}", "report_id": f"rep-{content_id}",
            "content_id": content_id, "content_version": 1,
            "reporter_id": f"r{rng.randrange(1000)}", "reason": "spam", "ts": at,
        }  # fmt: skip
        emit("moderation.reports", report, at)
    if mix.review and rng.random() < mix.review:
        at = ts + rng.randrange(10_000, 120_000)
        review = {
            "event_id": f"rv-{content_id}", "task_id": "external", "content_id": content_id,
            "content_version": 1, "reviewer_id": f"mod-{rng.randrange(20)}",
            "outcome": rng.choice(["ALLOW", "BLOCK"]), "reason": "reviewed", "ts": at,
        }  # fmt: skip
        emit("review.decisions", review, at)


def _extras(
    rng: random.Random,
    uploads: list[dict[str, Any]],
    emit: Any,
    ts: int,
    policy_document: dict[str, Any] | None,
    policy_key: bytes | None,
    prefix: str = "",
) -> None:
    # A known-bad hash, then an upload that matches it.
    banked = f"{rng.getrandbits(256):064x}"
    emit(
        "hash.bank",
        {
            "event_id": f"{prefix}hb-1",
            "bank": "known_bad",
            "hash_type": "sha256",
            "hash": banked,
            "op": "add",
            "ts": ts,
        },
        ts,
    )
    emit(
        "content.versions",
        dict(
            uploads[1],
            event_id="up-banked",
            content_id=f"{prefix}banked-1",
            sha256=banked,
            ts=ts + 100,
        ),
        ts + 100,
    )

    def report(reporter: str, content: dict[str, Any], at: int, tag: str) -> None:
        emit(
            "moderation.reports",
            {
                "event_id": f"{prefix}rep-{tag}",
                "report_id": f"{prefix}rep-{tag}",
                "content_id": content["content_id"],
                "content_version": 1,
                "reporter_id": f"{prefix}{reporter}",
                "reason": "spam",
                "ts": at,
            },
            at,
        )

    # Established reporters: their first reports came two days earlier.
    for index, reporter in enumerate(["r1", "r2", "r3", "r4", "flooder"]):
        report(reporter, uploads[7], ts - 2 * 86_400_000 + index, f"early-{reporter}")
    # Three established reporters (one reports twice): a review task in queue `reports`.
    for index, reporter in enumerate(["r1", "r2", "r2", "r3"]):
        report(reporter, uploads[2], ts + 200 + index, f"target-{index}")
    # A burst of brand-new reporters on another item: flagged as possible brigading.
    for index in range(4):
        report(f"new{index}", uploads[8], ts + 250 + index, f"burst-{index}")
    # A flooder beyond the hourly limit (10): its later reports are not counted, so the item
    # below stays one report short of the threshold.
    for index in range(12):
        report(
            "flooder",
            uploads[10 + index % max(1, len(uploads) - 10)],
            ts + 260 + index,
            f"flood-{index}",
        )
    report("r4", uploads[9], ts + 280, "short-1")
    report("r3", uploads[9], ts + 281, "short-2")
    report("flooder", uploads[9], ts + 282, "short-3")
    # A review, then an appeal and the review that closes it.
    reviewed = uploads[3]
    emit(
        "review.decisions",
        {
            "event_id": "rv-1",
            "task_id": "external",
            "content_id": reviewed["content_id"],
            "content_version": 1,
            "reviewer_id": "mod-1",
            "outcome": "BLOCK",
            "reason": "sexual_content",
            "ts": ts + 300,
        },
        ts + 300,
    )
    emit(
        "moderation.appeals",
        {
            "event_id": "ap-1",
            "appeal_id": "a1",
            "content_id": reviewed["content_id"],
            "content_version": 1,
            "decision_revision": 1,
            "user_id": reviewed["author_id"],
            "ts": ts + 400,
        },
        ts + 400,
    )
    emit(
        "moderation.appeals",
        {
            "event_id": "ap-2",
            "appeal_id": "a2",
            "content_id": reviewed["content_id"],
            "content_version": 1,
            "decision_revision": 1,
            "user_id": reviewed["author_id"],
            "ts": ts + 450,
        },
        ts + 450,
    )
    emit(
        "review.decisions",
        {
            "event_id": "rv-2",
            "task_id": "appeal-a1",
            "content_id": reviewed["content_id"],
            "content_version": 1,
            "reviewer_id": "mod-2",
            "outcome": "ALLOW",
            "reason": "appeal_granted",
            "ts": ts + 500,
        },
        ts + 500,
    )
    # An edit (version 2) and a delete.
    edited = uploads[4]
    emit(
        "content.versions",
        dict(edited, event_id="up-edit", content_version=2, ts=ts + 600),
        ts + 600,
    )
    deleted = uploads[5]
    emit(
        "content.versions",
        {
            "event_id": "del-1",
            "type": "delete",
            "content_id": deleted["content_id"],
            "content_version": 1,
            "ts": ts + 700,
        },
        ts + 700,
    )
    emit(
        "moderation.reevaluate",
        {
            "event_id": "re-1",
            "content_id": uploads[6]["content_id"],
            "content_version": 1,
            "reason": "policy v2",
            "ts": ts + 800,
        },
        ts + 800,
    )
    if policy_document is not None and policy_key is not None:
        document = dict(
            policy_document,
            version=int(policy_document["version"]) + 1,
            default="PROVISIONAL_ALLOW",
        )
        record = {
            "event_id": f"{prefix}pol-next",
            "policy_id": document["policy_id"],
            "version": document["version"],
            "parent_version": policy_document["version"],
            "mode": "shadow",
            "author": "workload",
            "ts": ts + 900,
            "document": document,
        }
        record["signature"] = sign(record, policy_key)
        emit("policy.rules", record, ts + 900)


def sign_lines(lines: list[Line], keyring: Keyring | None = None) -> list[Line]:
    """Each authority line signed with its producer's key (where the keyring has one); lines
    that already carry `signature`, other topics and non-object values unchanged."""
    keyring = Keyring.from_env() if keyring is None else keyring
    out: list[Line] = []
    for line in lines:
        value = line["value"]
        if (
            line["topic"] in AUTHORITY_TOPICS
            and isinstance(value, dict)
            and "signature" not in value
        ):
            line = {**line, "value": signed(line["topic"], value, keyring)}
        out.append(line)
    return out


def write(lines: list[Line], path: Any, keyring: Keyring | None = None) -> None:
    """JSON lines for `modstream replay`, authority records signed (`sign_lines`)."""
    with open(path, "w", encoding="utf-8") as out:
        for line in sign_lines(lines, keyring):
            if isinstance(line["value"], str):
                out.write(json.dumps({"topic": line["topic"], "value": line["value"]}) + "\n")
            else:
                out.write(json.dumps(line, ensure_ascii=False) + "\n")


def marker(ts: int, content_id: str | None = None) -> Line:
    """A tiny text upload at `ts`: once decided, every input before it in event time was."""
    content_id = content_id or f"marker-{ts}"
    return {
        "topic": "content.versions",
        "value": {
            "event_id": content_id,
            "type": "upsert",
            "content_id": content_id,
            "content_version": 1,
            "ts": ts,
            "author_id": "clock",
            "modality": "text",
            "surface": "dm",
            "region": "DE",
            "audience": "all",
            "account_risk": 0.0,
            "size_bytes": 1,
            "mime_type": "text/plain",
            "sha256": "0" * 64,
            "text": ".",  # scannable, so a scan job answers it like any text
        },
    }


def for_kafka(
    lines: list[Line], topics: dict[str, str] | None = None, keyring: Keyring | None = None
) -> dict[str, list[tuple[str | None, bytes]]]:
    """Physical topic -> (contract key, value bytes), in line order; authority records signed
    (`sign_lines`)."""
    from modstream.kafkaio import contract_key

    grouped: dict[str, list[tuple[str | None, bytes]]] = {}
    for line in sign_lines(lines, keyring):
        value = line["value"]
        text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
        physical = str((topics or {}).get(line["topic"], line["topic"]))
        grouped.setdefault(physical, []).append(
            (contract_key(line["topic"], value), text.encode("utf-8"))
        )
    return grouped


def produce(
    bootstrap_servers: str,
    lines: list[Line],
    topics: dict[str, str] | None = None,
    keyring: Keyring | None = None,
) -> None:
    from modstream.kafkaio import produce as produce_records

    for topic, records in for_kafka(lines, topics, keyring).items():
        produce_records(bootstrap_servers, topic, records)
