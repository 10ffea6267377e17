"""StableEnd (deploy/flink-ext), one lane's last stable offset against its high watermark as
EndOffsets.Broker polls them: how many offsets wait behind an open transaction and how long the
LSO has not moved (the `unstable_records` and `lso_stalled_ms` gauges, docs/OPERATIONS.md)."""

from __future__ import annotations

from typing import Any

import pytest

pytestmark = pytest.mark.integration  # needs a JVM (the gateway), not the stack

NOW = 1_764_460_800_000
POLL = 500


def test_nothing_observed_reports_nothing_waiting(jvm: Any) -> None:
    lane = jvm.io.modstream.flink.StableEnd()
    assert (lane.unstableRecords(), lane.stalledMs(NOW)) == (0, 0)
    lane.observe(-1, 10, NOW)  # the broker did not answer for the LSO
    assert (lane.unstableRecords(), lane.stalledMs(NOW + POLL)) == (0, 0)


def test_an_open_transaction_stalls_the_lso_until_it_ends(jvm: Any) -> None:
    lane = jvm.io.modstream.flink.StableEnd()
    lane.observe(5, 5, NOW)
    assert (lane.unstableRecords(), lane.stalledMs(NOW)) == (0, 0)
    lane.observe(5, 6, NOW + POLL)  # a transaction began at offset 5
    lane.observe(5, 9, NOW + 2 * POLL)  # records pile up behind it; the LSO stays
    assert lane.unstableRecords() == 4
    assert lane.stalledMs(NOW + 10 * POLL) == 9 * POLL  # since first seen below the end
    lane.observe(10, 10, NOW + 11 * POLL)  # aborted or committed: its marker, the LSO at the end
    assert (lane.unstableRecords(), lane.stalledMs(NOW + 12 * POLL)) == (0, 0)


def test_a_committing_producer_moves_the_lso_and_never_stalls_long(jvm: Any) -> None:
    """A transactional producer commits every checkpoint: records are always in flight past the
    LSO, but each commit moves it, and the stall restarts from that poll."""
    lane = jvm.io.modstream.flink.StableEnd()
    lane.observe(100, 120, NOW)
    lane.observe(121, 140, NOW + 2 * POLL)
    assert lane.unstableRecords() == 19
    assert lane.stalledMs(NOW + 3 * POLL) == POLL
    lane.observe(141, 160, NOW + 4 * POLL)
    assert lane.stalledMs(NOW + 4 * POLL) == 0
