"""The exposure window of one content item (modstream/moderation/exposure.py): measured once per
version from its first showing to the restriction that took effect, in any order of its three
inputs."""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from modstream.contract.registry import validate
from modstream.moderation.exposure import (
    MAX_WAITING,
    STATE_TTL_MS,
    TOPIC,
    ExposureResult,
    on_decision,
    on_timer,
    on_upsert,
    on_visibility,
)
from modstream.testing.records import T0

Step = Callable[[Any, dict[str, Any], int], ExposureResult]


def upsert(version: int = 1, surface: str = "public_post", region: str = "DE") -> dict[str, Any]:
    return {"content_id": "c-1", "content_version": version, "surface": surface, "region": region}


def decision(
    revision: int,
    outcome: str,
    trigger: str = "report",
    version: int = 1,
    state: str = "blocked",
) -> dict[str, Any]:
    return {
        "content_id": "c-1",
        "content_version": version,
        "decision_revision": revision,
        "outcome": outcome,
        "trigger": trigger,
        "state": state,
        "ts": T0,
    }


def seen(revision: int, visibility: str, at: int, version: int = 1) -> dict[str, Any]:
    return {
        "content_id": "c-1",
        "content_version": version,
        "decision_revision": revision,
        "visibility": visibility,
        "ts": at,
    }


def run(steps: list[tuple[Step, dict[str, Any]]], state: Any = None) -> tuple[Any, list[Any]]:
    """Every step in order, the state through JSON as the adapter keeps it; the records made
    and the unexposed labels, in order."""
    made: list[Any] = []
    for now, (step, record) in enumerate(steps):
        result = step(state, record, now)
        state = json.loads(json.dumps(result.state)) if result.state is not None else None
        made += [("exposure", r) for _, _, r in result.outputs]
        if result.unexposed is not None:
            made.append(("unexposed", result.unexposed))
    return state, made


# Allowed at once, reported by three users, blocked on review: shown at T0, hidden 90 s later.
REPORTED = [
    (on_upsert, upsert()),
    (on_decision, decision(1, "ALLOW", "fast_gate", state="approved")),
    (on_visibility, seen(0, "pending", T0 - 500)),
    (on_visibility, seen(1, "public", T0)),
    (on_visibility, seen(1, "public", T0 + 5_000)),  # the same revision reported again
    (on_decision, decision(2, "BLOCK", "review")),
    (on_visibility, seen(2, "hidden", T0 + 90_000)),
]


def test_a_shown_version_blocked_later_is_measured_once_with_its_labels() -> None:
    state, made = run(REPORTED)
    assert made == [
        (
            "exposure",
            {
                "content_id": "c-1",
                "content_version": 1,
                "decision_revision": 2,
                "outcome": "BLOCK",
                "surface": "public_post",
                "region": "DE",
                "trigger": "review",
                "shown_visibility": "public",
                "shown_ts": T0,
                "restricted_visibility": "hidden",
                "restricted_ts": T0 + 90_000,
                "exposure_ms": 90_000,
                "ts": T0 + 90_000,
            },
        )
    ]
    validate(TOPIC, made[0][1])  # the record is what schemas/ says enforcement.exposure holds
    # Seen again (a restarted enforce job re-sends the visibility of acknowledged actions, a
    # repair re-applies the revision): nothing is measured twice.
    _, again = run([(on_visibility, seen(2, "hidden", T0 + 200_000)), *REPORTED[4:]], state)
    assert again == []


VISIBILITY_STEPS = [i for i, (step, _) in enumerate(REPORTED) if step is on_visibility]


@given(st.permutations(range(len(REPORTED))))
def test_any_order_of_the_three_topics_measures_the_same_window(shuffled: list[int]) -> None:
    """The three topics interleave in any order; content.visibility keeps its own (one
    producer, keyed by content_id: one partition)."""
    in_order = iter(VISIBILITY_STEPS)
    order = [next(in_order) if i in VISIBILITY_STEPS else i for i in shuffled]
    _, made = run([REPORTED[i] for i in order])
    assert [(kind, r["exposure_ms"], r["trigger"]) for kind, r in made] == [
        ("exposure", 90_000, "review")
    ]
    # The labels are those known when it is measured: the upload's, once it came.
    measured_at = max(order.index(5), order.index(6))  # the decision and the drop both known
    known = order.index(0) < measured_at
    assert made[0][1]["surface"] == ("public_post" if known else "unknown")


def test_a_restriction_lowers_public_to_limited_and_a_later_block_is_not_measured_again() -> None:
    _, made = run(
        [
            (on_upsert, upsert(surface="comment", region="BR")),
            (on_visibility, seen(1, "public", T0)),
            (on_decision, decision(2, "RESTRICT", "evidence", state="restricted")),
            (on_visibility, seen(2, "limited", T0 + 4_000)),
            (on_decision, decision(3, "BLOCK", "review")),
            (on_visibility, seen(3, "hidden", T0 + 9_000)),
        ]
    )
    assert [(k, r["outcome"], r["exposure_ms"], r["restricted_visibility"]) for k, r in made] == [
        ("exposure", "RESTRICT", 4_000, "limited")
    ]
    assert made[0][1]["surface"] == "comment" and made[0][1]["region"] == "BR"


def test_a_limited_version_blocked_later_is_exposed_from_its_limited_showing() -> None:
    _, made = run(
        [
            (on_visibility, seen(1, "limited", T0)),
            (on_decision, decision(2, "BLOCK", "appeal")),
            (on_visibility, seen(2, "hidden", T0 + 1_500)),
        ]
    )
    record = made[0][1]
    assert (record["shown_visibility"], record["exposure_ms"]) == ("limited", 1_500)
    assert (record["surface"], record["region"]) == ("unknown", "unknown")  # no upload seen


def test_a_version_restricted_before_it_was_shown_has_no_exposure_and_counts_once() -> None:
    state, made = run(
        [
            (on_upsert, upsert()),
            (on_decision, decision(1, "PENDING", "fast_gate", state="scanning")),
            (on_visibility, seen(1, "pending", T0)),
            (on_decision, decision(2, "BLOCK", "evidence")),
            (on_visibility, seen(2, "hidden", T0 + 800)),
            (on_visibility, seen(2, "hidden", T0 + 900)),
        ]
    )
    assert made == [
        ("unexposed", {"surface": "public_post", "region": "DE", "trigger": "evidence"})
    ]
    # Overturned on appeal and shown, then blocked again: that exposure is measured.
    _, later = run(
        [
            (on_decision, decision(3, "ALLOW", "appeal", state="approved")),
            (on_visibility, seen(3, "public", T0 + 10_000)),
            (on_decision, decision(4, "BLOCK", "review")),
            (on_visibility, seen(4, "hidden", T0 + 13_000)),
        ],
        state,
    )
    assert [(k, r.get("exposure_ms")) for k, r in later] == [("exposure", 3_000)]


@pytest.mark.parametrize(
    ("outcome", "state"),
    [("ALLOW", "deleted"), ("RESTRICT", "deleted"), ("PENDING", "pending_review")],
)
def test_a_deletion_or_a_hold_is_not_a_restriction(outcome: str, state: str) -> None:
    _, made = run(
        [
            (on_visibility, seen(1, "public", T0)),
            (on_decision, decision(2, outcome, "delete", state=state)),
            (on_visibility, seen(2, "hidden" if state == "deleted" else "pending", T0 + 50)),
        ]
    )
    assert made == []


def test_a_new_version_starts_afresh_and_records_of_older_ones_change_nothing() -> None:
    state, made = run(
        [
            (on_upsert, upsert(version=1)),
            (on_visibility, seen(1, "public", T0)),
            (on_upsert, upsert(version=2, surface="profile")),
            (on_visibility, seen(1, "hidden", T0 + 100)),  # the old version withdrawn
            (on_decision, decision(1, "BLOCK", version=1)),
            (on_visibility, seen(1, "public", T0 + 200, version=2)),
            (on_decision, decision(2, "BLOCK", "report", version=2)),
            (on_visibility, seen(2, "hidden", T0 + 700, version=2)),
        ]
    )
    assert [(r["content_version"], r["surface"], r["exposure_ms"]) for _, r in made] == [
        (2, "profile", 500)
    ]
    assert state["version"] == 2


def test_drops_waiting_for_their_decision_are_bounded() -> None:
    steps: list[tuple[Step, dict[str, Any]]] = [(on_visibility, seen(1, "public", T0))]
    for revision, visibility in zip(range(2, 30), itertools.cycle(["hidden", "public"])):
        steps.append((on_visibility, seen(revision, visibility, T0 + revision)))
    state, made = run(steps)
    assert made == [] and len(state["waiting"]) == MAX_WAITING


def test_the_state_is_forgotten_after_its_ttl_and_kept_while_touched() -> None:
    first = on_visibility(None, seen(1, "public", T0), 100)
    assert first.timers == [100 + STATE_TTL_MS]
    touched = on_decision(first.state, decision(2, "BLOCK"), 5_000)
    assert touched.timers == []  # one expiry timer at a time
    rearmed = on_timer(touched.state, 100 + STATE_TTL_MS)
    assert rearmed.state is not None and rearmed.timers == [5_000 + STATE_TTL_MS]
    assert on_timer(rearmed.state, 5_000 + STATE_TTL_MS).state is None


def test_nothing_is_kept_for_an_item_that_was_neither_shown_nor_restricted() -> None:
    assert on_decision(None, decision(1, "ALLOW", "fast_gate"), 0).state is None


def test_a_drift_after_a_restriction_is_exposure_once_repaired() -> None:
    """Blocked before it was shown, then served again by a hand change (a rolled-back store)
    and hidden again by the reconciler's repair of the same revision: users saw it meanwhile."""
    _, made = run(
        [
            (on_decision, decision(2, "BLOCK", "evidence")),
            (on_visibility, seen(2, "hidden", T0)),
            (on_visibility, seen(2, "public", T0 + 1_000)),  # the drift
            (on_visibility, seen(2, "hidden", T0 + 33_000)),  # the repair applied
        ]
    )
    assert [(k, r.get("exposure_ms", r.get("trigger"))) for k, r in made] == [
        ("unexposed", "evidence"),
        ("exposure", 32_000),
    ]


def test_a_drop_before_the_version_was_shown_is_not_its_restriction() -> None:
    _, made = run(
        [
            (on_visibility, seen(2, "hidden", T0)),  # its decision not read yet
            (on_visibility, seen(3, "public", T0 + 1_000)),
            (on_decision, decision(2, "BLOCK", "evidence")),
            (on_decision, decision(4, "BLOCK", "report")),
            (on_visibility, seen(4, "hidden", T0 + 6_000)),
        ]
    )
    assert [(r["decision_revision"], r["exposure_ms"]) for _, r in made] == [(4, 5_000)]
