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

Attempt history. A replayed input that fails again gets a new DLQ record from the job that
refused it, and that job cannot know the input was replayed (a job reads only the record).
So replay remembers, in the Redis hash `dlq:history`, per input (`identity`: the sha256 of its
source topic, key and raw, exactly what a job's new record for the same input repeats), the
records it sent back, oldest first. `list_letters` and `replay` give each record read the
history of the records of its input replayed before it (`with_history`): an exact match on
the input, never a guess by content id or time. A `stale` note replay writes itself carries it
in the record (`history`, `attempts`).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from modstream.contract import INPUT_TOPICS, SchemaError, dead_letter, parse, records
from modstream.contract.dlq import HISTORY_LIMIT, DlqRecord, is_redacted, with_attempt
from modstream.core import kafkaio, topics
from modstream.core.progress import Progress
from modstream.trust import signing
from modstream.trust.signing import Keyring

REPLAYED_KEY = "dlq:replayed"
HISTORY_KEY = "dlq:history"


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
    authority record must also pass its signature check (modstream/trust/signing.py)."""
    topic = input_topic(letter.get("source_topic"), prefix)
    if topic is None:
        return Verdict(False, "not_an_input_topic")
    raw = letter.get("raw") or ""
    if is_redacted(raw):
        # Content fields were kept only as their SHA-256 (modstream/contract/dlq.py): replaying it
        # would send the digests as content. The producer must send the record again.
        return Verdict(False, "redacted")
    try:
        record: Any = parse(topic, raw)
    except SchemaError:
        return Verdict(False, "still_invalid")
    if keyring is not None and topic in signing.AUTHORITY_TOPICS:
        problem = signing.check(topic, json.loads(raw), keyring, raw)
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


def identity(letter: dict[str, Any]) -> str:
    """The input a DLQ record is about: what a job's record for the same input repeats."""
    fields = [letter.get("source_topic"), letter.get("key"), letter.get("raw")]
    return hashlib.sha256(json.dumps(fields).encode("utf-8")).hexdigest()


def _replayed_before(client: Any, letter: dict[str, Any]) -> list[dict[str, Any]]:
    """The entries `dlq:history` keeps for the letter's input: {digest, attempt} a replay."""
    kept = client.hget(HISTORY_KEY, identity(letter)) if client is not None else None
    return list(json.loads(kept)) if kept else []


def with_history(letter: dict[str, Any], client: Any) -> dict[str, Any]:
    """`letter` with the attempts replayed before it prepended to its own `history`, and
    `attempts` counting them; the entries up to its own when it was itself replayed."""
    entries = _replayed_before(client, letter)
    own = digest(letter)
    digests = [entry["digest"] for entry in entries]
    earlier = entries[: digests.index(own)] if own in digests else entries
    if not earlier:
        return letter
    history = [entry["attempt"] for entry in earlier] + list(letter.get("history") or [])
    return {
        **letter,
        "history": history[-HISTORY_LIMIT:],
        "attempts": int(letter.get("attempts") or 1) + len(earlier),
    }


def _remember_replayed(client: Any, letter: dict[str, Any]) -> None:
    """Add `letter` to its input's entries in `dlq:history` (the newest HISTORY_LIMIT kept)."""
    entries = _replayed_before(client, letter)
    record = DlqRecord.model_validate(letter)
    entry = {"digest": digest(letter), "attempt": record.attempt().model_dump()}
    client.hset(HISTORY_KEY, identity(letter), json.dumps([*entries, entry][-HISTORY_LIMIT:]))


def list_letters(
    bootstrap_servers: str, topic: str, error_class: str | None = None, client: Any = None
) -> list[dict[str, Any]]:
    """The DLQ records of `topic` (of `error_class` when given), each with its input's
    attempt history when `client` (Redis) is given; a malformed one is skipped with a warning
    (modstream/contract/records.py `read_values`), never the end of the listing."""
    letters = records.read_values(bootstrap_servers, topic, schema="moderation.dlq")
    return [
        with_history(letter, client)
        for letter in letters
        if error_class in (None, letter.get("error_class"))
    ]


def by_owner(letters: list[dict[str, Any]]) -> dict[str, dict[str, int]]:
    """Per owner (a record written before owners: derived from its class and topic), its
    records' count per error class; owners and classes sorted."""
    counts: dict[str, dict[str, int]] = {}
    for letter in letters:
        per_class = counts.setdefault(owner(letter), {})
        error_class = str(letter.get("error_class"))
        per_class[error_class] = per_class.get(error_class, 0) + 1
    return {name: dict(sorted(counts[name].items())) for name in sorted(counts)}


def owner(letter: dict[str, Any]) -> str:
    """A record's owner (derived from its class and topic when written before owners)."""
    try:
        return DlqRecord.model_validate(letter).owner
    except ValueError:
        return str(letter.get("owner") or "unknown")


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
    with Progress("dlq replay") as shown:  # on stderr (modstream/core/progress.py)
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
                _remember_replayed(client, letter)
            elif verdict.reason not in ("still_invalid", "bad_signature"):
                stale.append(_stale_note(with_history(letter, client), verdict.reason))
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
    """A `stale` dead letter saying why `letter` was not replayed (never replayed itself): the
    same input, owner and history, and `letter` as its newest earlier attempt."""
    earlier = DlqRecord.model_validate(letter)
    note = dead_letter(
        earlier.source_topic,
        earlier.key,
        earlier.raw,
        f"dlq replay: not replayed ({reason})",
        ts=earlier.ts,
        error_class="stale",
        attempts=earlier.attempts + 1,
        operator="dlq-replay",
        history=with_attempt(earlier.history, earlier.attempt()),
        owner=earlier.owner,
    )
    return earlier.key, note.model_dump_json().encode("utf-8")
