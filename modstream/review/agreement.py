"""Agreement between two reviewers (issue 29 item 2): Cohen's kappa from the counts of their
paired outcomes, per queue and reviewer pair.

The moderation job counts each second review against its first (`second_review_pairs_total`,
labels queue, reviewer pair and both outcomes: modstream/jobs/moderation/metrics.py); `modstream
eval`, the report and the demo summary turn those counts into kappa with `kappa`. A pair is named in
a fixed order (`pair`), so two reviewers who take turns being first and second are one pair. Pure:
no state, no clock; a leaf module that the metrics and the CLI may import.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

# (outcome of the pair's first-named reviewer, outcome of the second-named) -> items
Confusion = Mapping[tuple[str, str], int]


def pair(
    first_reviewer: str, second_reviewer: str, first_outcome: str, second_outcome: str
) -> tuple[str, str, str]:
    """(`a,b` with a < b, a's outcome, b's outcome): the pair named the same whichever of the
    two reviewed first."""
    if second_reviewer < first_reviewer:
        first_reviewer, second_reviewer = second_reviewer, first_reviewer
        first_outcome, second_outcome = second_outcome, first_outcome
    return f"{first_reviewer},{second_reviewer}", first_outcome, second_outcome


def kappa(confusion: Confusion) -> float | None:
    """Cohen's kappa, (p_o - p_e) / (1 - p_e): p_o the share of items both gave the same
    outcome, p_e the share expected by chance from each reviewer's own outcome shares. None
    when it is undefined: no items, or both always gave one and the same outcome (p_e = 1)."""
    total = sum(confusion.values())
    if total <= 0:
        return None
    observed = sum(count for (a, b), count in confusion.items() if a == b) / total
    by_a: Counter[str] = Counter()
    by_b: Counter[str] = Counter()
    for (a, b), count in confusion.items():
        by_a[a] += count
        by_b[b] += count
    expected = sum(by_a[outcome] * by_b[outcome] for outcome in by_a) / (total * total)
    if expected >= 1.0:
        return None
    return (observed - expected) / (1.0 - expected)


@dataclass(frozen=True)
class PairAgreement:
    """One queue and reviewer pair: items compared, items agreed, and kappa."""

    queue: str
    pair: str
    items: int
    agreed: int
    kappa: float | None


def by_queue_and_pair(
    counts: Iterable[tuple[str, str, str, str, int]],
) -> list[PairAgreement]:
    """(queue, pair, a's outcome, b's outcome, count) rows -> one PairAgreement per queue and
    pair, sorted by queue then pair."""
    tables: dict[tuple[str, str], Counter[tuple[str, str]]] = {}
    for queue, named, outcome_a, outcome_b, count in counts:
        tables.setdefault((queue, named), Counter())[(outcome_a, outcome_b)] += count
    return [
        PairAgreement(
            queue,
            named,
            sum(table.values()),
            sum(count for (a, b), count in table.items() if a == b),
            kappa(table),
        )
        for (queue, named), table in sorted(tables.items())
    ]


def second_review_summary(
    tasks: list[dict[str, Any]], reviews: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """Per queue and reviewer pair, as the moderation job's `second_reviews` counter counts them
    (modstream/review/second_review.py), read back from this run's records: each second-review task
    (`second_review.round` second) pairs the first review of the task it names (`of_task`) with
    the first review of its own task by another reviewer. Rows: queue (the first task's,
    `external` for a review naming no task), pair, items, agreed, kappa (None when undefined)."""
    seconds = {
        (t["content_id"], t["task_id"]): t
        for t in tasks
        if (t.get("second_review") or {}).get("round") == "second"
    }
    if not seconds:
        return []
    queue_of = {(t["content_id"], t["task_id"]): t["queue"] for t in tasks}
    earliest: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for review in sorted(reviews, key=lambda r: (r["ts"], r.get("event_id", ""))):
        earliest.setdefault((review.get("content_id", ""), review["task_id"]), []).append(review)
    counts: Counter[tuple[str, str, str, str]] = Counter()
    for (content_id, task_id), task in seconds.items():
        of_task = task["second_review"]["of_task"]
        firsts = earliest.get((content_id, of_task), [])
        if not firsts:
            continue
        first = firsts[0]
        second = next(
            (
                r
                for r in earliest.get((content_id, task_id), [])
                if r["reviewer_id"] != first["reviewer_id"]
            ),
            None,
        )
        if second is None:
            continue
        named, outcome_a, outcome_b = pair(
            first["reviewer_id"], second["reviewer_id"], first["outcome"], second["outcome"]
        )
        counts[(queue_of.get((content_id, of_task), "external"), named, outcome_a, outcome_b)] += 1
    return [
        {
            "queue": row.queue,
            "pair": row.pair,
            "items": row.items,
            "agreed": row.agreed,
            "kappa": row.kappa,
        }
        for row in by_queue_and_pair(
            (queue, named, a, b, count) for (queue, named, a, b), count in counts.items()
        )
    ]
