"""The records a reviewer or lead makes (modstream/review/queue.py) are valid for every allowed id:
their event ids, built from the reviewer's and the task's ids, stay within an id's length."""

from __future__ import annotations

from modstream.contract.common import MAX_ID_CHARS
from modstream.contract.review import ReviewGrant, ReviewLease
from modstream.contract.signals import ReviewDecision
from modstream.review.queue import decision_record, event_id, grant_record, lease_record
from modstream.testing.records import T0

LONGEST = "r" * MAX_ID_CHARS


def test_short_ids_keep_their_readable_event_ids() -> None:
    assert grant_record("alice", ["*"], "lead-1", T0)["event_id"] == f"grant-alice-{T0}"
    assert event_id("lease", "t-1", "alice", T0) == f"lease-t-1-alice-{T0}"


def test_the_longest_ids_make_valid_grants_leases_and_decisions() -> None:
    """Found by the fuzz suite: a 256-character reviewer id made a grant whose event id was
    longer than 256, refused by the job as `schema`."""
    task = {"task_id": LONGEST, "queue": "text", "content_id": LONGEST, "content_version": 1}
    grant = grant_record(LONGEST, ["*"], "lead-1", T0)
    lease = lease_record(task, LONGEST, T0, 60_000)
    decision = decision_record(task, LONGEST, "BLOCK", "policy", T0)
    ReviewGrant.model_validate(grant)
    ReviewLease.model_validate(lease)
    ReviewDecision.model_validate(decision)
    assert len({grant["event_id"], lease["event_id"], decision["event_id"]}) == 3
    assert grant["event_id"] != grant_record(LONGEST[:-1] + "s", ["*"], "lead-1", T0)["event_id"]
