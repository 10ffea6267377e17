"""The harness's record checks and workload merge on hand-made records: each check must name
the record it finds (a check that passes everything proves nothing)."""

from __future__ import annotations

from typing import Any

from modstream.testing import faults as checks
from modstream.testing.faults import merge


def decision(cid: str, rev: int, outcome: str, ts: int, state: str = "approved") -> dict[str, Any]:
    return {
        "content_id": cid,
        "content_version": 1,
        "decision_revision": rev,
        "outcome": outcome,
        "restriction": None,
        "state": state,
        "policy_version": 1,
        "ts": ts,
    }


def action(cid: str, rev: int, ts: int = 0) -> dict[str, Any]:
    return {"content_id": cid, "content_version": 1, "decision_revision": rev, "ts": ts}


def test_a_duplicated_action_is_named_once_per_extra_copy() -> None:
    found = checks.duplicates([action("a", 1), action("a", 1), action("a", 1), action("b", 1)])
    assert found == [("a", 1, 1), ("a", 1, 1)]


def test_only_visibility_changes_need_an_action() -> None:
    decisions = [
        decision("a", 1, "PROVISIONAL_ALLOW", 1),
        decision("a", 2, "ALLOW", 2),  # still public: no action
        decision("a", 3, "BLOCK", 3),
        decision("b", 1, "BLOCK", 1),
        decision("b", 2, "BLOCK", 2, state="deleted"),  # hidden both: no action
    ]
    assert checks.revisions_needing_actions(decisions) == {("a", 1, 1), ("a", 1, 3), ("b", 1, 1)}


def test_a_lost_action_a_changed_decision_and_a_wrong_served_item_are_found() -> None:
    live = {
        "moderation.decisions": [decision("a", 1, "ALLOW", 10), decision("b", 1, "ALLOW", 10)],
        "moderation.actions": [action("a", 1, 10)],
    }
    replayed = {
        "moderation.decisions": [
            decision("a", 1, "ALLOW", 10),
            decision("b", 1, "BLOCK", 10),
            decision("a", 2, "BLOCK", 99),  # after the cutoff: not compared
        ],
        "moderation.actions": [action("a", 1, 10), action("b", 1, 10)],
    }
    served = {"a": ("public", True), "b": ("public", False)}
    found = checks.check(live, replayed, served, cutoff_ts=50)
    assert found.missing["actions_of_visibility_changes"] == [("b", 1, 1)]
    assert [m[0] for m in found.discrepancies["final_decision_vs_replay"]] == [("b", 1)]
    # b is decided ALLOW (public) and Redis says public, but its media is not exported.
    assert found.discrepancies["served_vs_decided"] == [("b", "public", "public", False)]
    assert found.counts()["duplicates"] == 0


def test_a_lost_decision_shows_as_a_gap_and_another_path_to_the_same_end_does_not() -> None:
    live = {
        "moderation.decisions": [
            decision("a", 1, "PENDING", 10, state="scanning"),
            decision("a", 3, "BLOCK", 30, state="blocked"),  # revision 2 was lost
            decision("b", 1, "PENDING", 10, state="scanning"),
            decision("b", 2, "PENDING", 40, state="expired"),
            decision("c", 1, "PENDING", 10, state="scanning"),
            decision("c", 2, "PENDING", 20, state="expired"),
            decision("d", 1, "PENDING", 10, state="scanning"),
            decision("d", 2, "BLOCK", 20, state="blocked"),
            # e: live decided its provisional expiry after the cutoff, as replay does.
            decision("e", 1, "PROVISIONAL_ALLOW", 10, state="scanning"),
            decision("e", 2, "PENDING", 95, state="expired"),
        ],
        "moderation.actions": [
            *(action(cid, 1) for cid in "abcde"),
            action("e", 2),
            action("a", 3),
            action("d", 2),
        ],
    }
    replayed = {
        "moderation.decisions": [
            decision("a", 1, "PENDING", 10, state="scanning"),
            decision("a", 2, "ALLOW", 20),
            decision("a", 3, "BLOCK", 30, state="blocked"),
            # b: replay expired it provisionally first, then for good; live waited and went
            # there at once (same end, one revision fewer).
            decision("b", 1, "PENDING", 10, state="scanning"),
            decision("b", 2, "PROVISIONAL_ALLOW", 20, state="expired"),
            decision("b", 3, "PENDING", 40, state="expired"),
            # c: live's waiting deadline decided where replay arrives after the cutoff.
            decision("c", 1, "PENDING", 10, state="scanning"),
            decision("c", 2, "PROVISIONAL_ALLOW", 20, state="expired"),
            decision("c", 3, "PENDING", 90, state="expired"),
            # d: live's end is no decision replay ever reaches.
            decision("d", 1, "PENDING", 10, state="scanning"),
            decision("d", 2, "PROVISIONAL_ALLOW", 20, state="expired"),
            decision("e", 1, "PROVISIONAL_ALLOW", 10, state="scanning"),
            decision("e", 2, "PROVISIONAL_ALLOW", 20, state="expired"),
            decision("e", 3, "PENDING", 95, state="expired"),
        ],
    }
    served = {c: ("pending", False) for c in "bce"} | {c: ("hidden", False) for c in "ad"}
    found = checks.check(live, replayed, served, cutoff_ts=50)
    assert found.missing["revision_gaps"] == [("a", 1, 2)]
    assert [m[0] for m in found.discrepancies["final_decision_vs_replay"]] == [("d", 1)]
    assert found.counts() == {"duplicates": 0, "missing": 1, "discrepancies": 1}


def test_a_clean_run_finds_nothing() -> None:
    records = {
        "moderation.decisions": [decision("a", 1, "BLOCK", 10)],
        "moderation.actions": [action("a", 1, 10)],
    }
    found = checks.check(records, records, {"a": ("hidden", False)}, cutoff_ts=50)
    assert found.counts() == {"duplicates": 0, "missing": 0, "discrepancies": 0}


def test_merge_places_signals_by_the_newest_ts_before_them_and_keeps_early_evidence() -> None:
    def line(name: str, ts: int) -> dict[str, Any]:
        return {"topic": "t", "value": {"id": name, "ts": ts}}

    lines = [line("up1", 100), line("early-ev", 90), line("up2", 200)]
    merged = merge(lines, [line("report", 150), line("late", 500)])
    assert [item["value"]["id"] for item in merged] == ["up1", "early-ev", "report", "up2", "late"]
