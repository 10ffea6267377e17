"""Account sanctions: one offense is one strike; thresholds; reversal and lifting."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from modstream.enforcement.sanctions import DAY_MS, on_decision, on_decisions, on_timer, strike_id
from modstream.testing.records import T0

STRIKES: dict[str, Any] = {
    "reasons": ["harassment", "sexual_content"],
    "window_days": 90,
    "sanctions": [
        {"at": 3, "sanction": "posting_suspended", "duration_ms": DAY_MS},
        {"at": 5, "sanction": "account_suspended", "duration_ms": None},
    ],
}


def decision(
    content_id: str = "c-1",
    *,
    outcome: str = "BLOCK",
    reasons: tuple[str, ...] = ("harassment",),
    trigger: str = "evidence",
    revision: int = 1,
    version: int = 1,
    at: int = T0,
) -> dict[str, Any]:
    return {
        "content_id": content_id,
        "content_version": version,
        "decision_revision": revision,
        "outcome": outcome,
        "reasons": list(reasons),
        "trigger": trigger,
        "policy_id": "global",
        "policy_version": 1,
        "state": "blocked",
        "ts": at,
    }


class Account:
    def __init__(self, strikes: dict[str, Any] | None = STRIKES) -> None:
        self.state: dict[str, Any] | None = None
        self.actions: list[dict[str, Any]] = []
        self.timers: list[int] = []
        self.strikes = strikes

    def decide(self, record: dict[str, Any]) -> None:
        result = on_decision(self.state, "u-1", record, self.strikes)
        self.state = result.state
        self.actions += [r for _, _, r in result.outputs]
        self.timers += result.timers

    def sanctions(self) -> list[str]:
        return [a["sanction"] for a in self.actions]


def test_a_violation_is_one_strike_with_the_contract_intent_id() -> None:
    account = Account()
    account.decide(decision())
    [strike] = account.actions
    assert strike["sanction"] == "strike" and strike["strike_count"] == 1
    assert strike["action_id"] == strike_id("u-1", "c-1", "global", T0)
    assert strike["reason"] == "harassment" and strike["user_id"] == "u-1"


def test_the_same_violation_decided_again_and_again_is_one_strike() -> None:
    account = Account()
    account.decide(decision())
    account.decide(decision())  # a duplicate
    account.decide(decision(revision=2, at=T0 + 5))  # a retry with a new revision
    account.decide(decision(revision=3, trigger="reevaluation", at=T0 + 3 * DAY_MS))
    account.decide(decision(version=2, at=T0 + 4 * DAY_MS))  # an edit, still the same offense
    assert account.sanctions() == ["strike"]


def test_no_strike_for_other_reasons_outcomes_or_without_a_strikes_section() -> None:
    account = Account()
    account.decide(decision(reasons=("spam",)))
    account.decide(decision("c-2", outcome="PENDING"))
    account.decide(decision("c-3", outcome="ALLOW", reasons=()))
    Account(strikes=None).decide(decision())
    assert account.actions == [] and account.state is None


def test_a_restricted_violation_counts_too() -> None:
    account = Account()
    account.decide(decision(outcome="RESTRICT"))
    assert account.sanctions() == ["strike"]


def test_thresholds_bring_sanctions_and_an_overturn_reverses_and_lifts() -> None:
    account = Account()
    for index in range(3):
        account.decide(decision(f"c-{index}", at=T0 + index))
    assert account.sanctions() == ["strike", "strike", "strike", "posting_suspended"]
    suspended = account.actions[-1]
    assert suspended["strike_count"] == 3 and suspended["expires_ts"] == T0 + 2 + DAY_MS
    account.decide(
        decision("c-1", outcome="ALLOW", reasons=(), trigger="appeal", revision=2, at=T0 + 5)
    )
    assert account.sanctions()[-2:] == ["strike_reversed", "sanction_lifted"]
    assert [a["strike_count"] for a in account.actions[-2:]] == [2, 2]
    assert len({a["action_id"] for a in account.actions}) == len(account.actions)
    # A later re-evaluation that agrees with the human does not strike again.
    account.decide(decision("c-1", trigger="reevaluation", revision=3, at=T0 + 10))
    assert account.sanctions().count("strike") == 3


def test_an_automated_change_or_another_version_does_not_reverse() -> None:
    account = Account()
    account.decide(decision())
    account.decide(decision(outcome="ALLOW", reasons=(), trigger="reevaluation", revision=2))
    account.decide(decision(outcome="ALLOW", reasons=(), trigger="review", version=2))
    assert account.sanctions() == ["strike"]


def test_strikes_outside_the_window_do_not_count_and_the_state_is_cleared() -> None:
    account = Account()
    account.decide(decision("c-1"))
    account.decide(decision("c-2", at=T0 + 91 * DAY_MS))
    assert [a["strike_count"] for a in account.actions] == [1, 1]
    assert max(account.timers) == T0 + 91 * DAY_MS + 90 * DAY_MS
    result = on_timer(account.state, max(account.timers))
    assert result.state is None and result.outputs == []


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(1, 4), st.sampled_from(["evidence", "reevaluation", "deadline"])),
        min_size=1,
        max_size=12,
    )
)
def test_any_sequence_of_redecisions_of_one_violation_is_one_strike(
    decisions: list[tuple[int, str]],
) -> None:
    account = Account()
    for revision, trigger in decisions:
        account.decide(decision(revision=revision, trigger=trigger, at=T0 + revision))
    assert account.sanctions() == ["strike"]


END_OF_TIME = 2**63 - 1  # the watermark at the end of input (replay, a backfill's end)


def fire_until_quiet(state: dict[str, Any] | None, timers: list[int], limit: int = 100) -> int:
    """Fire every armed timer in order, as Flink does when the watermark jumps to the end of
    time; return how many new timers the firings armed (Flink keeps one timer per key and
    instant), failing past `limit` firings: a chain that never ends."""
    armed = set(timers)
    pending, fired = sorted(armed), 0
    while pending:
        assert fired < limit, f"timer chain still running after {fired} firings"
        now = pending.pop(0)
        result = on_timer(state, now)
        assert all(timer > now for timer in result.timers), (now, result.timers)
        state, fired = result.state, fired + 1
        new = set(result.timers) - armed
        armed |= new
        pending = sorted({*pending, *new})
    return len(armed) - len(set(timers))


def suspended_without_end() -> Account:
    account = Account()
    for index in range(5):
        account.decide(decision(f"c-{index}", at=T0 + index))
    assert account.sanctions()[-1] == "account_suspended"
    assert "expires_ts" not in account.actions[-1]
    return account


def test_a_permanent_suspension_arms_no_timer_once_its_strikes_have_aged_out() -> None:
    account = suspended_without_end()
    last_strike_ends = T0 + 4 + 90 * DAY_MS
    assert account.timers[-1] == last_strike_ends
    result = on_timer(account.state, last_strike_ends)
    assert result.timers == [] and result.outputs == []
    assert result.state is not None and list(result.state["sanctions"]) == ["account_suspended"]
    assert result.state["strikes"] == []
    # A stray timer later on (a restored savepoint's) arms nothing either.
    assert on_timer(result.state, last_strike_ends + 90 * DAY_MS).timers == []


def test_every_timer_chain_ends_when_event_time_jumps_to_the_end() -> None:
    account = suspended_without_end()
    assert fire_until_quiet(account.state, [*account.timers, END_OF_TIME]) == 0
    posting_only = Account()
    for index in range(3):
        posting_only.decide(decision(f"c-{index}", at=T0 + index))
    assert posting_only.sanctions()[-1] == "posting_suspended"
    assert fire_until_quiet(posting_only.state, [*posting_only.timers, END_OF_TIME]) <= 1


def test_a_reversed_permanent_suspension_still_lifts_without_a_timer() -> None:
    account = suspended_without_end()
    state = on_timer(account.state, T0 + 4 + 90 * DAY_MS).state
    result = on_decision(
        state,
        "u-1",
        decision(
            "c-4", outcome="ALLOW", reasons=(), trigger="appeal", revision=2, at=T0 + 91 * DAY_MS
        ),
        STRIKES,
    )
    # The strike aged out of the state, so the overturn has nothing to reverse: the suspension
    # stays, and still arms no timer.
    assert result.timers == [] and result.state is not None


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 6), st.integers(0, 200 * DAY_MS), st.booleans()),
        min_size=1,
        max_size=12,
    )
)
def test_no_sequence_of_decisions_leaves_an_endless_timer_chain(
    decisions: list[tuple[int, int, bool]],
) -> None:
    account = Account()
    for content, offset, overturn in sorted(decisions, key=lambda d: d[1]):
        if overturn:
            account.decide(
                decision(
                    f"c-{content}", outcome="ALLOW", reasons=(), trigger="review", at=T0 + offset
                )
            )
        else:
            account.decide(decision(f"c-{content}", at=T0 + offset))
    assert fire_until_quiet(account.state, [*account.timers, END_OF_TIME]) <= len(decisions)


def test_decisions_emitted_together_apply_in_order_and_a_failing_one_is_set_aside() -> None:
    first = decision("c-1", at=T0)
    second = decision("c-2", at=T0 + 1)
    broken = {**decision("c-3", at=T0 + 2), "reasons": None}  # raises in on_decision
    entries = [{"decision": d, "strikes": STRIKES} for d in (second, broken, first)]
    result, failed = on_decisions(None, "u-1", entries)
    assert [r["content_id"] for _, _, r in result.outputs] == ["c-1", "c-2"]
    assert [(d["content_id"], type(e)) for d, e in failed] == [("c-3", TypeError)]
    assert result.state is not None and len(result.state["strikes"]) == 2
    assert result.timers == [T0 + 1 + 90 * DAY_MS]
