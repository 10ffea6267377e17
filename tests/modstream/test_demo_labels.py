"""The demo's shipped labels are what modstream/demo/labels_of.py writes, and valid labels."""

from __future__ import annotations

import io

import pytest
import yaml

from modstream.analytics.labels import read_labels
from modstream.core.config import PROJECT_ROOT
from modstream.demo import labels_of as demo_labels
from modstream.demo import media as demo_media
from modstream.demo.demo_workload import upserts
from modstream.demo.workload import generate
from modstream.demo.workload_extras import SECOND_REVIEWED

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
        f"regenerate: python -m modstream.demo.labels_of{' --detectors real' if real else ''}"
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
    # the generated workload's hash-bank uploads are known matches and its generated media
    # evidence says malware; real text, and real media with offensive words, are harassment
    expected = {"harassment"} | (set() if real else {"malware", "known_match", "mature_content"})
    assert expected <= reasons


def test_real_media_kinds_are_labelled_as_their_words_say() -> None:
    """Every kind of modstream/demo/media.py is among the labelled versions (the first 60),
    offensive ones `harassment`, benign ones clean: what the demo checks its decisions against."""
    labels = {label.content_id: label for label in read_labels(PROJECT_ROOT / SHIPPED[True])}
    lines = generate(seed=demo_labels.SEED, versions=demo_labels.REAL_EVENTS)
    kinds = demo_media.kinds_of(upserts(lines))
    assert sorted(kind.name for kind in kinds.values()) == sorted(k.name for k in demo_media.KINDS)
    for content_id, kind in kinds.items():
        label = labels[content_id]
        assert label.violating == kind.offensive, content_id
        assert label.reason == ("harassment" if kind.offensive else None), content_id
    # within the first 30 versions: `modstream demo --events 30` (the cluster test) has them all
    assert all((demo_media.content_index(c) or 99) < 30 for c in kinds)
