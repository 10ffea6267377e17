"""Reconciliation of desired and effective visibility for one content item."""

from __future__ import annotations

from typing import Any

from modstream.enforcement.reconcile import (
    AUDIT_MAX_MS,
    STATE_TTL_MS,
    audit_due,
    on_action,
    on_audit,
    on_timer,
    on_visibility,
)
from modstream.testing.records import T0

SLA = 1_000


def action(revision: int, visibility: str, version: int = 1) -> dict[str, Any]:
    return {
        "action_id": f"a-{version}-{revision}",
        "content_id": "c-1",
        "content_version": version,
        "decision_revision": revision,
        "outcome": "BLOCK",
        "visibility": visibility,
        "policy_version": 1,
        "ts": T0,
    }


def seen(revision: int, visibility: str, version: int = 1) -> dict[str, Any]:
    return {
        "content_id": "c-1",
        "content_version": version,
        "decision_revision": revision,
        "visibility": visibility,
        "ts": T0,
    }


def test_agreement_measures_the_lag_and_opens_nothing() -> None:
    result = on_action(None, action(1, "hidden"), 100, SLA)
    assert result.open and result.timers == [100 + STATE_TTL_MS, 100 + SLA]
    done = on_visibility(result.state, seen(1, "hidden"), 350, SLA)
    assert not done.open and done.lag_ms == 250
    assert on_timer(done.state, 100 + SLA, SLA, 3).outputs == []


def test_a_gap_older_than_the_sla_is_repaired_then_alerted() -> None:
    state = on_action(None, action(2, "hidden"), 0, SLA).state
    state = on_visibility(state, seen(2, "hidden"), 10, SLA).state
    drifted = on_visibility(state, seen(2, "public"), 20, SLA)  # changed by hand
    assert drifted.open and drifted.timers == [20 + SLA]  # the expiry timer is armed already
    early = on_timer(drifted.state, 500, SLA, 2)
    assert early.outputs == [] and early.timers == [20 + SLA]
    repairs = []
    state = drifted.state
    for now in (1_020, 2_020, 3_020, 4_020):
        fired = on_timer(state, now, SLA, 2)
        state = fired.state
        repairs += [(topic, record) for topic, _, record in fired.outputs]
    kinds = [(t, r.get("action")) for t, r in repairs]
    assert kinds == [
        ("moderation.discrepancies", "retry"),
        ("enforcement.repairs", None),
        ("moderation.discrepancies", "retry"),
        ("enforcement.repairs", None),
        ("moderation.discrepancies", "alert"),
    ]
    repair = repairs[1][1]
    assert repair["repair_of"] == "a-1-2" and repair["action_id"] != "a-1-2"
    assert (repairs[0][1]["desired_visibility"], repairs[0][1]["effective_visibility"]) == (
        "hidden",
        "public",
    )
    fixed = on_visibility(state, seen(2, "hidden"), 5_000, SLA)
    assert not fixed.open and fixed.state["attempts"] == 0


def test_an_older_action_or_a_newer_upload_is_no_discrepancy() -> None:
    state = on_action(None, action(3, "hidden"), 0, SLA).state
    state = on_action(state, action(2, "public"), 1, SLA).state  # out of order: ignored
    assert state["desired"]["decision_revision"] == 3
    newer = on_visibility(state, seen(0, "pending", version=2), 5, SLA)
    assert not newer.open  # the new version waits for its own action


def test_a_quiet_item_is_forgotten_after_the_ttl_once_nothing_is_left_to_do() -> None:
    first = on_action(None, action(1, "hidden"), 0, SLA)
    assert first.timers[0] == STATE_TTL_MS  # one expiry timer, armed with the first input
    agreed = on_visibility(first.state, seen(1, "hidden"), 10, SLA)
    assert agreed.timers == []  # not one more per input
    early = on_timer(agreed.state, STATE_TTL_MS, SLA, 3)
    assert early.state is not None and early.timers == [10 + STATE_TTL_MS]  # input came since
    gone = on_timer(early.state, 10 + STATE_TTL_MS, SLA, 3)
    assert gone.state is None and gone.outputs == []


def test_an_open_gap_keeps_its_state_until_the_alert_then_it_may_go() -> None:
    state = on_action(None, action(1, "hidden"), 0, SLA).state  # never enforced
    fired = on_timer(state, STATE_TTL_MS, SLA, 0)  # the expiry and the SLA at once
    assert fired.state is not None
    assert [r["action"] for _, _, r in fired.outputs] == ["alert"]
    assert fired.timers == [STATE_TTL_MS + SLA]
    assert on_timer(fired.state, STATE_TTL_MS + SLA, SLA, 0).state is None


AUDIT = 500


def test_a_lower_applied_revision_is_a_gap_even_with_the_same_visibility() -> None:
    state = on_action(None, action(3, "hidden"), 0, SLA).state
    assert on_visibility(state, seen(1, "hidden"), 10, SLA).open  # revision 3 was lost
    assert not on_visibility(state, seen(3, "hidden"), 20, SLA).open


def test_audits_back_off_while_clean_and_find_a_rolled_back_state() -> None:
    first = on_action(None, action(2, "hidden"), 0, SLA, AUDIT)
    assert first.timers == [STATE_TTL_MS, AUDIT, SLA]
    state = on_visibility(first.state, seen(2, "hidden"), 10, SLA, AUDIT).state
    assert not audit_due(state, AUDIT - 1) and audit_due(state, AUDIT)
    clean = on_audit(state, seen(2, "hidden"), AUDIT, SLA, AUDIT)
    assert not clean.open and clean.timers == [AUDIT + 2 * AUDIT]  # doubled
    assert clean.state["touched"] == 10  # an audit keeps nothing alive
    # Redis restarted from an older AOF: the served state is revision 1, public.
    rolled = on_audit(clean.state, seen(1, "public"), 3 * AUDIT, SLA, AUDIT)
    assert rolled.open and rolled.timers == [3 * AUDIT + SLA, 3 * AUDIT + AUDIT]
    fired = on_timer(rolled.state, 3 * AUDIT + SLA, SLA, 3)
    kinds = [(topic, record.get("action")) for topic, _, record in fired.outputs]
    assert kinds == [("moderation.discrepancies", "retry"), ("enforcement.repairs", None)]
    assert fired.outputs[1][2]["decision_revision"] == 2


def test_the_audit_interval_is_capped_and_an_unreadable_item_changes_nothing() -> None:
    state = on_action(None, action(1, "public"), 0, SLA, AUDIT).state
    state = on_visibility(state, seen(1, "public"), 1, SLA, AUDIT).state
    now = AUDIT
    for _ in range(20):
        state = on_audit(state, seen(1, "public"), now, SLA, AUDIT).state
        now = state["audit_at"]
    assert state["audit_every"] == AUDIT_MAX_MS
    unknown = on_audit(state, None, now, SLA, AUDIT)
    assert not unknown.open and unknown.state["effective"]["visibility"] == "public"
    assert unknown.timers == [now + AUDIT_MAX_MS]


def test_no_audit_timer_without_audits() -> None:
    result = on_action(None, action(1, "hidden"), 0, SLA)
    assert result.timers == [STATE_TTL_MS, SLA] and "audit_at" not in result.state
