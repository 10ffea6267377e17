"""The backtest sample that ships (deploy/demo/backtest-events.jsonl, `modstream policy backtest`'s
example input: modstream/ops/promotion.py), made by the demo's workload generator."""

from __future__ import annotations

from pathlib import Path

from modstream.demo import workload
from modstream.ops.promotion import SAMPLE_EVENTS
from modstream.trust.signing import Keyring


def write_sample_events(path: Path = SAMPLE_EVENTS) -> Path:
    """300 generated content versions with their evidence (seed 16, no extras, nothing
    malformed), unsigned so any deployment's keys can read them, with
    MODSTREAM_INSECURE_UNSIGNED_TOPICS=all (by default its evidence is dead-lettered). Rewrite
    with `python -m modstream.demo.backtest_sample`."""
    lines = workload.generate(
        seed=16, versions=300, malformed=False, extras=False, prefix="backtest-"
    )
    workload.write(lines, path, Keyring())
    return path


if __name__ == "__main__":
    print(write_sample_events())
