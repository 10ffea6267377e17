"""Cohen's kappa from paired outcomes (modstream/review/agreement.py), against hand-computed
values."""

from __future__ import annotations

import pytest

from modstream.review.agreement import by_queue_and_pair, kappa, pair


def test_kappa_of_a_two_by_two_table_computed_by_hand() -> None:
    """50 items: both BLOCK 20, both ALLOW 15, a BLOCK b ALLOW 5, a ALLOW b BLOCK 10.
    p_o = 35/50 = 0.7; a: BLOCK 25, ALLOW 25; b: BLOCK 30, ALLOW 20;
    p_e = (25*30 + 25*20) / 50^2 = 0.5; kappa = (0.7 - 0.5) / (1 - 0.5) = 0.4."""
    table = {("BLOCK", "BLOCK"): 20, ("ALLOW", "ALLOW"): 15}
    table |= {("BLOCK", "ALLOW"): 5, ("ALLOW", "BLOCK"): 10}
    assert kappa(table) == pytest.approx(0.4)


def test_kappa_of_three_outcomes_computed_by_hand() -> None:
    """10 items: agreed BLOCK 3, ALLOW 3, RESTRICT 1; a BLOCK b RESTRICT 2, a ALLOW b BLOCK 1.
    p_o = 0.7; a: BLOCK 5, ALLOW 4, RESTRICT 1; b: BLOCK 4, ALLOW 3, RESTRICT 3;
    p_e = (5*4 + 4*3 + 1*3) / 100 = 0.35; kappa = 0.35 / 0.65."""
    table = {("BLOCK", "BLOCK"): 3, ("ALLOW", "ALLOW"): 3, ("RESTRICT", "RESTRICT"): 1}
    table |= {("BLOCK", "RESTRICT"): 2, ("ALLOW", "BLOCK"): 1}
    assert kappa(table) == pytest.approx(0.35 / 0.65)


def test_full_agreement_is_one_and_chance_agreement_is_zero() -> None:
    assert kappa({("BLOCK", "BLOCK"): 4, ("ALLOW", "ALLOW"): 6}) == pytest.approx(1.0)
    chance = {("BLOCK", "BLOCK"): 1, ("BLOCK", "ALLOW"): 1}
    chance |= {("ALLOW", "BLOCK"): 1, ("ALLOW", "ALLOW"): 1}
    assert kappa(chance) == pytest.approx(0.0)


def test_kappa_is_undefined_without_items_or_with_one_outcome_only() -> None:
    assert kappa({}) is None
    assert kappa({("BLOCK", "BLOCK"): 7}) is None


def test_a_pair_is_named_the_same_whoever_reviewed_first() -> None:
    assert pair("r2", "r1", "BLOCK", "ALLOW") == ("r1,r2", "ALLOW", "BLOCK")
    assert pair("r1", "r2", "ALLOW", "BLOCK") == ("r1,r2", "ALLOW", "BLOCK")


def test_by_queue_and_pair_sums_the_rows_of_each_table() -> None:
    rows = [
        ("adult", "r1,r2", "BLOCK", "BLOCK", 20),
        ("adult", "r1,r2", "ALLOW", "ALLOW", 15),
        ("adult", "r1,r2", "BLOCK", "ALLOW", 5),
        ("adult", "r1,r2", "ALLOW", "BLOCK", 10),
        ("text", "r1,r3", "BLOCK", "BLOCK", 2),
    ]
    adult, text = by_queue_and_pair(rows)
    assert (adult.queue, adult.pair, adult.items, adult.agreed) == ("adult", "r1,r2", 50, 35)
    assert adult.kappa == pytest.approx(0.4)
    assert (text.queue, text.items, text.agreed, text.kappa) == ("text", 2, 2, None)
