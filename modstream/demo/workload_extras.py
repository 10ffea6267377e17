"""The fixed scenario a generated workload ends with (modstream/demo/workload.py, `extras=True`).

After the generated versions, at one ts: a known-bad hash and an upload that matches it;
reports from established reporters, a burst of new ones and a flooder past its hourly limit; a
review, an appeal (and a conflicting second one) and the review that closes it; two reviews the
policy samples for a blind second review, one confirmed and one disputed and escalated; an edit,
a delete, a re-evaluation; and, given a policy document and key, a signed shadow policy version.
Only the banked hash draws from the generator's random sequence, first, so the records stay
the same for the same seed.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import yaml

from modstream.core.config import PROJECT_ROOT
from modstream.review.queue import LEASE_MS, decision_record, lease_record
from modstream.review.second_review import escalation_task_id, sampled, second_task_id
from modstream.trust.keyring import Keyring
from modstream.trust.signing import sign
from modstream.trust.two_person import authorship_record

Emit = Callable[[str, Any, int], None]  # (topic, value, delivery ts): one line of the workload


def add_extras(
    rng: random.Random,
    uploads: list[dict[str, Any]],
    emit: Emit,
    ts: int,
    policy_document: dict[str, Any] | None,
    policy_key: bytes | None,
    prefix: str = "",
) -> None:
    """Emit the scenario at `ts`, in this order (records with equal ts keep it)."""
    _bank_match(rng, uploads, emit, ts, prefix)
    _reports(uploads, emit, ts, prefix)
    _review_and_appeals(uploads[3], emit, ts)
    _second_reviews(uploads, emit, ts, policy_document)
    _edit_delete_reevaluate(uploads, emit, ts)
    if policy_document is not None and policy_key is not None:
        _shadow_policy(policy_document, policy_key, emit, ts, prefix)


def _bank_match(
    rng: random.Random, uploads: list[dict[str, Any]], emit: Emit, ts: int, prefix: str
) -> None:
    """A known-bad hash, then an upload that matches it."""
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


def _reports(uploads: list[dict[str, Any]], emit: Emit, ts: int, prefix: str) -> None:
    """Reports that exercise the reporter gate: established reporters, a brigading burst and
    a flooder beyond its hourly limit."""

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


def _review_and_appeals(reviewed: dict[str, Any], emit: Emit, ts: int) -> None:
    """A review, then an appeal (and a conflicting second one) and the review that closes it."""
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
    for event_id, appeal_id, at in (("ap-1", "a1", ts + 400), ("ap-2", "a2", ts + 450)):
        emit(
            "moderation.appeals",
            {
                "event_id": event_id,
                "appeal_id": appeal_id,
                "content_id": reviewed["content_id"],
                "content_version": 1,
                "decision_revision": 1,
                "user_id": reviewed["author_id"],
                "ts": at,
            },
            at,
        )
    appeal_task = {
        "task_id": "appeal-a1",
        "queue": "appeals",
        "content_id": reviewed["content_id"],
        "content_version": 1,
    }
    emit("review.leases", lease_record(appeal_task, "mod-2", ts + 490, LEASE_MS), ts + 490)
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


# Second review (policy `second_review`, modstream/review/second_review.py): the workload's
# reviewers. FIRST_REVIEWER's proactive reviews are sampled; SECOND_REVIEWER reviews them again
# blind (queue `second_review`); ESCALATION_REVIEWER decides the disagreement (queue `escalation`).
FIRST_REVIEWER, SECOND_REVIEWER, ESCALATION_REVIEWER = "mod-3", "mod-4", "senior-1"
# The uploads reviewed twice (confirmed, disputed): no other extra touches them; in the demo's
# seed both are clean audio the model allows, in the labelled range (modstream/demo/labels_of.py).
SECOND_REVIEWED = (22, 34)
DEFAULT_POLICY = PROJECT_ROOT / "policy_rules" / "global.yaml"


def _second_reviews(
    uploads: list[dict[str, Any]], emit: Emit, ts: int, policy_document: dict[str, Any] | None
) -> None:
    """Two proactive reviews the policy samples for a blind second review (or requires one
    for, where a rule it names matches): the second reviewer confirms the first's ALLOW of
    one version and disputes the first's BLOCK of the other, and the escalation's reviewer
    decides that one ALLOW, which is then in force. The reviews' event ids are chosen by the
    job's own sampling rule and the tasks' ids computed by its own functions, so the leases and
    decisions name the tasks the job opens. Nothing when the policy samples none or there are
    too few versions."""
    share = _sample_share(policy_document)
    if share <= 0 or len(uploads) <= max(SECOND_REVIEWED):
        return
    confirmed, disputed = (uploads[index] for index in SECOND_REVIEWED)
    confirmed_id, disputed_id = _sampled_event_ids(share, 2)
    second = _first_review(confirmed, confirmed_id, "ALLOW", "no_violation", emit, ts + 310)
    _leased_decision(second, SECOND_REVIEWER, "ALLOW", "no_violation", emit, ts + 320)
    # `spam`: a reason that gives no strike (policy `strikes`), so no sanction follows it.
    second = _first_review(disputed, disputed_id, "BLOCK", "spam", emit, ts + 340)
    _leased_decision(second, SECOND_REVIEWER, "ALLOW", "no_violation", emit, ts + 350)
    escalation = dict(
        second,
        task_id=escalation_task_id(disputed["content_id"], 1, second["task_id"]),
        queue="escalation",
    )
    _leased_decision(escalation, ESCALATION_REVIEWER, "ALLOW", "no_violation", emit, ts + 370)


def _sample_share(policy_document: dict[str, Any] | None) -> float:
    """The share of human decisions the policy samples: `policy_document`'s, else the shipped
    default policy's (the demo's jobs run it; its workload is generated without a document)."""
    if policy_document is None:
        policy_document = yaml.safe_load(DEFAULT_POLICY.read_text(encoding="utf-8"))
    return float(((policy_document or {}).get("second_review") or {}).get("sample", 0.0))


def _sampled_event_ids(share: float, count: int) -> list[str]:
    """The first `count` event ids `rv-sampled-<n>` that the policy's share samples."""
    chosen: list[str] = []
    number = 0
    while len(chosen) < count:
        number += 1
        if sampled(f"rv-sampled-{number}", share):
            chosen.append(f"rv-sampled-{number}")
    return chosen


def _first_review(
    reviewed: dict[str, Any], event_id: str, outcome: str, reason: str, emit: Emit, at: int
) -> dict[str, Any]:
    """FIRST_REVIEWER's proactive review of version 1 of `reviewed` (naming no task: queue
    `external`); the second-review task it opens."""
    content_id = reviewed["content_id"]
    review = {
        "event_id": event_id, "task_id": "external", "content_id": content_id,
        "content_version": 1, "reviewer_id": FIRST_REVIEWER, "outcome": outcome,
        "reason": reason, "ts": at,
    }  # fmt: skip
    emit("review.decisions", review, at)
    return {
        "task_id": second_task_id(content_id, 1, event_id),
        "queue": "second_review",
        "content_id": content_id,
        "content_version": 1,
    }


def _leased_decision(
    task: dict[str, Any], reviewer_id: str, outcome: str, reason: str, emit: Emit, at: int
) -> None:
    """`reviewer_id` leases `task` and decides it (a task the job issued needs both)."""
    emit("review.leases", lease_record(task, reviewer_id, at, LEASE_MS), at)
    emit("review.decisions", decision_record(task, reviewer_id, outcome, reason, at + 5), at + 5)


def _edit_delete_reevaluate(uploads: list[dict[str, Any]], emit: Emit, ts: int) -> None:
    """An edit (version 2), a delete and a re-evaluation request."""
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


def _shadow_policy(
    policy_document: dict[str, Any], policy_key: bytes, emit: Emit, ts: int, prefix: str
) -> None:
    """The next version of `policy_document` in shadow mode, signed with `policy_key` and by
    its author `workload` with the author key of the environment's keyring (the dev secret of
    a test stack: modstream/trust/two_person.py); without one it carries no author signature."""
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
    author_key = Keyring.from_env().key_for("workload", "author")
    if author_key is not None:
        record["authorship"] = authorship_record(document, "workload", author_key, ts + 900)
    record["signature"] = sign(record, policy_key)
    emit("policy.rules", record, ts + 900)
