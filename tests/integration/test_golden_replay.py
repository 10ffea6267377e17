"""The decisions of `modstream replay` on the demo workload are the golden ones (tests/golden):
a change made for speed or readability changes nothing decided."""

from __future__ import annotations

from pathlib import Path

import pytest

from modstream.testing.golden import KEY, POLICY, canonical, demo_events, load
from modstream.testing.stack import run_replay


@pytest.mark.parametrize("engine", ["pyflink", "batched"])
def test_replay_of_the_demo_workload_matches_the_golden_outputs(
    tmp_path: Path, engine: str
) -> None:
    """Either keyed operator (modstream/jobs/moderation/job.py --engine) decides what the golden
    files hold."""
    events = demo_events(tmp_path / "events.jsonl")
    extra = ("--engine", engine)
    outputs = run_replay(events, tmp_path / "out", POLICY, KEY, timeout_s=400, extra_args=extra)
    golden = load()
    assert sorted(outputs) == sorted(golden)
    for topic, lines in golden.items():
        got = canonical(outputs[topic])
        first = next((i for i, (a, b) in enumerate(zip(got, lines, strict=False)) if a != b), None)
        assert got == lines, (topic, len(got), len(lines), first, got[first or 0][:400])
    assert len(golden["moderation.decisions"]) > 200
