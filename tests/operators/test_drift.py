"""modstream/scanning/drift.py: the buckets, PSI (the same number Prometheus' recording rules give
on the same counts: deploy/prometheus/alerts.day.test.yaml) and PSI per window of results."""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from modstream.scanning import drift
from modstream.testing.records import T0, evidence

HOUR = 3_600_000
DAY = 24 * HOUR


@pytest.mark.parametrize(
    ("score", "bucket"),
    [(0.0, "0"), (0.0999, "0"), (0.1, "10"), (0.55, "50"), (0.9, "90"), (1.0, "90")],
)
def test_scores_fall_in_ten_fixed_buckets_with_one_in_the_top_one(
    score: float, bucket: str
) -> None:
    assert drift.bucket(score) == bucket
    assert drift.BUCKETS == ("0", "10", "20", "30", "40", "50", "60", "70", "80", "90")


counts = st.dictionaries(st.sampled_from(drift.BUCKETS), st.integers(0, 10_000), min_size=1)


@given(counts, st.integers(1, 50))
def test_the_same_distribution_at_any_scale_has_psi_zero(found: dict[str, int], scale: int) -> None:
    scaled = {name: count * scale for name, count in found.items()}
    value = drift.psi(found, scaled)
    assert value is None if sum(found.values()) == 0 else value == pytest.approx(0, abs=1e-12)


@given(counts, counts)
def test_psi_is_never_negative_and_symmetric(before: dict[str, int], now: dict[str, int]) -> None:
    value = drift.psi(before, now)
    if sum(before.values()) == 0 or sum(now.values()) == 0:
        assert value is None
        return
    assert value is not None and value >= -1e-12
    assert value == pytest.approx(drift.psi(now, before))


def test_psi_is_the_recording_rules_number_on_the_promtool_cases_counts() -> None:
    """alerts.day.test.yaml: the firing case's last hour (40/16/44%) against its day before
    (23 hours of 80/16/4% and the first shifted hour) is 1.043 there; the quiet shift 0.01."""
    before = {"0": 276 * 40 + 12 * 20, "10": 288 * 8, "90": 276 * 2 + 12 * 22}
    now = {"0": 12 * 20, "10": 12 * 8, "90": 12 * 22}
    assert drift.psi(before, now) == pytest.approx(1.043, abs=5e-4)
    assert drift.psi({"0": 40, "10": 8, "90": 2}, {"0": 38, "10": 10, "90": 2}) == (
        pytest.approx(0.011, abs=5e-4)
    )


def test_an_empty_bucket_counts_as_epsilon_so_psi_stays_finite() -> None:
    value = drift.psi({"0": 100}, {"90": 100})
    expected = 2 * (1 - drift.EPSILON) * math.log((1 - 0) / drift.EPSILON)
    assert value is not None and value == pytest.approx(expected, rel=1e-3)


def test_only_ok_results_scores_count() -> None:
    ok = evidence(scores={"offensive": 0.95, "spam": 0.05})
    assert sorted(drift.scored(ok)) == [
        (("offensive_text", "alt-profanity-check-1.6", "offensive"), "90"),
        (("offensive_text", "alt-profanity-check-1.6", "spam"), "0"),
    ]
    assert list(drift.scored(evidence(status="timeout", scores=None))) == []
    assert list(drift.scored(evidence(scores={"offensive": 1.5, "odd": True}))) == []


def _results(start: int, hours: int, shares: dict[float, int], model: str = "m1") -> list[Any]:
    """`hours` hours of results from `start`, each hour `count` results scoring `score`."""
    made = []
    for hour in range(hours):
        for score, count in shares.items():
            for n in range(count):
                at = start + hour * HOUR + n * 1000
                made.append(evidence(f"c{hour}-{score}-{n}", at, model_version=model,
                                     scores={"offensive": score}))  # fmt: skip
    return made


def test_each_window_is_compared_with_the_day_before_it() -> None:
    stable = _results(T0, 25, {0.05: 80, 0.15: 16, 0.95: 4})
    shifted = _results(T0 + 25 * HOUR, 1, {0.05: 40, 0.15: 16, 0.95: 44})
    points = drift.psi_by_window(stable + shifted, HOUR, DAY, min_results=100)
    # The first hour has no reference; each later stable hour PSI 0; the shifted one above 0.2.
    assert [point.start_ts for point in points] == [T0 + hour * HOUR for hour in range(1, 26)]
    assert all(point.psi == pytest.approx(0, abs=1e-12) for point in points[:-1])
    last = points[-1]
    assert (last.detector, last.model_version, last.label) == (
        "offensive_text", "m1", "offensive")  # fmt: skip
    assert last.psi > drift.DRIFTED and (last.results, last.reference_results) == (100, 2400)
    assert last.noise == pytest.approx(9 * (1 / 2400 + 1 / 100))
    assert drift.psi_by_window(stable + shifted, HOUR, DAY) == []  # under 300 an hour


def test_windows_with_too_few_scores_and_other_model_versions_are_apart() -> None:
    few = _results(T0, 3, {0.05: 5, 0.95: 5})
    other = _results(T0, 3, {0.05: 100}, model="m2")
    points = drift.psi_by_window(few + other, HOUR, DAY, min_results=50)
    assert {point.model_version for point in points} == {"m2"}
    assert drift.psi_by_window(few, HOUR, DAY, min_results=1)[0].psi == pytest.approx(0)


def test_a_young_archive_is_cut_in_four_windows_each_against_all_before_it() -> None:
    assert drift.windows_for(2 * DAY) == (HOUR, DAY, drift.MIN_RESULTS)
    assert drift.windows_for(40_000 - 1) == (10_000, 40_000, drift.YOUNG_MIN_RESULTS)
    results = [evidence(f"c{n}", T0 + n * 100, scores={"offensive": 0.05 if n < 300 else 0.95})
               for n in range(400)]  # fmt: skip
    window = drift.windows_for(39_900)[0]
    points = drift.drift_points(results)
    assert [point.start_ts for point in points] == [T0 + n * window for n in (1, 2, 3)]
    assert points[0].psi == pytest.approx(0, abs=1e-12) and points[-1].psi > drift.DRIFTED
    assert drift.drift_points([]) == []


def test_chance_alone_gives_about_the_noise_floor() -> None:
    """Two samples of one distribution (seeded draws): PSI near `noise`, far above 0 on 30
    scores, far under DRIFTED on 3,000; why the alert wants 300 scores a window."""
    import random

    draw = random.Random(29)

    def sample(size: int) -> dict[str, int]:
        counts: dict[str, int] = {}
        for _ in range(size):
            name = drift.bucket(draw.betavariate(2, 5))
            counts[name] = counts.get(name, 0) + 1
        return counts

    small = [drift.psi(sample(30), sample(30)) or 0 for _ in range(200)]
    large = [drift.psi(sample(3000), sample(3000)) or 0 for _ in range(20)]
    assert sum(small) / len(small) > drift.DRIFTED
    assert max(large) < drift.noise(3000, 3000) * 3 < drift.DRIFTED
