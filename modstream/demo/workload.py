"""A seeded, contract-shaped workload for replay, the demo and benchmarks.

Content versions of every modality (video with segments), evidence per required detector and
segment with realistic delays, duplicates, evidence that carries an earlier `ts` than its
upsert, missing and timed-out evidence (deadlines), edits, deletes, reports, a review, an
appeal, sampled reviews with their blind second reviews and an escalation, a re-evaluation, a
hash-bank entry with a matching upload, a signed policy version and malformed records (the
fixed scenario after the versions: modstream/demo/workload_extras.py).
Same seed, same records.

Authority records (detector results, reviews, appeals, bank entries) are generated unsigned and
signed where they leave: `for_kafka` / `produce` and `write` sign each with its producer's key
from the deployment's keyring (`Keyring.from_env()` unless one is given), so a stack that
requires signatures gets them and one without keys gets the records as generated. A line that
already carries `signature` is sent as it is (tests forge records that way).
"""

from __future__ import annotations

import json
import random
import zlib
from dataclasses import dataclass
from typing import Any

from modstream.demo.workload_extras import (
    ESCALATION_REVIEWER,
    FIRST_REVIEWER,
    SECOND_REVIEWER,
    Emit,
    add_extras,
)
from modstream.review.queue import grant_record
from modstream.trust.signing import AUTHORITY_TOPICS, Keyring, signed, wire_json

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


# The default mix's authors: few, so the demo's and the tests' authors collect strikes.
DEFAULT_AUTHORS = 40


@dataclass(frozen=True)
class Mix:
    """What a generated workload holds per version: the modality drawn from `modalities` (one
    entry per share), video segments between `video_segments` (inclusive), and the chance of
    a duplicated detector result, of evidence stamped before its upload (out of order), of a
    report and of a human review decision; `authors`, how many authors the uploads are spread
    over."""

    modalities: tuple[str, ...] = ("text", "text", "image", "image", "video", "audio")
    video_segments: tuple[int, int] = (3, 3)
    duplicate: float = 0.05
    out_of_order: float = 0.05
    report: float = 0.0
    review: float = 0.0
    authors: int = DEFAULT_AUTHORS


DEFAULT_MIX = Mix()  # replay, the demo and the tests (their golden outputs): never changes
# The benchmarks' mix (issue 14): 60% text, 30% image, 8% video of 4-16 segments, 2% audio;
# duplicates 2%, out of order 5%, reports 0.5%, reviews 0.1% of versions; 10,000 authors, about
# five uploads each in `modstream bench --steady`'s three hours of event time. With the default
# 40, each author had about 1,400 uploads and 200 strikes there, and the sanctions' account state
# (about 50 KB) was read and written at each of the author's decisions: a cost per event that grew
# over the run (docs/BENCHMARKS.md, "Sanctions and the bench's authors").
BENCH_MIX = Mix(
    modalities=("text",) * 30 + ("image",) * 15 + ("video",) * 4 + ("audio",),
    video_segments=(4, 16),
    duplicate=0.02,
    out_of_order=0.05,
    report=0.005,
    review=0.001,
    authors=10_000,
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

    if extras or mix.review:
        _grants(mix, emit, start_ts, extras)
    uploads: list[dict[str, Any]] = []
    for index in range(versions):
        upsert = _upsert(rng, mix, f"{prefix}c{seed}-{index}", index, start_ts)
        uploads.append(upsert)
        emit("content.versions", upsert, upsert["ts"])
        _evidence(rng, mix, upsert, emit)
        _human(rng, mix, upsert, emit)

    after = start_ts + versions * 200  # past every generated upload
    if extras and uploads:
        add_extras(rng, uploads, emit, after, policy_document, policy_key, prefix)
    if malformed:
        _malformed(uploads, emit, after + 5_000, prefix)
    return [line for _, _, line in sorted(timed, key=lambda item: (item[0], item[1]))]


def _upsert(
    rng: random.Random, mix: Mix, content_id: str, index: int, start_ts: int
) -> dict[str, Any]:
    """Version 1 of the `index`th content: its modality, ts and attributes drawn from `rng`."""
    modality = rng.choice(mix.modalities)
    ts = start_ts + index * 200 + rng.randrange(0, 150)
    segments = _segments(rng, mix) if modality == "video" else 1
    upsert: dict[str, Any] = {
        "event_id": f"up-{content_id}-1",
        "type": "upsert",
        "content_id": content_id,
        "content_version": 1,
        "ts": ts,
        "author_id": f"u{_author(rng, mix, content_id)}",
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
    return upsert


def _evidence(rng: random.Random, mix: Mix, upsert: dict[str, Any], emit: Emit) -> None:
    """A result per required detector and segment, with its delay; some duplicated, some
    stamped before the upsert, and now and then one that never arrives (the deadline decides)."""
    content_id, ts, modality = upsert["content_id"], upsert["ts"], upsert["modality"]
    segments = upsert["segments"]
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


def _malformed(uploads: list[dict[str, Any]], emit: Emit, end: int, prefix: str) -> None:
    """Records the jobs must dead-letter: a bare upsert, an unknown modality, an upsert sent as
    a detector result and a value that is not JSON."""
    emit("content.versions", {"event_id": f"{prefix}bad-1", "type": "upsert"}, end)
    emit(
        "content.versions",
        dict(uploads[0], event_id=f"{prefix}bad-2", modality="hologram"),
        end,
    )
    emit("detector.results", dict(uploads[0], event_id=f"{prefix}bad-3"), end)
    emit("moderation.reports", f"not json at all {prefix}", end)


def _author(rng: random.Random, mix: Mix, content_id: str) -> int:
    """The upload's author: drawn from `rng` as always (so the rest of the workload is the same
    whatever `mix.authors`), taken from it with the default authors, else from the content id."""
    drawn = rng.randrange(DEFAULT_AUTHORS)
    if mix.authors == DEFAULT_AUTHORS:
        return drawn
    return zlib.crc32(content_id.encode()) % mix.authors


def _segments(rng: random.Random, mix: Mix) -> int:
    low, high = mix.video_segments
    return low if low == high else rng.randint(low, high)


def _human(rng: random.Random, mix: Mix, upsert: dict[str, Any], emit: Emit) -> None:
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


# Who grants the workload's reviewers their queues (review.grants), and the proactive
# reviewers `_human` draws (mod-0 … mod-19): each granted queue `external` (a review naming no
# task the job issued); mod-2 decides the extras' appeal (modstream/review/access.py).
LEAD = "lead-1"
REVIEWERS = 20
# The extras' reviewers (modstream/demo/workload_extras.py) and their queues.
EXTRAS_GRANTS = {
    "mod-1": ["external"],
    "mod-2": ["appeals"],
    FIRST_REVIEWER: ["external"],
    SECOND_REVIEWER: ["second_review"],
    ESCALATION_REVIEWER: ["escalation"],
}


def _grants(mix: Mix, emit: Emit, ts: int, extras: bool) -> None:
    """The grants the workload's reviews need, first of all its records; a reviewer both
    drawn and named by the extras holds both's queues."""
    reviewers = {f"mod-{index}": ["external"] for index in range(REVIEWERS if mix.review else 0)}
    if extras:
        for reviewer_id, queues in EXTRAS_GRANTS.items():
            held = reviewers.get(reviewer_id, [])
            reviewers[reviewer_id] = held + [queue for queue in queues if queue not in held]
    for reviewer_id, queues in sorted(reviewers.items()):
        emit("review.grants", grant_record(reviewer_id, queues, LEAD, ts), ts)


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
    from modstream.contract.records import contract_key

    grouped: dict[str, list[tuple[str | None, bytes]]] = {}
    for line in sign_lines(lines, keyring):
        value = line["value"]
        text = value if isinstance(value, str) else _json_text(value)
        physical = str((topics or {}).get(line["topic"], line["topic"]))
        grouped.setdefault(physical, []).append(
            (contract_key(line["topic"], value), text.encode("utf-8"))
        )
    return grouped


def _json_text(value: Any) -> str:
    """A value as its producer writes it: a signed record as `wire_json` writes it (its
    signature checked over the bytes sent), anything else as JSON."""
    if isinstance(value, dict) and isinstance(value.get("signature"), str):
        try:
            return wire_json(value)
        except (TypeError, ValueError, RecursionError):  # hostile values: written as they are
            pass
    return json.dumps(value, ensure_ascii=False)


def produce(
    bootstrap_servers: str,
    lines: list[Line],
    topics: dict[str, str] | None = None,
    keyring: Keyring | None = None,
) -> None:
    from modstream.core.kafkaio import produce as produce_records

    for topic, records in for_kafka(lines, topics, keyring).items():
        produce_records(bootstrap_servers, topic, records)
