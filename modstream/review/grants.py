"""Each reviewer's grants of queues as the moderation job holds them (issue 27; the records are
`review.grants`, signed by a lead): a grant gives a reviewer queues from its `ts` on, and a
review or lease is checked against the grant in force at its `ts`, so replay and live decide
alike (modstream/review/access.py checks them; the job keeps them in broadcast state).

Apart from modstream/review/access.py, which reads the version state: the state names
`ReviewGrants` in the step's context without importing what reads it.
"""

from __future__ import annotations

import bisect
import json
from collections.abc import Iterable
from dataclasses import dataclass, field

from modstream.contract.review import ALL_QUEUES

STATE_PREFIX = "grant:"
# Grants one reviewer's history keeps; past it the oldest go (a review stamped before the oldest
# kept grant is then refused: far more changes of access than a reviewer sees).
MAX_GRANTS_PER_REVIEWER = 256


@dataclass
class ReviewGrants:
    """Each reviewer's grants in `ts` order: (ts, queues)."""

    history: dict[str, list[tuple[int, frozenset[str]]]] = field(default_factory=dict)

    def apply(self, reviewer_id: str, queues: Iterable[str], ts: int) -> bool:
        """Add one grant; False when it is already held (a redelivered record)."""
        grants = self.history.setdefault(reviewer_id, [])
        grant = (ts, frozenset(queues))
        if grant in grants:
            return False
        bisect.insort(grants, grant, key=lambda held: held[0])
        del grants[:-MAX_GRANTS_PER_REVIEWER]
        return True

    def queues_at(self, reviewer_id: str, ts: int) -> frozenset[str]:
        """The queues of the grant in force at `ts` (the newest at or before it)."""
        grants = self.history.get(reviewer_id, [])
        index = bisect.bisect_right(grants, ts, key=lambda held: held[0])
        return grants[index - 1][1] if index else frozenset()

    def may(self, reviewer_id: str, queue: str, ts: int) -> bool:
        queues = self.queues_at(reviewer_id, ts)
        return queue in queues or ALL_QUEUES in queues

    @classmethod
    def from_state(cls, items: Iterable[tuple[str, str]]) -> ReviewGrants:
        """ReviewGrants from broadcast-state items (`state_entry`); other keys are skipped."""
        grants = cls()
        for key, value in items:
            if key.startswith(STATE_PREFIX):
                reviewer_id, ts = key[len(STATE_PREFIX) :].rsplit(":", 1)
                grants.apply(reviewer_id, json.loads(value), int(ts))
        return grants


def state_entry(reviewer_id: str, queues: Iterable[str], ts: int) -> tuple[str, str]:
    """The broadcast-state (key, value) of one grant: written once, never rewritten."""
    return f"{STATE_PREFIX}{reviewer_id}:{ts}", json.dumps(sorted(queues))
