"""The comparison behind `policy promote` and `policy backtest`: latest decisions per content
version, changed outcomes by transition, rule, surface and region, new BLOCKs, one-sided
versions, and the --max-changed share."""

from __future__ import annotations

import random
from fractions import Fraction
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from modstream.policy.compare import (
    Latest,
    ThresholdError,
    compare,
    facts_of,
    parse_share,
    render,
    summary,
)
from modstream.testing.records import T0


def decision(
    content_id: str,
    outcome: str,
    *,
    revision: int = 1,
    version: int = 1,
    rules: tuple[str, ...] = (),
    policy_version: int = 1,
    ts: int = T0,
    restriction: str | None = None,
) -> dict[str, Any]:
    record: dict[str, Any] = {
        "content_id": content_id,
        "content_version": version,
        "decision_revision": revision,
        "outcome": outcome,
        "matched_rules": list(rules),
        "policy_id": "global",
        "policy_version": policy_version,
        "ts": ts,
    }
    if restriction:
        record["restriction"] = restriction
    return record


def test_the_latest_revision_of_each_version_wins_in_any_order() -> None:
    records = [
        decision("c1", "PENDING", revision=1, ts=T0),
        decision("c1", "ALLOW", revision=2, ts=T0 + 5),
        decision("c1", "BLOCK", revision=1, version=2, ts=T0 + 9),
        decision("c2", "PROVISIONAL_ALLOW", revision=1, ts=T0 + 1),
    ]
    for _ in range(5):
        random.Random(len(records)).shuffle(records)
        latest = Latest().extend(records).by_version
        assert {key: d.outcome for key, d in latest.items()} == {
            ("c1", 1): "ALLOW",
            ("c1", 2): "BLOCK",
            ("c2", 1): "PROVISIONAL_ALLOW",
        }


def test_the_window_leaves_out_decisions_before_since_and_after_until() -> None:
    latest = Latest(since=T0, until=T0 + 100).extend(
        [
            decision("early", "BLOCK", ts=T0 - 1),
            decision("in", "ALLOW", ts=T0),
            decision("in", "BLOCK", revision=2, ts=T0 + 101),  # after until: not seen
        ]
    )
    assert {key: d.outcome for key, d in latest.by_version.items()} == {("in", 1): "ALLOW"}


def sides() -> tuple[Latest, Latest, dict[tuple[str, int], dict[str, str]]]:
    active = Latest().extend(
        [
            decision("a", "ALLOW"),
            decision("b", "RESTRICT", rules=("nsfw-age-gate",), restriction="age_gate"),
            decision("c", "ALLOW"),
            decision("d", "PENDING"),
            decision("only-active", "ALLOW"),
        ]
    )
    candidate = Latest().extend(
        [
            decision("a", "ALLOW", policy_version=2),
            decision("b", "BLOCK", rules=("nsfw-block-public", "nsfw-age-gate"), policy_version=2),
            decision("c", "RESTRICT", rules=("offensive-limit",), restriction="reduced_reach"),
            decision("d", "PENDING", policy_version=2, revision=3),
            decision("only-candidate", "BLOCK", policy_version=2),
        ]
    )
    facts = {
        ("a", 1): {"surface": "comment", "region": "DE", "modality": "text"},
        ("b", 1): {"surface": "public_post", "region": "DE", "modality": "image"},
        ("c", 1): {"surface": "comment", "region": "US", "modality": "text"},
    }
    return active, candidate, facts


def test_changed_outcomes_by_transition_rule_surface_and_region() -> None:
    active, candidate, facts = sides()
    result = compare(active.by_version, candidate.by_version, facts)
    assert (result.compared, result.changed) == (4, 2)
    assert result.fraction == Fraction(1, 2)
    assert dict(result.transitions) == {
        "RESTRICT:age_gate->BLOCK": 1,
        "ALLOW->RESTRICT:reduced_reach": 1,
    }
    assert dict(result.rules_gained) == {"nsfw-block-public": 1, "offensive-limit": 1}
    assert dict(result.rules_lost) == {}
    surfaces = {k: (s.changed, s.compared) for k, s in result.slices["surface"].items()}
    assert surfaces == {"comment": (1, 2), "public_post": (1, 1), "unknown": (0, 1)}
    regions = {k: (s.changed, s.compared) for k, s in result.slices["region"].items()}
    assert regions == {"DE": (1, 2), "US": (1, 1), "unknown": (0, 1)}
    assert [c.candidate.ref for c in result.new_blocks] == ["b@1"]
    # One-sided versions are counted and shown, never silently dropped.
    assert result.active_only == [("only-active", 1)]
    assert result.candidate_only == [("only-candidate", 1)]
    text = "\n".join(render(result, Fraction(1, 50)))
    assert "changed outcomes: 2 of 4 (50.00%, limit 2.00%)" in text
    assert "new BLOCKs: 1 (b@1)" in text
    assert "b@1: RESTRICT:age_gate->BLOCK (public_post, DE, image)" in text
    assert "+nsfw-block-public 1" in text
    assert "by surface: comment 1/2, public_post 1/1, unknown 0/1" in text
    assert "decided by the active side only: 1 (only-active@1)" in text
    assert "decided by the candidate only: 1 (only-candidate@1)" in text
    assert summary(result, Fraction(1, 50))["changed_fraction"] == 0.5


def test_a_restriction_change_is_a_changed_outcome_and_lost_rules_are_counted() -> None:
    active = Latest().extend([decision("x", "RESTRICT", rules=("r1",), restriction="age_gate")])
    candidate = Latest().extend([decision("x", "RESTRICT", rules=("r2",), restriction="blur")])
    result = compare(active.by_version, candidate.by_version)
    assert result.changed == 1 and result.new_blocks == []
    assert (dict(result.rules_gained), dict(result.rules_lost)) == ({"r2": 1}, {"r1": 1})


@pytest.mark.parametrize(
    ("changed", "compared", "limit", "within"),
    [
        (1, 50, "2%", True),  # exactly at the limit promotes
        (2, 50, "2%", False),
        (1, 50, "0.02", True),
        (0, 10, "0%", True),
        (1, 10, "0", False),
        (0, 0, "100%", False),  # nothing compared never promotes
    ],
)
def test_within_the_limit(changed: int, compared: int, limit: str, within: bool) -> None:
    active = Latest().extend(decision(f"c{i}", "ALLOW") for i in range(compared))
    candidate = Latest().extend(
        decision(f"c{i}", "BLOCK" if i < changed else "ALLOW") for i in range(compared)
    )
    assert compare(active.by_version, candidate.by_version).within(parse_share(limit)) is within


@pytest.mark.parametrize(
    ("text", "share"),
    [
        ("2%", Fraction(1, 50)),
        (" 2.5 % ", Fraction(1, 40)),
        ("0.02", Fraction(1, 50)),
        ("0", Fraction(0)),
        ("1", Fraction(1)),
        ("100%", Fraction(1)),
    ],
)
def test_shares(text: str, share: Fraction) -> None:
    assert parse_share(text) == share


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("abc", "not a share: write a percentage such as 2% or a fraction such as 0.02"),
        ("", "not a share"),
        ("%", "not a share"),
        ("nan", "not a share"),
        ("inf%", "not a share"),
        ("2", "out of range: a share between 0 and 1 (or a percentage such as 2%)"),
        ("-1%", "out of range: a share between 0% and 100%"),
        ("150%", "out of range"),
    ],
)
def test_bad_shares_say_what_is_wrong(text: str, message: str) -> None:
    with pytest.raises(ThresholdError, match=message.replace("(", r"\(").replace(")", r"\)")):
        parse_share(text)


def test_facts_of_an_index_entry_or_upsert_and_not_of_a_delete() -> None:
    upsert = {"content_id": "c", "content_version": 2, "surface": "dm", "region": "FR"}
    assert facts_of(upsert) == (("c", 2), {"surface": "dm", "region": "FR"})
    assert facts_of({"content_id": "c", "content_version": 3, "type": "delete"}) is None
    assert facts_of({"content_version": 1}) is None


@given(
    st.lists(
        st.tuples(st.integers(0, 5), st.integers(1, 4), st.sampled_from(["ALLOW", "BLOCK"])),
        max_size=30,
    )
)
def test_comparing_a_side_with_itself_changes_nothing(rows: list[tuple[int, int, str]]) -> None:
    records = [decision(f"c{c}", outcome, revision=r, ts=T0 + r) for c, r, outcome in rows]
    side = Latest().extend(records).by_version
    result = compare(side, side)
    assert result.changed == 0 and result.compared == len(side)
    assert not result.active_only and not result.candidate_only
