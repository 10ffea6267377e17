"""`modstream dlq list|replay`: look at the dead-letter queue and send fixed items back.

A replayed record goes back to its source topic only after a re-check of current state: the
raw record must now pass its contract schema, and the content it names must not have moved on
since (a newer version, or the current version blocked or deleted). Otherwise it is not
replayed and a `stale` DLQ record says why, so an old item can never publish content that was
blocked or deleted since. Each DLQ record is replayed at most once (its digest is remembered in
Redis, `dlq:replayed`).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from modstream import kafkaio
from schemas import SchemaError, dead_letter, parse

REPLAYED_KEY = "dlq:replayed"


@dataclass(frozen=True)
class Verdict:
    replay: bool
    reason: str


def digest(letter: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(letter, sort_keys=True).encode("utf-8")).hexdigest()


def contract_topic(physical: str, prefix: str = "") -> str:
    return physical[len(prefix) + 1 :] if prefix and physical.startswith(prefix + ".") else physical


def recheck(
    letter: dict[str, Any], content_state: Callable[[str], dict[str, str]], prefix: str = ""
) -> Verdict:
    """Whether the DLQ record may go back to its source topic now."""
    topic = contract_topic(letter["source_topic"], prefix)
    try:
        record: Any = parse(topic, letter.get("raw") or "")
    except SchemaError:
        return Verdict(False, "still_invalid")
    content_id = getattr(record, "content_id", None)
    version = getattr(record, "content_version", None)
    if content_id is None or version is None:
        return Verdict(True, "no_content_state")
    state = content_state(content_id)
    current = int(state.get("version") or 0)
    if current > version:
        return Verdict(False, "superseded_version")
    if state.get("deleted") or state.get("visibility") == "hidden":
        return Verdict(False, "blocked_or_deleted")
    return Verdict(True, "current")


def list_letters(
    bootstrap_servers: str, topic: str, error_class: str | None = None
) -> list[dict[str, Any]]:
    letters = [
        json.loads(record.value)
        for record in kafkaio.read_to_end(bootstrap_servers, topic, committed=True)
    ]
    return [letter for letter in letters if error_class in (None, letter.get("error_class"))]


def replay(
    bootstrap_servers: str,
    dlq_topic: str,
    client: Any,
    *,
    error_class: str | None = None,
    prefix: str = "",
    namespace: str = "content",
) -> dict[str, int]:
    """Re-check and replay; returns counts per outcome."""
    counts: dict[str, int] = {}

    def state(content_id: str) -> dict[str, str]:
        raw = client.hgetall(f"{namespace}:{content_id}")
        return {k.decode(): v.decode() for k, v in raw.items()}

    stale: list[tuple[str | None, bytes | None]] = []
    for letter in list_letters(bootstrap_servers, dlq_topic, error_class):
        if letter.get("error_class") == "stale":
            continue  # our own verdicts are never replayed
        key = digest(letter)
        if client.sismember(REPLAYED_KEY, key):
            counts["already_replayed"] = counts.get("already_replayed", 0) + 1
            continue
        verdict = recheck(letter, state, prefix)
        counts[verdict.reason] = counts.get(verdict.reason, 0) + 1
        if verdict.replay:
            kafkaio.produce(
                bootstrap_servers,
                letter["source_topic"],
                [(letter.get("key"), (letter.get("raw") or "").encode("utf-8"))],
            )
        elif verdict.reason != "still_invalid":
            note = dead_letter(
                letter["source_topic"],
                letter.get("key"),
                letter.get("raw"),
                f"dlq replay: not replayed ({verdict.reason})",
                ts=int(letter.get("ts") or 0),
                error_class="stale",
                attempts=int(letter.get("attempts") or 1) + 1,
                operator="dlq-replay",
            )
            stale.append((letter.get("key"), note.model_dump_json().encode("utf-8")))
        if verdict.reason != "still_invalid":
            client.sadd(REPLAYED_KEY, key)
    if stale:
        kafkaio.produce(bootstrap_servers, dlq_topic, stale)
    return counts
