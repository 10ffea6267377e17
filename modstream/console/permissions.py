"""What a reviewer may see and do in the console, from the records the moderation job checks.

Grants come from `review.grants` (signed by a lead) and are applied exactly as the job applies
them (`modstream.review.grants.ReviewGrants`): the queues in force at a request's time are the
newest grant at or before it. A lease is the console's own (it produced the lease record), so
the server refuses what the job would refuse, before anything is produced: a queue the reviewer
is not granted, a task another reviewer holds. The job checks again (a request forged past the
server is refused there too). Pure: no I/O, no clock.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable, Mapping
from typing import Any

from modstream.contract.registry import SchemaError, parse
from modstream.contract.review import ALL_QUEUES
from modstream.review.grants import ReviewGrants
from modstream.trust.keyring import Keyring
from modstream.trust.signing import check

OUTCOMES = ("ALLOW", "RESTRICT", "BLOCK", "PENDING")
# Queues and reason codes whose evidence is blurred until the reviewer reveals it.
SENSITIVE_QUEUES = frozenset({"adult", "child_safety", "violence", "self_harm"})
SENSITIVE_REASONS = frozenset(
    {"sexual_content", "mature_content", "csam_match", "violence", "gore", "self_harm"}
)


class Refused(Exception):
    """A request the server refuses; the message says why (shown to the reviewer, logged)."""


def admit_grant(raw: bytes, keyring: Keyring, grants: ReviewGrants) -> str | None:
    """Apply one review.grants record as the job would; the refusal when it is not valid."""
    record, refusal = admit_signed("review.grants", raw, keyring)
    if record is None:
        return refusal
    grants.apply(record["reviewer_id"], record["queues"], record["ts"])
    return None


def admit_signed(
    topic: str, raw: bytes, keyring: Keyring
) -> tuple[dict[str, Any] | None, str | None]:
    """A record of an authority topic with a valid schema and signature, or why not."""
    try:
        parse(topic, raw)
    except SchemaError as error:
        return None, f"console: {topic}: {error}"
    record = json.loads(raw)
    refusal = check(topic, record, keyring, raw)
    return (None, refusal) if refusal is not None else (record, None)


def granted_queues(
    grants: ReviewGrants, reviewer_id: str, known: Iterable[str], now_ms: int
) -> list[str]:
    """The queues with tasks (`known`) the reviewer may work at `now_ms`, sorted."""
    held = grants.queues_at(reviewer_id, now_ms)
    return sorted(q for q in known if q in held or ALL_QUEUES in held)


def require_grant(grants: ReviewGrants, reviewer_id: str, queue: str, now_ms: int) -> None:
    if not grants.may(reviewer_id, queue, now_ms):
        raise Refused(f"reviewer {reviewer_id} holds no grant of queue {queue!r}")


def require_lead(leads: Collection[str], reviewer_id: str) -> None:
    """The reviewer is a lead (the accounts file's `leads`): only a lead sees the lead view."""
    if reviewer_id not in leads:
        raise Refused(f"reviewer {reviewer_id} is not a lead")


def require_lease(lease: Mapping[str, Any], reviewer_id: str, task_id: str) -> None:
    """The task is claimed by this reviewer (`lease`: the queue's record of who holds it)."""
    if lease.get("reviewer") != reviewer_id:
        raise Refused(f"task {task_id} is not claimed by reviewer {reviewer_id}")


def check_decision(outcome: str, reason: str, reason_codes: Iterable[str]) -> None:
    """An outcome the console offers and a reason code of the policy (or none)."""
    if outcome not in OUTCOMES:
        raise Refused(f"outcome {outcome!r} is not one of {', '.join(OUTCOMES)}")
    if reason and reason not in set(reason_codes):
        raise Refused(f"reason {reason!r} is not a reason code of the policy")


def sensitive(task: Mapping[str, Any]) -> bool:
    """Whether the task's evidence is blurred until revealed: its queue or one of its reasons
    is sensitive (sexual content, violence, child safety)."""
    reasons = {str(reason) for reason in task.get("reasons") or []}
    return task.get("queue") in SENSITIVE_QUEUES or bool(reasons & SENSITIVE_REASONS)


def reason_codes(document: Mapping[str, Any]) -> list[str]:
    """The policy's reason codes: its rules', its hash banks', its notices'; sorted."""
    codes = {str(rule["reason"]) for rule in document.get("rules") or [] if rule.get("reason")}
    banks = document.get("hash_banks") or {}
    codes |= {str(bank["reason"]) for bank in banks.values() if bank.get("reason")}
    codes |= {str(code) for code in document.get("notices") or {}}
    return sorted(codes)
