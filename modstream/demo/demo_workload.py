"""The records one `modstream demo` run sends (modstream/demo/run.py runs them).

The generated workload (modstream/demo/workload.py) under the run's id, with a signed shadow policy
version first, a hash-bank addition that re-decides an upload the demo allowed, and end
markers past the last deadline. With `--detectors real`, every upload carries a real text or
file (images, video and audio: modstream/demo/media.py) and its generated evidence is dropped:
the scan job answers them, under the policy that reads every modality
(modstream/demo/run.py: `READ_ALL_POLICY`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import time
from pathlib import Path
from typing import Any

import yaml

from modstream.demo import media as demo_media
from modstream.demo import workload
from modstream.demo.workload import Line, generate
from modstream.trust.keyring import Keyring
from modstream.trust.two_person import authorship_record

# Texts for `--detectors real`: mostly benign, some abusive, so the real model has work to do.
SAMPLE_TEXTS = (
    "Lovely weather for a walk in the park today",
    "Our team won the match, what a game!",
    "Does anyone have a good recipe for bread?",
    "The meeting moved to Thursday at ten",
    "you are a stupid idiot and everyone hates you",
    "Thanks for the help yesterday, much appreciated",
    "shut up you worthless piece of garbage",
    "New photos from the trip are up",
)  # a backlog of thousands of actions takes seconds to enforce on 2 cores


@dataclasses.dataclass(frozen=True)
class DemoWorkload:
    """What a run sends and what its summary needs to know about it."""

    lines: list[Line]  # in sending order; the end markers are in it unless `real`
    policy: dict[str, Any]  # the active policy document the jobs start with
    scanned: set[str]  # content ids the scan job answers (`--detectors real`)
    retro_bank: Line | None  # the bank addition that re-decides an allowed upload
    marker: str  # the first end marker's content id; decided last
    markers: list[Line]  # the end markers
    live: bool  # sent at the pace of its event time (`--detectors real`), not as a backlog


def prepare(
    run_id: str,
    count: int,
    seed: int,
    *,
    key: str,
    keyring: Keyring,
    policy_path: Path,
    media_dir: Path,
    real: bool,
) -> DemoWorkload:
    """The run's records, event time ending ten minutes ago (or starting now, with `real`)."""
    policy = yaml.safe_load(policy_path.read_text())
    now = int(time.time() * 1000)
    start_ts = now - count * 200 - 600_000
    lines = generate(seed=seed, versions=count, start_ts=start_ts, prefix=run_id)
    shadow = shadow_record(policy, key, start_ts - 1_000, run_id, keyring)
    scanned: set[str] = set()
    if real:
        lines, scanned = real_content(lines, media_dir, now + 5_000)
    lines.insert(0, {"topic": "policy.rules", "value": shadow})
    retro_bank = bank_addition_after_allow(lines, run_id)
    if retro_bank is not None:
        lines.append(retro_bank)
    marker = f"{run_id}end"
    markers = end_markers(lines, policy, marker)
    if not real:
        lines += markers
    return DemoWorkload(lines, policy, scanned, retro_bank, marker, markers, live=real)


def shadow_record(
    policy: dict[str, Any], key: str, ts: int, run_id: str, keyring: Keyring
) -> dict[str, Any]:
    """A signed shadow candidate from the start: every decision is also made under it, signed
    by its author `demo` with the author key of the demo's keyring
    (modstream/trust/two_person.py)."""
    from modstream.ops.policy_service import version_record

    shadow_base = dict(policy, version=policy["version"])  # the run's policy.rules is new
    candidate = dict(shadow_base, version=shadow_base["version"] + 1, default="PENDING")
    author_key = keyring.key_for("demo", "author")
    assert author_key is not None, "the demo's keyring derives its keys from a dev secret"
    return version_record(
        candidate,
        mode="shadow",
        author="demo",
        ts=ts,
        parent_version=policy["version"],
        key=key.encode(),
        event_id=f"{run_id}shadow",
        extra={"authorship": authorship_record(candidate, "demo", author_key, ts)},
    )


def end_markers(lines: list[Line], policy: dict[str, Any], marker: str) -> list[Line]:
    """Two tiny uploads after every other record's deadline: once `marker` is decided, every
    deadline has fired."""
    last_ts = max(line["value"].get("ts", 0) for line in lines if isinstance(line["value"], dict))
    # Just past the last deadline: once the end marker is decided, every deadline has fired.
    # Never further: event time does not run ahead of the clock (docs/moderation.md, "Time"),
    # and with real detectors the records are live, so the clock brings event time there.
    after_deadlines = last_ts + max(
        int(spec.get("deadline_ms", 0)) for spec in policy.get("detectors", {}).values()
    )
    # The second marker, further than the job's out-of-orderness bound, moves event time past
    # the first where time follows the data alone (a backlog: the generated workload).
    return [
        workload.marker(after_deadlines + 1_000, marker),
        workload.marker(after_deadlines + 11_000, f"{marker}2"),
    ]


def real_content(lines: list[Line], media_dir: Path, now: int) -> tuple[list[Line], set[str]]:
    """For `--detectors real`: text uploads get real texts, image, video and audio uploads real
    files (modstream/demo/media.py: a few with words the readers must find), their generated
    evidence is dropped (the scan job answers), and event time starts now, so that detector
    results (stamped with the time they were made) meet their deadlines."""
    uploads = media_dir / "uploads"
    uploads.mkdir(parents=True, exist_ok=True)
    start = min(
        line["value"]["ts"]
        for line in lines
        if line["topic"] == "content.versions"
        and isinstance(line["value"], dict)
        and isinstance(line["value"].get("ts"), int)
    )
    scanned: set[str] = set()
    out: list[Line] = []
    kinds = demo_media.kinds_of(upserts(lines))
    for index, line in enumerate(lines):
        value = line["value"]
        if isinstance(value, dict):
            value = dict(value)
            for field in ("ts", "expires_ts"):  # a lease keeps its length
                if isinstance(value.get(field), int):
                    value[field] = now + (value[field] - start)
            if line["topic"] == "content.versions" and value.get("type") == "upsert":
                if value.get("modality") in ("video", "audio") or value.get("content_id") in kinds:
                    _give_real_media(value, index, kinds, uploads, scanned)
                else:
                    _give_real_body(value, index, uploads, scanned)
        out.append({"topic": line["topic"], "value": value})
    kept = [
        line
        for line in out
        if not (
            line["topic"] == "detector.results"
            and isinstance(line["value"], dict)
            and line["value"].get("content_id") in scanned
        )
    ]
    return kept, scanned


def _give_real_body(value: dict[str, Any], index: int, uploads: Path, scanned: set[str]) -> None:
    """A text upload's real text, or an image upload's real file under `uploads`, with its size
    and sha256; the content id joins `scanned`. Other modalities stay as generated."""
    from modstream.demo.hashing import jpeg

    body: bytes | None = None
    if value.get("modality") == "text":
        value["text"] = SAMPLE_TEXTS[index % len(SAMPLE_TEXTS)]
        body = value["text"].encode("utf-8")
    elif value.get("modality") == "image":
        body = jpeg(index)
        path = uploads / f"{value['content_id']}.v{value['content_version']}.jpg"
        path.write_bytes(body)
        value["media_ref"] = path.as_uri()
    if body is not None:
        value["size_bytes"] = len(body)
        value["sha256"] = hashlib.sha256(body).hexdigest()
        scanned.add(value["content_id"])


def upserts(lines: list[Line]) -> list[dict[str, Any]]:
    """The workload's upsert records, in order."""
    return [
        line["value"]
        for line in lines
        if line["topic"] == "content.versions"
        and isinstance(line["value"], dict)
        and line["value"].get("type") == "upsert"
    ]


def _give_real_media(
    value: dict[str, Any],
    index: int,
    kinds: dict[str, demo_media.MediaKind],
    uploads: Path,
    scanned: set[str],
) -> None:
    """A video or audio upload's real file (its kind's, else clean filler: demo_media.body),
    with its MIME type, size and sha256; the content id joins `scanned`."""
    modality = value.get("modality")
    kind = kinds.get(value["content_id"])
    segments = int(value.get("segments") or 1)
    data, mime_type = demo_media.body(kind, str(modality), index, segments)
    extension = mime_type.split("/")[1]
    path = uploads / f"{value['content_id']}.v{value['content_version']}.{extension}"
    path.write_bytes(data)
    value.update(
        media_ref=path.as_uri(),
        mime_type=mime_type,
        size_bytes=len(data),
        sha256=hashlib.sha256(data).hexdigest(),
    )
    scanned.add(value["content_id"])


def bank_addition_after_allow(lines: list[Line], run_id: str) -> Line | None:
    """A `hash.bank` addition for the sha256 of an upload whose generated evidence is all low
    (so the demo allows it first), a second after that evidence: the job re-decides it at the
    bank's ts (`trigger: policy_change`, docs/moderation.md "Hash banks and retroaction").
    None where the workload has no generated evidence (real detectors)."""
    uploads = {
        (v["content_id"], v["content_version"]): v
        for line in lines
        if line["topic"] == "content.versions"
        and isinstance(v := line["value"], dict)
        and v.get("type") == "upsert"
        and v.get("sha256")
        and not str(v.get("content_id", "")).endswith("banked-1")
    }
    highest: dict[tuple[str, int], tuple[float, int]] = {}
    for line in lines:
        value = line["value"]
        if line["topic"] != "detector.results" or not isinstance(value, dict):
            continue
        version = (value.get("content_id"), value.get("content_version"))
        scores = value.get("scores") or {}
        score = max(scores.values(), default=1.0) if value.get("status") == "ok" else 1.0
        seen = highest.get(version, (0.0, 0))  # type: ignore[arg-type]
        highest[version] = (max(seen[0], score), max(seen[1], int(value.get("ts", 0))))  # type: ignore[index]
    calm = sorted((score, ts, key) for key, (score, ts) in highest.items() if key in uploads)
    if not calm:
        return None
    _, evidence_ts, version = calm[0]
    return {
        "topic": "hash.bank",
        "value": {
            "event_id": f"{run_id}hb-retro",
            "bank": "known_bad",
            "hash_type": "sha256",
            "hash": uploads[version]["sha256"],
            "op": "add",
            "ts": evidence_ts + 1_000,
        },
    }
