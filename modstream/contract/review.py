"""modstream's own review-access records (not in the contract; docs/contract-notes.md, "Review
grants and leases"): who may decide which queue, and who holds which task now. The moderation
job checks both before it applies a review (modstream/review/access.py, issue 27), so a grant
or a lease kept only in the review tool's Redis cannot be forged past it.

- `review.grants` (compacted, keyed by `reviewer_id`): the queues a reviewer may work from
  `ts` on, signed by the lead in `granted_by` (keyring role `lead`). An empty `queues` revokes.
- `review.leases` (keyed by `content_id`, like reviews): a reviewer's claim of one task until
  `expires_ts`, signed by the reviewer (role `reviewer`); `modstream review claim` writes it.
- `review.access` (keyed by `reviewer_id`): the review console's access log, who saw, revealed,
  claimed or decided what and when, and what the server refused them (issue 30). Nobody acts on
  it; it is the audit, kept as a topic and searchable by leads.
"""

from __future__ import annotations

from typing import Annotated, Literal, Self

from pydantic import Field, model_validator

from modstream.contract.common import ContentVersion, EventTime, Id, InputRecord, ShortText
from modstream.contract.signals import OptionalSignature

# Enough for every queue of a policy; `*` grants all of them.
MAX_GRANTED_QUEUES = 64
ALL_QUEUES = "*"


class ReviewGrant(InputRecord):
    """review.grants: the queues `reviewer_id` may claim and decide from `ts` on."""

    event_id: Id
    reviewer_id: Id
    queues: Annotated[list[Id], Field(max_length=MAX_GRANTED_QUEUES)]
    granted_by: Id
    ts: EventTime
    signature: OptionalSignature = None


class ReviewLease(InputRecord):
    """review.leases: `reviewer_id` holds task `task_id` of queue `queue` from `ts` until
    `expires_ts`; while it holds, no other reviewer's decision for the task applies."""

    event_id: Id
    task_id: Id
    queue: Id
    content_id: Id
    content_version: ContentVersion
    reviewer_id: Id
    ts: EventTime
    expires_ts: EventTime
    signature: OptionalSignature = None

    @model_validator(mode="after")
    def _ends_after_it_starts(self) -> Self:
        if self.expires_ts <= self.ts:
            raise ValueError("expires_ts must be after ts")
        return self


# What the console logs: a page or evidence seen (an image, or a video frame: `evidence_ref`
# with `#t=` seconds), the words a reader kept read from the raw-output store (`raw_output`,
# the file's `raw://` reference), blurred evidence revealed, a task claimed or decided, a
# login, a lead's look at the lead view (`lead_view`, the search in `detail`), and each request
# the server refused (`refused`, with the reason in `detail`).
AccessAction = Literal[
    "login",
    "login_refused",
    "view",
    "evidence",
    "raw_output",
    "reveal",
    "claim",
    "decide",
    "lead_view",
]
AccessActions = AccessAction | Literal["refused"]


class ReviewAccess(InputRecord):
    """review.access: `reviewer_id` did `action` at `ts` (on `task_id`, its `evidence_ref`).
    `note` is the reviewer's private note with a decision: for leads, never for users."""

    event_id: Id
    reviewer_id: Id
    action: AccessActions
    ts: EventTime
    task_id: Id | None = None
    queue: Id | None = None
    content_id: Id | None = None
    content_version: ContentVersion | None = None
    evidence_ref: Annotated[str, Field(max_length=2048)] | None = None
    outcome: Id | None = None
    note: ShortText | None = None
    detail: ShortText | None = None
