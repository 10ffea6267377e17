"""The short variant of `make test-faults` (tests/faults/harness.py): 1,500 versions on the
harness's own broker, Redis and session cluster, detector deadlines capped at 20 s, one
TaskManager kill right after a checkpoint, one late restore of the moderation job (after its
transactions timed out), one Redis kill -9; then every record checked against replay of the
same input."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from modstream.core.config import PROJECT_ROOT

# Ten minutes of a second cluster on a 2-core machine (584 s idle): `make test-slow` and
# `make test-faults` run it, `make test` does not (.ci/run must end within 40 minutes).
pytestmark = [pytest.mark.integration, pytest.mark.slow]
TIMEOUT_S = 1_200


@pytest.mark.timeout(TIMEOUT_S + 180)
def test_short_fault_run_loses_and_duplicates_nothing() -> None:
    command = [sys.executable, "-m", "tests.faults.harness", "--versions", "1500", "--short"]
    harness = subprocess.Popen(
        # `make test` time; --short caps the deadlines at 20 s, so the default settle (the
        # longest deadline and the grace) is short and waits for every deadline that waited.
        [*command, "--duration-s", "150"],
        cwd=PROJECT_ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        stdout, stderr = harness.communicate(timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        harness.terminate()  # the harness stops its cluster, broker and Redis on SIGTERM
        stdout, stderr = harness.communicate(timeout=120)
        raise AssertionError(f"the harness ran over {TIMEOUT_S} s:\n{stdout[-6000:]}") from None
    lines = stdout.strip().splitlines()
    assert lines, stderr[-4000:]
    summary = json.loads(lines[-1])
    evidence = stdout[-6000:] + stderr[-3000:]
    assert summary["taskmanager_kills"] == 1, evidence
    assert summary["late_restores"] == 1, evidence
    assert summary["redis_restarts"] == 1, evidence
    assert summary["fault_failures"] == [], evidence
    assert (summary["duplicates"], summary["missing"], summary["discrepancies"]) == (0, 0, 0), (
        summary["samples"]
    )
    assert harness.returncode == 0, evidence
