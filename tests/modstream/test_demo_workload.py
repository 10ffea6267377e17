"""`--detectors real` moves the demo's workload to start now (modstream/demo/demo_workload.py)."""

from __future__ import annotations

from pathlib import Path

from modstream.demo.demo_workload import real_content
from modstream.demo.workload import T0, generate
from modstream.review.queue import LEASE_MS


def test_a_lease_moved_to_now_keeps_its_length(tmp_path: Path) -> None:
    """The workload's leases (the appeal's, the second reviews') still hold when their reviews
    come, however many versions came before them."""
    now = T0 + 30 * 86_400_000
    lines, _ = real_content(generate(seed=7, versions=40), tmp_path, now)
    leases = [line["value"] for line in lines if line["topic"] == "review.leases"]
    assert len(leases) >= 4
    assert all(lease["ts"] > now - 60_000 for lease in leases)
    assert all(lease["expires_ts"] - lease["ts"] == LEASE_MS for lease in leases)
