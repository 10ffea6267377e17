"""Human input on a content version (reviews, appeals): replay protection for as long as the
version's record is kept, and the newest human decision winning whatever the arrival order
(issue 27 point 4; docs/moderation.md, "Human input: replays and order").

Signatures carry no expiry or audience, and old signed reviews sit in `review.decisions`, the
DLQ's `raw` and the archive. The full state's `events` makes a re-sent record a duplicate, but a
retired record (`timers.retire`) keeps no event ids: so every human input applied to a version
is also remembered here, as a short digest in `human_ids`, which the retired record keeps.
Beside it `human["ts"]`, the newest applied review's `ts`: a review stamped before it changes
nothing, so even an input whose digest left the bounded list cannot steer the version.
"""

from __future__ import annotations

from typing import Any

from operators.scan_plan import sha256_hex
from operators.version_state import HUMAN_IDS_KEPT, HUMAN_TOPICS, State

# 16 hex digits (64 bits) of sha256: among at most HUMAN_IDS_KEPT ids per version an accidental
# collision is about 2^-53 likely, and making one on purpose is a second preimage.
DIGEST_CHARS = 16


def human_id(event_id: str) -> str:
    """The digest a version keeps of one human input's event id."""
    return sha256_hex(event_id)[:DIGEST_CHARS]


def replayed(state: State, topic: str, record: Any) -> bool:
    """Whether this review or appeal was applied to the version already: a duplicate, which
    changes nothing and emits nothing, as a duplicate in the full state's `events` does."""
    return topic in HUMAN_TOPICS and human_id(record.event_id) in state.get("human_ids", ())


def remember(state: State, topic: str, record: Any) -> None:
    """Keep the digest of a human input just applied; past `HUMAN_IDS_KEPT` the oldest go (an
    older review re-sent then is refused by `superseded`, still changing nothing)."""
    if topic not in HUMAN_TOPICS:
        return
    kept = state.setdefault("human_ids", [])
    kept.append(human_id(record.event_id))
    del kept[:-HUMAN_IDS_KEPT]


def superseded(state: State, ts: int) -> int | None:
    """The `ts` of the human decision in force when a review stamped `ts` is older than it (the
    review changes nothing), else None. At equal `ts` the review applies (see the docs)."""
    human = state.get("human")
    in_force = human.get("ts") if human else None
    if in_force is not None and ts < in_force:
        return int(in_force)
    return None


def superseded_message(record: Any, in_force: int) -> str:
    """The DLQ message of a review older than the human decision in force (`stale`)."""
    return (
        f"moderation: review.decisions.ts: review for task {record.task_id} of content version "
        f"{record.content_version} is stamped before the human decision in force (ts "
        f"{in_force}): the newest human decision wins, so it changes nothing"
    )
