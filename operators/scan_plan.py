"""Scan planning: which detector requests a content version needs, and when (docs/scanning.md).

Pure functions over the moderation step's state (operators/moderation.py), which calls them
after it has decided; their outputs are `scan.requests.<modality>` records.
"""

from __future__ import annotations

import hashlib
from typing import Any

from operators.policy import CompiledPolicy

Output = tuple[str, str, dict[str, Any]]  # (contract topic, Kafka key, record)
State = dict[str, Any]


def sha256_hex(*parts: object) -> str:
    return hashlib.sha256("|".join(str(part) for part in parts).encode("utf-8")).hexdigest()


def segment(state: State, segment_id: int | None) -> int | None:
    segments = (state["content"] or {}).get("segments", 1)
    if segments == 1 and segment_id in (None, 0):
        return 0
    return segment_id


def required(policy: CompiledPolicy | None, content: dict[str, Any]) -> list[str]:
    return list(policy.required_detectors(content["modality"])) if policy else []


def on_upsert(state: State, record: Any, policy: CompiledPolicy | None, ts: int) -> list[Output]:
    """One request per required (detector, segment) not already answered, on the modality's
    scan topic (docs/scanning.md); the text travels inline, media by reference."""
    detectors = required(policy, state["content"])
    deadline = policy.deadline_ms(record.modality) if policy else None
    segments = record.segments
    received = {
        (e["detector"], segment(state, e["segment_id"])) for e in state["evidence"].values()
    }
    outputs: list[Output] = []
    for detector in detectors:
        for index in range(segments):
            segment_id = None if segments == 1 else index
            if (detector, index) in received or (detector, None) in received:
                continue
            request: dict[str, Any] = {
                "request_id": sha256_hex("scan", state["cid"], state["ver"], detector, index)[:32],
                "content_id": state["cid"],
                "content_version": state["ver"],
                "detector": detector,
                "segment_id": segment_id,
                "segments": segments,
                "modality": record.modality,
                "mime_type": record.mime_type,
                "priority": "live",
                "attempt": 1,
                "deadline_ts": ts + deadline if deadline else None,
                "ts": ts,
            }
            if record.text is not None and record.modality == "text":
                request["text"] = record.text
            if record.media_ref is not None:
                request["media_ref"] = record.media_ref
                request["size_bytes"] = record.size_bytes  # the scan job reads no more
            outputs.append((f"scan.requests.{record.modality}", state["cid"], request))
    return outputs
