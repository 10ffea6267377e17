"""`modstream dlq list|replay`: look at the dead-letter queue and send fixed items back.

A replayed record goes back to its source topic only after a re-check of current state: the
raw record must now pass its contract schema, and the content it names must not have moved on
since (a newer version, or the current version blocked or deleted). Otherwise it is not
replayed and a `stale` DLQ record says why, so an old item can never publish content that was
blocked or deleted since. Each DLQ record is replayed at most once (its digest is remembered in
Redis, `dlq:replayed`).

Replay writes only to the contract's input topics (of this deployment's prefix): a DLQ record
whose `source_topic` is anything else (an output such as moderation.actions, another
deployment's topic) is refused and named, never produced. A record whose signature does not
pass the deployment's keyring is not replayed either: the job would refuse it again.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from modstream import kafkaio, topics
from modstream.progress import Progress
from operators import signing
from operators.signing import Keyring
from schemas import INPUT_TOPICS, SchemaError, dead_letter, parse
from schemas.dlq import is_redacted

REPLAYED_KEY = "dlq:replayed"


@dataclass(frozen=True)
class Verdict:
    replay: bool
    reason: str


def digest(letter: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(letter, sort_keys=True).encode("utf-8")).hexdigest()


def input_topic(source_topic: object, prefix: str = "") -> str | None:
    """The contract input topic a DLQ record may be replayed to, or None: only the
    deployment's own physical name of an input topic (`<prefix>.<topic>`, or `<topic>`)."""
    if not isinstance(source_topic, str):
        return None
    topic = topics.contract(source_topic, prefix)
    if topic not in INPUT_TOPICS:
        return None
    return topic if source_topic == topics.physical(topic, prefix) else None


def recheck(
    letter: dict[str, Any],
    content_state: Callable[[str], dict[str, str]],
    prefix: str = "",
    keyring: Keyring | None = None,
) -> Verdict:
    """Whether the DLQ record may go back to its source topic now. With a `keyring`, an
    authority record must also pass its signature check (operators/signing.py)."""
    topic = input_topic(letter.get("source_topic"), prefix)
    if topic is None:
        return Verdict(False, "not_an_input_topic")
    raw = letter.get("raw") or ""
    if is_redacted(raw):
        # Content fields were kept only as their SHA-256 (schemas/dlq.py): replaying it would
        # send the digests as content. The producer must send the record again.
        return Verdict(False, "redacted")
    try:
        record: Any = parse(topic, raw)
    except SchemaError:
        return Verdict(False, "still_invalid")
    if keyring is not None and topic in signing.AUTHORITY_TOPICS:
        problem = signing.check(topic, json.loads(raw), keyring)
        if problem is not None:
            return Verdict(False, "bad_signature")
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
    """The DLQ records of `topic` (of `error_class` when given); a malformed one is skipped
    with a warning (kafkaio.read_values), never the end of the listing."""
    letters = kafkaio.read_values(bootstrap_servers, topic, schema="moderation.dlq")
    return [letter for letter in letters if error_class in (None, letter.get("error_class"))]


def replay(
    bootstrap_servers: str,
    dlq_topic: str,
    client: Any,
    *,
    error_class: str | None = None,
    prefix: str = "",
    namespace: str = "content",
    keyring: Keyring | None = None,
    say: Callable[[str], None] = lambda _: None,
) -> dict[str, int]:
    """Re-check and replay; returns counts per outcome. `keyring` defaults to the
    deployment's (`Keyring.from_env()`); `say` hears each refusal of a non-input topic."""
    keyring = Keyring.from_env() if keyring is None else keyring
    counts: dict[str, int] = {}

    def state(content_id: str) -> dict[str, str]:
        raw = client.hgetall(f"{namespace}:{content_id}")
        return {k.decode(): v.decode() for k, v in raw.items()}

    stale: list[tuple[str | None, bytes | None]] = []
    with Progress("dlq replay") as shown:  # on stderr (modstream/progress.py)
        with shown.waiting(f"reading {dlq_topic}"):
            letters = list_letters(bootstrap_servers, dlq_topic, error_class)
        shown.phase("re-checking", total=len(letters), unit="records")
        for letter in shown.track(letters):
            if letter.get("error_class") == "stale":
                continue  # our own verdicts are never replayed
            key = digest(letter)
            if client.sismember(REPLAYED_KEY, key):
                counts["already_replayed"] = counts.get("already_replayed", 0) + 1
                continue
            verdict = recheck(letter, state, prefix, keyring)
            counts[verdict.reason] = counts.get(verdict.reason, 0) + 1
            if verdict.reason == "not_an_input_topic":
                say(_refusal(letter, prefix))
                continue
            if verdict.replay:
                kafkaio.produce(
                    bootstrap_servers,
                    letter["source_topic"],
                    [(letter.get("key"), (letter.get("raw") or "").encode("utf-8"))],
                )
            elif verdict.reason not in ("still_invalid", "bad_signature"):
                stale.append(_stale_note(letter, verdict.reason))
            if verdict.reason not in ("still_invalid", "bad_signature"):
                client.sadd(REPLAYED_KEY, key)
    if stale:
        kafkaio.produce(bootstrap_servers, dlq_topic, stale)
    return counts


def _refusal(letter: dict[str, Any], prefix: str) -> str:
    """What `say` hears when a letter's source topic is not one replay may write to."""
    return (
        f"dlq replay: refused a record from {str(letter.get('source_topic'))[:300]!r}: "
        f"replay writes only to the contract's input topics"
        + (f" of prefix {prefix!r}" if prefix else "")
        + f" ({', '.join(INPUT_TOPICS)})"
    )


def _stale_note(letter: dict[str, Any], reason: str) -> tuple[str | None, bytes]:
    """A `stale` dead letter saying why `letter` was not replayed (never replayed itself)."""
    note = dead_letter(
        letter["source_topic"],
        letter.get("key"),
        letter.get("raw"),
        f"dlq replay: not replayed ({reason})",
        ts=int(letter.get("ts") or 0),
        error_class="stale",
        attempts=int(letter.get("attempts") or 1) + 1,
        operator="dlq-replay",
    )
    return letter.get("key"), note.model_dump_json().encode("utf-8")
