"""`modstream demo --json` on the test stack: the whole loop ends enforced and reconciled."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from modstream.config import PROJECT_ROOT, Settings

pytestmark = pytest.mark.integration


def test_the_demo_loop_enforces_every_action(stack: Settings) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "modstream.cli", "demo", "--events", "120", "--json"],
        cwd=PROJECT_ROOT,
        env=dict(os.environ),
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    summary = json.loads(result.stdout.strip().splitlines()[-1])
    assert summary["content_versions"] >= 120 and summary["actions"] > 0
    assert summary["applied"] == summary["actions"]
    assert summary["visibility_mismatches"] == 0
    assert summary["discrepancies_open"] == 0
    assert summary["duplicate_revisions"] == 0
    assert summary["review_tasks"] > 0 and summary["dlq"] > 0
    assert set(summary["enforcement_lag_ms"]) >= {"p50", "p99"}
