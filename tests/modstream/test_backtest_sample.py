"""The backtest's shipped sample: the candidate is one threshold away from the default policy,
and the events file is what the workload generator writes (so it can be rewritten)."""

from __future__ import annotations

import json
from pathlib import Path

from modstream.demo.backtest_sample import write_sample_events
from modstream.ops.policy_service import read_document
from modstream.ops.promotion import SAMPLE_CANDIDATE, SAMPLE_EVENTS
from modstream.policy.diff import diff
from modstream.testing.policies import GLOBAL_YAML


def test_the_sample_candidate_differs_from_global_in_one_threshold() -> None:
    old, new = read_document(GLOBAL_YAML), read_document(SAMPLE_CANDIDATE)
    assert diff(old, new) == [
        "~ nsfw-block-public: threshold score('nsfw_image', 'nsfw') >= 0.95 -> 0.8"
    ]
    assert (new["policy_id"], new["version"]) == (old["policy_id"], old["version"] + 1)


def test_the_sample_events_are_the_generators_and_unsigned(tmp_path: Path) -> None:
    written = write_sample_events(tmp_path / "events.jsonl")
    assert written.read_bytes() == SAMPLE_EVENTS.read_bytes()
    lines = [json.loads(line) for line in SAMPLE_EVENTS.read_text().splitlines()]
    topics = {line["topic"] for line in lines}
    assert topics == {"content.versions", "detector.results"}
    assert sum(line["topic"] == "content.versions" for line in lines) == 300
    assert not any("signature" in line["value"] for line in lines)
