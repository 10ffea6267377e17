"""Golden outputs: what `modstream replay` writes for the demo workload, kept to show a change of
the moderation code leaves every decision as it was (docs/BENCHMARKS.md, "Redesign").

The outputs live with the test suite (tests/golden/replay_demo); tests/integration/
test_golden_replay.py replays `demo_events` and compares `canonical` lines with `load()`.
`python -m modstream.testing.golden` (`make golden`) rewrites them: only for a change meant to
change decisions.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import yaml

from modstream.core.config import CONFIG_VARIABLE, PROJECT_ROOT
from modstream.demo.workload import generate, write
from modstream.testing.records import TEST_SIGNING_ENV

GOLDEN = PROJECT_ROOT / "tests" / "golden" / "replay_demo"
POLICY = PROJECT_ROOT / "policy_rules" / "global.yaml"
KEY = "golden-replay-key"


def demo_events(path: Path) -> Path:
    """The demo's workload (`modstream demo`: seed 7, 200 versions) at the generator's fixed
    start, policy records signed with KEY."""
    policy = yaml.safe_load(POLICY.read_text(encoding="utf-8"))
    write(generate(seed=7, versions=200, policy_document=policy, policy_key=KEY.encode()), path)
    return path


def canonical(records: list[dict[str, Any]]) -> list[str]:
    """Records as sorted lines of sorted keys: the order of one run's output files is the order
    its parallel writers happened to take, not part of what is decided."""
    return sorted(json.dumps(record, sort_keys=True, ensure_ascii=False) for record in records)


def save(outputs: dict[str, list[dict[str, Any]]], directory: Path = GOLDEN) -> None:
    """`outputs` (records by topic) as the golden files in `directory`, replacing them."""
    directory.mkdir(parents=True, exist_ok=True)
    for old in directory.glob("*.jsonl"):
        old.unlink()
    for topic, records in outputs.items():
        lines = canonical(records)
        (directory / f"{topic}.jsonl").write_text("".join(f"{line}\n" for line in lines))


def load(directory: Path = GOLDEN) -> dict[str, list[str]]:
    """The golden files' canonical lines, by topic."""
    return {path.stem: path.read_text().splitlines() for path in sorted(directory.glob("*.jsonl"))}


def main() -> int:
    """`python -m modstream.testing.golden` (`make golden`): replay the demo workload as the
    test does, in the test suite's environment (signatures required, its dev secret, no
    modstream.toml: tests/conftest.py), and keep its outputs as the golden ones. Only for a
    change meant to change decisions."""
    import tempfile

    from modstream.testing.stack import run_replay

    for name, default in {**TEST_SIGNING_ENV, CONFIG_VARIABLE: "none"}.items():
        os.environ.setdefault(name, default)

    with tempfile.TemporaryDirectory() as scratch:
        events = demo_events(Path(scratch) / "events.jsonl")
        save(run_replay(events, Path(scratch) / "out", POLICY, KEY, timeout_s=400))
    print(f"golden: {sum(len(v) for v in load().values())} records in {GOLDEN}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
