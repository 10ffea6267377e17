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
