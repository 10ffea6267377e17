"""`modstream replay`: a bank addition re-decides uploads already allowed (issue 12, item 3).

Uploads are allowed on their evidence; a `hash.bank` addition later blocks the one whose sha256
it banks and the one whose phash is 3 bits away (`phash_max_distance: 6` in global.yaml), at
the bank record's ts with `trigger: policy_change`, and an action hides each. A phash 10 bits
away shares a band (it reaches the moderation step as a candidate) but is not within the
policy's distance, and an upload after the addition is blocked by its own fast gate instead.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from modstream.demo.workload import write
from modstream.testing.policies import GLOBAL_YAML
from modstream.testing.records import T0, bank_entry, evidence, upload
from modstream.testing.stack import run_replay
from modstream.testing.versions import image, image_evidence

pytestmark = pytest.mark.integration
KEY = "bank-retro-key"
SHA = "cd" * 32
PHASH = 0x0F1E2D3C4B5A6978
BANK_TS = T0 + 60_000


def line(topic: str, value: dict[str, Any]) -> dict[str, Any]:
    return {"topic": topic, "value": value}


def events() -> list[dict[str, Any]]:
    text = {"modality": "text", "mime_type": "text/plain", "surface": "comment"}
    near, far = PHASH ^ 0b111, PHASH ^ 0x3FF  # 3 and 10 bits away, both in bands 0 and 1
    lines = [
        line("content.versions", upload("by-sha", at=T0, sha256=SHA, **text)),
        line("content.versions", upload("other", at=T0, sha256="ef" * 32, **text)),
        line("content.versions", upload("near", at=T0, phash=f"{near:016x}", **image())),
        line("content.versions", upload("far", at=T0, phash=f"{far:016x}", **image())),
    ]
    for content_id in ("by-sha", "other"):
        lines.append(line("detector.results", evidence(content_id, at=T0 + 10)))
    for content_id in ("near", "far"):
        lines += [line("detector.results", r) for r in image_evidence(content_id, T0 + 10)]
    lines += [
        line("hash.bank", bank_entry(event_id="hb-sha", hash=SHA, ts=BANK_TS)),
        line(
            "hash.bank",
            bank_entry(event_id="hb-ph", hash_type="phash", hash=f"{PHASH:016x}", ts=BANK_TS),
        ),
        line("content.versions", upload("late", at=BANK_TS + 1000, sha256=SHA, **text)),
        line("content.versions", upload("tick", at=BANK_TS + 60_000, **text)),
    ]
    return lines


@pytest.mark.parametrize("engine", ["pyflink", "batched"])
def test_a_bank_addition_blocks_uploads_already_allowed(tmp_path: Path, engine: str) -> None:
    """Either engine (modstream/jobs/moderation/job.py --engine): the batched one joins by hash key
    in BatchedVersions.java (modstream/jobs/moderation/retro_batch.py), fed by decode's hash-key
    rows."""
    source = tmp_path / "events.jsonl"
    write(events(), source)
    extra = ("--engine", engine)
    out = run_replay(source, tmp_path / "out", GLOBAL_YAML, KEY, timeout_s=400, extra_args=extra)
    decisions = out["moderation.decisions"]
    by_id: dict[str, list[dict[str, Any]]] = {}
    for decision in decisions:
        by_id.setdefault(decision["content_id"], []).append(decision)
    for content_id in ("by-sha", "near"):
        allowed, *rest = [d for d in by_id[content_id] if d["trigger"] == "evidence"][-1:] + [
            d for d in by_id[content_id] if d["trigger"] == "policy_change"
        ]
        assert allowed["outcome"] == "ALLOW", content_id
        [retro] = rest
        assert (retro["outcome"], retro["ts"], retro["state"]) == ("BLOCK", BANK_TS, "blocked")
        assert "known_match" in retro["reasons"], content_id
        hidden = [
            a
            for a in out["moderation.actions"]
            if a["content_id"] == content_id
            and a["decision_revision"] == retro["decision_revision"]
        ]
        assert [a["visibility"] for a in hidden] == ["hidden"], content_id
    for content_id in ("other", "far"):
        assert by_id[content_id][-1]["outcome"] == "ALLOW", content_id
        assert all(d["trigger"] != "policy_change" for d in by_id[content_id]), content_id
    late = by_id["late"]
    assert (late[0]["trigger"], late[0]["outcome"]) == ("fast_gate", "BLOCK")
    assert all(d["trigger"] != "policy_change" for d in late)
