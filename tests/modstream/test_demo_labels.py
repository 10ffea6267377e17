"""The demo's shipped labels are what modstream/demo_labels.py writes, and valid labels."""

from __future__ import annotations

import io

import pytest
import yaml

from modstream import demo_labels
from modstream.config import PROJECT_ROOT
from modstream.labels import read_labels
from modstream.workload_extras import SECOND_REVIEWED

SHIPPED = {False: "deploy/demo/labels.jsonl", True: "deploy/demo/labels-real.jsonl"}


def _policy_reasons() -> set[str]:
    policy = yaml.safe_load((PROJECT_ROOT / "policy_rules" / "global.yaml").read_text())
    rules = {rule["reason"] for rule in policy["rules"] if rule.get("reason")}
    return rules | {bank["reason"] for bank in policy["hash_banks"].values()}


@pytest.mark.parametrize("real", [False, True])
def test_the_shipped_labels_are_what_the_script_writes(real: bool) -> None:
    written = io.StringIO()
    demo_labels.write(demo_labels.derive(real=real), written)
    shipped = (PROJECT_ROOT / SHIPPED[real]).read_text()
    assert written.getvalue() == shipped, (
        f"regenerate: python -m modstream.demo_labels{' --detectors real' if real else ''}"
        f" > {SHIPPED[real]}"
    )


@pytest.mark.parametrize("real", [False, True])
def test_the_shipped_labels_are_a_fair_test(real: bool) -> None:
    labels = read_labels(PROJECT_ROOT / SHIPPED[real])
    assert 55 <= len(labels) <= 100
    wanted = {f"c7-{index}" for index in range(60)} | {"banked-1"}
    assert {label.content_id for label in labels} <= wanted
    # The workload's reviews label what they decide: its review and appeal, its second reviews.
    reviewed = {"c7-3"} | {f"c7-{index}" for index in SECOND_REVIEWED}
    assert not reviewed & {label.content_id for label in labels}
    violating = [label for label in labels if label.violating]
    assert 5 <= len(violating) <= len(labels) // 2
    reasons = {label.reason for label in violating}
    assert None in reasons  # a labeller who flags without a code
    assert reasons - {None} <= _policy_reasons()
    # the generated workload's hash-bank uploads are known matches; real text is harassment
    expected = {"harassment", "malware"} | (set() if real else {"known_match", "mature_content"})
    assert expected <= reasons
