"""The promotion gate's pure parts: the window, which versions can be promoted, the refusal
and what the activation record says (the broker side: tests/integration/test_policy_promote.py)."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import pytest

from modstream.cli.policy import _promotion_lines
from modstream.ops.policy_service import PolicyCliError
from modstream.ops.promotion import Candidate, candidate, duration_ms, gate, iso_ms, promotion_field
from modstream.policy.compare import Latest, compare
from modstream.policy.store import PolicyStore
from modstream.testing.policies import KEY, global_document, version_record
from modstream.testing.records import T0, TEST_KEYRING


@pytest.mark.parametrize(
    ("text", "ms"), [("24h", 86_400_000), ("90m", 5_400_000), ("7d", 604_800_000), ("1.5s", 1500)]
)
def test_durations(text: str, ms: int) -> None:
    assert duration_ms(text) == ms


@pytest.mark.parametrize("text", ["", "24", "h", "0h", "-1h", "3 weeks"])
def test_bad_durations(text: str) -> None:
    with pytest.raises(ValueError, match="is not a duration"):
        duration_ms(text)


def test_iso_times_are_utc_unless_they_name_an_offset() -> None:
    assert iso_ms("2025-11-30") == T0
    assert iso_ms("2025-11-30T00:00:00Z") == T0
    assert iso_ms("2025-11-30T01:00:00+01:00") == T0
    with pytest.raises(ValueError, match="not an ISO 8601 time"):
        iso_ms("yesterday")


def store() -> PolicyStore:
    policies = PolicyStore(TEST_KEYRING)
    for record in (
        version_record(global_document(1), ts=T0),
        version_record(global_document(2), ts=T0 + 10, mode="shadow"),
        version_record(global_document(3), ts=T0 + 20, mode="canary", canary_percent=5.0),
    ):
        policies.apply(record, KEY)
    return policies


def test_only_a_current_shadow_or_canary_version_is_a_candidate() -> None:
    policies = store()
    shadow = candidate(policies, "global", 2, "policy.rules")
    assert (shadow.mode, shadow.active, shadow.record["mode"]) == ("shadow", 1, "shadow")
    assert candidate(policies, "global", 3, "policy.rules").mode == "canary"
    with pytest.raises(PolicyCliError, match=r"global v7 is not on policy.rules"):
        candidate(policies, "global", 7, "policy.rules")
    with pytest.raises(PolicyCliError, match="global v1 is already the active version"):
        candidate(policies, "global", 1, "policy.rules")
    with pytest.raises(PolicyCliError, match=r"other v2 is not on policy\.rules"):
        candidate(policies, "other", 2, "policy.rules")
    # An active v4 retires both candidates.
    policies.apply(version_record(global_document(4), ts=T0 + 30), KEY)
    with pytest.raises(PolicyCliError, match=r"v2 is not a shadow or canary .*candidates: none"):
        candidate(policies, "global", 2, "policy.rules")


def comparison(changed: int, compared: int) -> Any:
    def side(outcome: str, count: int) -> dict[tuple[str, int], Any]:
        records = [
            {
                "content_id": f"c{i}",
                "content_version": 1,
                "decision_revision": 1,
                "outcome": outcome if i < count else "ALLOW",
                "matched_rules": [],
                "policy_version": 1,
                "ts": T0,
            }
            for i in range(compared)
        ]
        return Latest().extend(records).by_version

    return compare(side("ALLOW", 0), side("BLOCK", changed))


SHADOW = Candidate("global", 2, "shadow", {}, 1)


def test_the_gate_refuses_past_the_limit_names_both_and_is_forced_only_with_a_reason() -> None:
    limit = Fraction(1, 50)
    assert gate(comparison(1, 50), SHADOW, limit, since=T0, force=False, reason=None) is False
    with pytest.raises(PolicyCliError) as refused:
        gate(comparison(3, 50), SHADOW, limit, since=T0, force=False, reason=None)
    assert "refused: global v2 changes 3 of 50 outcomes (6.00%), above the limit 2.00%" in str(
        refused.value
    )
    with pytest.raises(PolicyCliError, match="--force needs --reason TEXT"):
        gate(comparison(3, 50), SHADOW, limit, since=T0, force=True, reason="  ")
    assert gate(comparison(3, 50), SHADOW, limit, since=T0, force=True, reason="fix") is True


def test_no_comparison_no_promotion_unless_forced() -> None:
    with pytest.raises(PolicyCliError, match="no shadow decision of global v2 since") as refused:
        gate(comparison(0, 0), SHADOW, Fraction(1), since=T0, force=False, reason=None)
    assert "since 2025-11-30T00:00:00Z" in str(refused.value)
    assert gate(comparison(0, 0), SHADOW, Fraction(1), since=T0, force=True, reason="x") is True
    only_shadow = comparison(1, 1)
    only_shadow.compared, only_shadow.candidate_only = 0, [("c0", 1)]
    with pytest.raises(PolicyCliError, match="decided by both the active policy and global v2"):
        gate(only_shadow, SHADOW, Fraction(1), since=T0, force=False, reason=None)


def test_the_promotion_field_and_how_history_shows_it() -> None:
    field = promotion_field(
        comparison(3, 50), SHADOW, Fraction(1, 50), since=T0, by="carol", forced=True, reason="ok"
    )
    assert field["forced"] is True and field["reason"] == "ok" and field["by"] == "carol"
    assert (field["changed"], field["compared"], field["changed_fraction"]) == (3, 50, 0.06)
    assert field["transitions"] == {"ALLOW->BLOCK": 3} and field["new_blocks"] == 3
    assert _promotion_lines(field) == [
        "promoted from shadow by carol: 3 of 50 outcomes changed (6.00%, limit 2.00%) "
        "since 2025-11-30T00:00:00Z",
        "FORCED past the limit by carol: ok",
    ]
    assert _promotion_lines(None) == []
