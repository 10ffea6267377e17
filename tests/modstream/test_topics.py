"""The topic list covers the contract exactly, with the configuration the issue asks for."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from modstream.contract.registry import OWN_TOPICS, TOPIC_MODELS
from modstream.core import topics
from modstream.core.topics import TOPICS

ROOT = Path(__file__).resolve().parents[2]


CONTRACT = ROOT / "docs" / "CONTRACT.md"  # the contract this repository implements
SHARED_CONTRACT = ROOT.parent / "shared" / "CONTRACT.md"  # the team's copy, where it is beside


def contract_topics() -> set[str]:
    return set(re.findall(r"^### ([a-z]+\.[a-z.]+)", CONTRACT.read_text(), flags=re.M))


def test_the_repository_carries_the_contract_it_implements() -> None:
    text = CONTRACT.read_text(encoding="utf-8")
    assert text.startswith("# modstream wire contract (v1)")
    assert "## v1.1 additions" in text
    if SHARED_CONTRACT.exists():  # a clone with nothing beside it has only its own copy
        assert text == SHARED_CONTRACT.read_text(encoding="utf-8"), (
            "docs/CONTRACT.md differs from ../shared/CONTRACT.md: copy the new contract in and "
            "implement what changed"
        )


def test_every_contract_topic_has_a_spec_and_a_schema() -> None:
    names = {spec.name for spec in TOPICS}
    contract = contract_topics()
    assert len(contract) == 17
    assert contract <= names
    assert contract == set(TOPIC_MODELS) - set(OWN_TOPICS)
    scans = {
        f"scan.requests.{m}{lane}"
        for m in ("text", "image", "video", "audio")
        for lane in ("", ".backfill")
    }
    access = {"review.grants", "review.leases", "review.access"}  # modstream/contract/review.py
    assert set(OWN_TOPICS) == {*scans, "moderation.index", *access, "enforcement.exposure"}
    assert names - contract == {
        "content.validated",
        "enforcement.repairs",
        "enforcement.exposure",
        "moderation.index",
        *scans,
        *access,
    }


def test_broadcast_topics_are_compacted_and_others_have_a_retention() -> None:
    by_name = {spec.name: spec for spec in TOPICS}
    for name in (
        "policy.rules",
        "hash.bank",
        "content.visibility",
        "moderation.index",
        "review.grants",
    ):
        assert by_name[name].config["cleanup.policy"] == "compact"
    for spec in TOPICS:
        if spec.config["cleanup.policy"] == "delete":
            assert int(spec.config["retention.ms"]) >= 7 * 86_400_000
        assert spec.partitions >= 1
    assert by_name["policy.rules"].partitions == 1


@pytest.mark.parametrize("prefix", [None, "", "demo-1a2b", "bench.x"])
def test_physical_and_contract_names_round_trip(prefix: str | None) -> None:
    names = topics.physical_names(prefix)
    assert set(names) == {spec.name for spec in topics.TOPICS}
    for name, deployed in names.items():
        assert deployed == (f"{prefix}.{name}" if prefix else name)
        assert topics.contract(deployed, prefix) == name
    # Another deployment's topic is not this one's: its name comes back unchanged.
    assert topics.contract("other.moderation.dlq", "demo") == "other.moderation.dlq"
