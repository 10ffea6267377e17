"""`modstream policy backtest` on the shipped sample: two replays of one events file in one
process (a MiniCluster each, no broker), the same comparison as `policy promote`."""

from __future__ import annotations

import os

import pytest

from modstream.ops.promotion import SAMPLE_CANDIDATE, SAMPLE_EVENTS
from modstream.testing.policies import GLOBAL_YAML
from modstream.testing.stack import modstream

pytestmark = pytest.mark.integration


def test_the_sample_backtest_shows_the_new_blocks_and_exits_1_past_the_limit() -> None:
    # The sample's evidence is unsigned (any deployment's replay reads it): allowed here by the
    # named insecure setting (signatures are required by default).
    env = {**os.environ, "MODSTREAM_INSECURE_UNSIGNED_TOPICS": "all"}
    done = modstream(
        env,
        "policy", "backtest", "--old", str(GLOBAL_YAML), "--new", str(SAMPLE_CANDIDATE),
        "--input", str(SAMPLE_EVENTS), "--max-changed", "0.5%",
        timeout_s=240,
    )  # fmt: skip
    out = done.stdout + done.stderr
    assert done.returncode == 1, out
    assert "content versions compared: 300" in out
    assert "changed outcomes: 3 of 300 (1.00%, limit 0.50%)" in out
    assert "by transition: RESTRICT:age_gate->BLOCK 3" in out
    assert "new BLOCKs: 3 (backtest-c16-136@1, backtest-c16-171@1, backtest-c16-54@1)" in out
    assert "1.00% of outcomes change, above the limit 0.50%" in out
    assert "dead-lettered" not in out
