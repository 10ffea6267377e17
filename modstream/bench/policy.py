"""Policy evaluation cost per decision for 10, 100 and 1,000 rules on realistic evidence.

Run with `make bench` (pytest-benchmark). Goal on the 2-core dev machine: at most 50 µs per
decision at 100 rules and 300 µs at 1,000 (issue 3); the figures are in docs/policy-language.md.
"""

from __future__ import annotations

import itertools
import random
from typing import Any

import pytest

from modstream.policy.evaluate import CompiledPolicy, ContentFacts, EvidenceView, load_policy

LABELS = [
    ("nsfw_image", "nsfw"),
    ("nsfw_image", "suggestive"),
    ("offensive_text", "offensive"),
    ("offensive_text", "threat"),
    ("offensive_text", "hate"),
    ("media_check", "malware"),
    ("media_check", "corrupt"),
    ("media_check", "mime_mismatch"),
    ("spam_text", "spam"),
    ("violence_image", "gore"),
    ("violence_image", "weapon"),
    ("selfharm_text", "selfharm"),
]
SURFACES = ["public_post", "comment", "profile", "dm", "live", "group"]
REGIONS = ["DE", "US", "BR", "IN", "JP", "FR", "GB", "NG"]
OUTCOMES = ["BLOCK", "PENDING", "RESTRICT", "PROVISIONAL_ALLOW"]


def generated_policy(rule_count: int, seed: int = 11) -> CompiledPolicy:
    """Rules of the shapes real policies use; about 5% have no score condition at all."""
    rng = random.Random(seed)
    rules: list[dict[str, Any]] = []
    for index in range(rule_count):
        detector, label = rng.choice(LABELS)
        threshold = round(rng.uniform(0.5, 0.99), 2)
        score = f"score('{detector}', '{label}') >= {threshold}"
        shape = rng.random()
        if shape < 0.05:
            when = (
                f"account_risk >= {round(rng.uniform(0.9, 0.99), 2)} and audience == 'minor'"
                f" and region in ('{rng.choice(REGIONS)}',)"
            )
        elif shape < 0.35:
            surfaces = ", ".join(repr(s) for s in rng.sample(SURFACES, 2))
            when = f"{score} and surface in ({surfaces})"
        elif shape < 0.55:
            when = f"{score} and audience == 'minor'"
        elif shape < 0.70:
            when = f"{score} and region in ('{rng.choice(REGIONS)}', '{rng.choice(REGIONS)}')"
        elif shape < 0.85:
            when = f"{score} and account_risk >= {round(rng.uniform(0.3, 0.9), 2)}"
        elif shape < 0.95:
            when = f"{score} and report_count >= {rng.randint(1, 5)}"
        else:
            other_detector, other_label = rng.choice(LABELS)
            when = (
                f"({score} or score('{other_detector}', '{other_label}') >= 0.99) "
                f"and not unknown('{detector}')"
            )
        outcome = rng.choice(OUTCOMES)
        rule: dict[str, Any] = {
            "id": f"rule-{index}",
            "when": when,
            "outcome": outcome,
            "reason": f"reason_{index % 17}",
        }
        if outcome == "RESTRICT":
            rule["restriction"] = "age_gate"
        if rng.random() < 0.2:
            rule["review"] = {"queue": "general", "priority": rng.randint(0, 4)}
        rules.append(rule)
    return load_policy(
        {
            "policy_id": "bench",
            "version": 1,
            "detectors": {
                "image": {"required": ["nsfw_image", "media_check"], "deadline_ms": 30000},
                "text": {"required": ["offensive_text"], "deadline_ms": 5000},
            },
            "high_risk_surfaces": ["public_post", "profile", "live"],
            "scanning": {"high_risk": "PENDING", "default": "PROVISIONAL_ALLOW"},
            "unknown": {"high_risk": "PENDING", "default": "PROVISIONAL_ALLOW"},
            "provisional_ttl_ms": 3_600_000,
            "rules": rules,
            "default": "ALLOW",
        }
    )


def realistic_inputs(count: int = 500, seed: int = 5) -> list[tuple[ContentFacts, EvidenceView]]:
    """Mostly benign content (scores near 0), a few percent clearly bad, some borderline."""
    rng = random.Random(seed)
    inputs = []
    for _ in range(count):
        modality = rng.choice(["image", "image", "text", "video"])
        detectors = {
            "image": ["nsfw_image", "media_check", "violence_image"],
            "video": ["nsfw_image", "media_check", "violence_image"],
            "text": ["offensive_text", "spam_text", "selfharm_text"],
        }[modality]
        scores = {}
        kind = rng.random()
        for detector, label in LABELS:
            if detector not in detectors:
                continue
            value = rng.betavariate(1.2, 12)  # benign: mostly below 0.2
            if kind > 0.97:
                value = rng.uniform(0.9, 1.0)  # clearly violating
            elif kind > 0.90:
                value = rng.uniform(0.4, 0.9)  # borderline
            scores[(detector, label)] = round(value, 4)
        facts = ContentFacts(
            modality=modality,
            surface=rng.choice(SURFACES),
            region=rng.choice(REGIONS),
            audience=rng.choice(["all", "all", "adult", "minor"]),
            account_risk=round(rng.random(), 3),
            size_bytes=rng.randrange(100, 10**7),
            mime_type="image/jpeg",
            report_count=rng.choice([0, 0, 0, 1, 2, 6]),
        )
        unknown = frozenset({detectors[0]}) if rng.random() < 0.02 else frozenset()
        inputs.append((facts, EvidenceView(scores=scores, unknown=unknown)))
    return inputs


@pytest.mark.parametrize("rule_count", [10, 100, 1000])
def test_policy_evaluation_per_decision(benchmark: Any, rule_count: int) -> None:
    policy = generated_policy(rule_count)
    pool = itertools.cycle(realistic_inputs())

    def decide() -> str:
        facts, evidence = next(pool)
        return policy.evaluate(facts, evidence, ts=1_764_460_800_000).outcome

    benchmark.group = "policy evaluation, one decision"
    benchmark.extra_info["rules"] = rule_count
    outcome = benchmark(decide)
    assert outcome in ("ALLOW", "PROVISIONAL_ALLOW", "PENDING", "RESTRICT", "BLOCK")


@pytest.mark.parametrize("rule_count", [100, 1000])
def test_policy_evaluation_without_the_index(benchmark: Any, rule_count: int) -> None:
    """The same decisions with every rule evaluated: what the rule index saves."""
    policy = generated_policy(rule_count)
    everything = list(range(len(policy.rules)))
    policy.candidates = lambda context: everything  # type: ignore[method-assign]
    pool = itertools.cycle(realistic_inputs())

    def decide() -> str:
        facts, evidence = next(pool)
        return policy.evaluate(facts, evidence, ts=1_764_460_800_000).outcome

    benchmark.group = "policy evaluation, one decision, no index"
    benchmark(decide)
