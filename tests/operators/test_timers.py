"""The time rules of modstream/moderation/timers.py on the live path (issue 32): a backlog's reached
deadlines and provisional expiries are decided once the job is live, with replay's decisions,
and every wait ends at a time the test computes (docs/moderation.md, "Time", "Deadlines")."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from modstream.moderation.step import overdue_since
from modstream.testing.records import T0
from modstream.testing.versions import Version, image, image_evidence, with_clock

HOUR = 3_600_000
DAY = 86_400_000
GRACE = 5_000  # modstream/testing/versions.py with_clock: the evidence grace
IMAGE_DEADLINE = 30_000  # tests/operators/policy_builders.py: global.yaml's image deadline
LAG_MS = 2_000  # how far a live job's event time trails its clock here


def replayed(build: Any) -> list[dict[str, Any]]:
    """The decisions replay gives: no clock, every timer fired in event-time order."""
    version = Version()
    build(version)
    version.fire_until(T0 + 400 * DAY)
    return version.decisions


def live_after(build: Any, behind_ms: int, lag_ms: int = LAG_MS) -> tuple[Version, int]:
    """The same input read `behind_ms` after its `ts` by a live job: event time jumps from the
    backlog to the clock (every timer up to it fires, the clock standing still), then follows
    the clock `LAG_MS` behind. Returns the version and the clock at which event time became
    live."""
    live_at = T0 + behind_ms
    version = Version(with_clock(live_at))
    build(version)
    fire_live(version, live_at - lag_ms, lag_ms)
    return version, live_at


def fire_live(version: Version, until: int, lag_ms: int = LAG_MS) -> None:
    """Fire every timer up to `until` as a live job `lag_ms` behind the clock would."""
    while due := sorted(t for t in version.timers if t <= until):
        clock = max(version.ctx.clock_ms or 0, due[0] + lag_ms)
        version.ctx = dataclasses.replace(version.ctx, clock_ms=clock)
        version.fire(due[0])


def low_risk(version: Version) -> None:
    # A text on a DM: PROVISIONAL_ALLOW at the fast gate, its detector never answers (media is
    # never provisional before its integrity gate: issue 27, point 9).
    version.upload(surface="dm", audience="adult")


def low_risk_image(version: Version) -> None:
    version.upload(**image(surface="comment"))  # PENDING until nsfw, which never answers
    version.send("detector.results", image_evidence("c-1", T0 + 1)[1])  # media_check only


def high_risk(version: Version) -> None:
    version.upload(**image(surface="public_post"))  # PENDING; no detector ever answers


def answered(version: Version) -> None:
    version.upload(**image(surface="comment"))
    for record in image_evidence("c-1", T0 + 10):
        version.send("detector.results", record)


def decided(decisions: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    keys = ("decision_revision", "outcome", "state", "trigger", "ts", "reasons")
    return [tuple(str(d.get(k)) for k in keys) for d in decisions]


# Behind by two hours (past the provisional TTL of one hour), by 40 days (past the 30-day state
# TTL), by 11 months (the 2026-01-01 feed read in December).
BEHIND = [2 * HOUR, 40 * DAY, 335 * DAY]


@pytest.mark.parametrize("behind_ms", BEHIND, ids=["2h", "40d", "11mo"])
@pytest.mark.parametrize(
    "build", [low_risk, low_risk_image, high_risk, answered], ids=lambda b: b.__name__
)
def test_a_backlog_version_is_decided_as_replay_once_live_within_the_bound(
    build: Any, behind_ms: int
) -> None:
    """Once live, every reached deadline and expiry is decided with replay's revisions, by
    the clock at which event time became live + the deadline + twice the grace (the deadline's
    wait, then the expiry's) + the lag of event time behind the clock."""
    version, live_at = live_after(build, behind_ms)
    bound = live_at + IMAGE_DEADLINE + 2 * GRACE + 2 * LAG_MS
    fire_live(version, bound - LAG_MS)
    assert decided(version.decisions) == decided(replayed(build))
    assert version.state is not None and overdue_since(version.state) is None


def test_an_expiry_reached_while_the_deadline_waits_comes_after_it_as_in_replay() -> None:
    """Found on the real broker: the fast gate's expiry (upload + 1 h), reached while catching
    up, waited the grace; the deadline (upload + 30 s) waited the deadline + grace, so the expiry
    decided first, at the fast gate's `expires_ts`, and the deadline's PROVISIONAL_ALLOW never
    came."""
    version, _ = live_after(low_risk, 2 * HOUR)
    assert version.state is not None
    assert version.state.deadline_timer is not None and version.state.expiry_timer is None
    assert [d["trigger"] for d in version.decisions] == ["fast_gate"]


def test_the_state_ttl_reached_while_a_deadline_waits_retires_only_after_it() -> None:
    """Found by the issue's feed: uploads 11 months old. When event time jumped to live, the
    deadline and expiry began to wait and the 30-day state TTL, reached at once, retired the
    version: its waiting timers were dropped and it was never decided."""
    version, live_at = live_after(low_risk, 335 * DAY)
    assert version.state is not None and not version.state.retired
    assert version.state.ttl_timer >= version.state.deadline_timer
    fire_live(version, live_at + HOUR)
    assert version.state is not None and version.state.retired
    assert [d["trigger"] for d in version.decisions] == ["fast_gate", "deadline", "deadline"]


def test_the_wait_of_a_reached_deadline_has_a_computable_end() -> None:
    """Reached while catching up at clock C: decided by C + deadline + grace once live, never
    re-armed past it (the processing time it waits for is event time the job has reached)."""
    version, live_at = live_after(high_risk, 2 * HOUR)
    assert version.state is not None
    assert version.state.deadline_timer == live_at + IMAGE_DEADLINE + GRACE
    assert overdue_since(version.state) == T0 + IMAGE_DEADLINE
    fire_live(version, live_at + IMAGE_DEADLINE + GRACE)
    assert (version.last["trigger"], version.last["ts"]) == ("deadline", T0 + IMAGE_DEADLINE)
    assert overdue_since(version.state) is None


@given(
    # Older than the deadline and the provisional TTL after it: both reached once live.
    behind_ms=st.integers(min_value=HOUR + IMAGE_DEADLINE + 30_001, max_value=400 * DAY),
    lag_ms=st.integers(min_value=0, max_value=30_000),
    build=st.sampled_from([low_risk, high_risk, answered]),
)
@settings(max_examples=60, deadline=None)
def test_every_wait_ends_by_the_bound_whatever_the_backlogs_age_and_the_lag(
    behind_ms: int, lag_ms: int, build: Any
) -> None:
    """However old the backlog and however far (within the live window) event time trails the
    clock once live: replay's decisions by live + deadline + 2 x grace + 2 x lag, and no timer
    of a deadline or expiry left armed after it (nothing waits on)."""
    version, live_at = live_after(build, behind_ms, lag_ms)
    fire_live(version, live_at + IMAGE_DEADLINE + 2 * GRACE + lag_ms, lag_ms)
    assert decided(version.decisions) == decided(replayed(build))
    assert version.state is not None and overdue_since(version.state) is None
