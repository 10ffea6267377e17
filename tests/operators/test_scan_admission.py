"""The scan pool's admission queue (modstream/scanning/admission.py): what it admits, sheds and
serves first, with a pool of a known capacity and injected times. No Flink."""

from __future__ import annotations

import itertools
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from modstream.scanning.admission import (
    NO_DEADLINE,
    AdmissionQueue,
    Capacity,
    Waiting,
    admission_fields,
    arrival_ms,
    budget_ms,
    priority_of,
    reported_version,
)

NOW = 1_000_000
SEQ = itertools.count()


def waiting(
    priority: str = "live",
    *,
    answer_in_ms: int = 10_000,
    arrived: int = NOW,
    content_id: str | None = None,
    modality: str = "image",
) -> Waiting:
    seq = next(SEQ)
    return Waiting(
        seq=seq,
        priority=priority,
        modality=modality,
        content_id=content_id or f"c-{seq}",
        content_version=1,
        arrived_ms=arrived,
        answer_by_ms=arrived + answer_in_ms,
    )


def pool(rps: float = 10.0) -> AdmissionQueue:
    """A pool answering `rps` requests a second: 100 ms each at 10/s."""
    return AdmissionQueue(Capacity(rps=rps))


@pytest.mark.parametrize(
    ("request_fields", "expected"),
    [
        ({"priority": "live"}, "live"),
        ({"priority": "live", "high_risk": True}, "live_high_risk"),
        ({"priority": "backfill", "high_risk": True}, "backfill"),
        ({"priority": "backfill"}, "backfill"),
    ],
)
def test_the_class_comes_from_priority_and_high_risk(
    request_fields: dict[str, object], expected: str
) -> None:
    assert priority_of(request_fields) == expected


def test_the_budget_is_the_deadline_distance_or_none() -> None:
    assert budget_ms({"ts": 100, "deadline_ts": 2_100}) == 2_000
    assert budget_ms({"ts": 100, "deadline_ts": None}) == NO_DEADLINE


def test_admits_what_the_pool_answers_in_time_and_refuses_the_rest_at_once() -> None:
    queue = pool(rps=10)  # 100 ms a request; 1 s of budget holds 10
    shed = [s for _ in range(12) for s in queue.offer(waiting(answer_in_ms=1_000), NOW)]
    assert len(queue) == 10
    assert len(shed) == 2


def test_live_is_served_before_backfill_and_high_risk_before_live() -> None:
    queue = pool()
    backfill, live, urgent = waiting("backfill"), waiting("live"), waiting("live_high_risk")
    for one in (backfill, live, urgent):
        assert queue.offer(one, NOW) == []
    taken, shed = queue.take(3, NOW)
    assert [w.seq for w in taken] == [urgent.seq, live.seq, backfill.seq]
    assert shed == []


def test_a_live_arrival_pushes_out_the_backfill_that_would_now_be_late() -> None:
    queue = pool(rps=10)
    backfills = [waiting("backfill", answer_in_ms=500) for _ in range(5)]
    assert [s for b in backfills for s in queue.offer(b, NOW)] == []
    shed = queue.offer(waiting("live", answer_in_ms=500), NOW)
    assert [w.seq for w in shed] == [backfills[-1].seq]  # the backfill now late, not the live
    assert len(queue) == 5


def test_live_is_admitted_ahead_of_a_full_backfill_queue() -> None:
    queue = pool(rps=10)
    for _ in range(10):
        queue.offer(waiting("backfill", answer_in_ms=1_000), NOW)
    live = waiting("live", answer_in_ms=200)
    assert live not in queue.offer(live, NOW)
    taken, _ = queue.take(1, NOW)
    assert taken == [live]


def test_in_flight_requests_count_as_ahead() -> None:
    queue = pool(rps=10)
    queue.in_flight = 10
    assert queue.offer(w := waiting(answer_in_ms=1_000), NOW) == [w]


def test_take_sheds_what_can_no_longer_be_answered_in_time() -> None:
    queue = pool(rps=10)
    early = waiting(answer_in_ms=300)
    later = waiting(answer_in_ms=5_000)
    queue.offer(early, NOW)
    queue.offer(later, NOW)
    taken, shed = queue.take(4, NOW + 250)  # 50 ms left, a request takes 100
    assert shed == [early]
    assert taken == [later]
    assert len(queue) == 0


def test_a_report_bumps_its_versions_waiting_requests_to_the_front() -> None:
    queue = pool()
    urgent = waiting("live_high_risk")
    others = [waiting("live") for _ in range(3)]
    reported = [waiting("backfill", content_id="c-reported") for _ in range(2)]
    for one in (urgent, *others, *reported):
        queue.offer(one, NOW)
    assert queue.bump("c-reported", 1) == 2
    taken, _ = queue.take(6, NOW)
    assert [w.seq for w in taken] == [
        *(w.seq for w in reported),
        urgent.seq,
        *(w.seq for w in others),
    ]
    assert all(w.priority == "live_high_risk" for w in taken[:3])


def test_oldest_age_per_modality_and_priority() -> None:
    queue = pool()
    queue.offer(waiting("live", arrived=NOW - 400, modality="video"), NOW)
    queue.offer(waiting("live", arrived=NOW - 100, modality="video"), NOW)
    queue.offer(waiting("backfill", arrived=NOW - 900, modality="audio"), NOW)
    assert queue.oldest_age_ms(NOW) == {("video", "live"): 400, ("audio", "backfill"): 900}
    queue.take(3, NOW)
    assert queue.oldest_age_ms(NOW) == {}


@pytest.mark.parametrize(
    ("record_ms", "arrived"),
    [
        (NOW - 20_000, NOW - 20_000),  # waited 20 s upstream: those 20 s are spent
        (NOW, NOW),
        (NOW + 5_000, NOW),  # the writer's clock ahead of ours: no budget beyond the read
        (None, NOW),  # no record timestamp: counted from the read
    ],
)
def test_a_request_arrives_at_its_record_time_never_after_now(
    record_ms: int | None, arrived: int
) -> None:
    assert arrival_ms(record_ms, NOW) == arrived


def raw(**fields: object) -> tuple[str, str, str]:
    value = {"content_id": "c-1", "content_version": 1, "ts": 5, "deadline_ts": 30_005, **fields}
    return ("scan.requests.image", "c-1", json.dumps(value))


def test_the_budget_counts_from_the_kafka_record_not_from_the_read_nor_the_upload() -> None:
    """The upload's `ts` (5) is event time, far from the wall clock: only its distance to
    `deadline_ts` (30 s) is used, from when the request was written to Kafka."""
    read = admission_fields(raw(), seq=1, now=NOW, record_ms=NOW - 12_000)
    assert read is not None
    assert (read.arrived_ms, read.answer_by_ms) == (NOW - 12_000, NOW + 18_000)
    unstamped = admission_fields(raw(), seq=2, now=NOW)
    assert unstamped is not None and unstamped.answer_by_ms == NOW + 30_000


def test_what_waited_upstream_past_its_budget_is_refused_the_moment_it_is_read() -> None:
    """An idle pool (nothing ahead) still refuses a request whose budget ran out in Kafka,
    and admits one read as late that still has the time."""
    queue = pool(rps=10.0)
    late = admission_fields(raw(), seq=1, now=NOW, record_ms=NOW - 30_001)
    in_time = admission_fields(raw(), seq=2, now=NOW, record_ms=NOW - 29_000)
    assert late is not None and in_time is not None
    assert queue.offer(late, NOW) == [late]
    assert queue.offer(in_time, NOW) == []


def test_expire_sheds_what_ran_out_of_time_while_the_workers_were_busy() -> None:
    """Even next in line, a request answers after the work in flight: 8 requests (800 ms)
    plus its own 100 ms, so with less than 900 ms left it is shed, not scanned late."""
    queue = pool(rps=10.0)
    queue.in_flight = 8
    soon = waiting("live", answer_in_ms=1_000)
    later = waiting("live", answer_in_ms=60_000)
    assert queue.offer(soon, NOW) == [] and queue.offer(later, NOW) == []
    assert queue.expire(NOW + 100) == []  # 900 ms left: just in time
    assert queue.expire(NOW + 150) == [soon]  # 850 ms left
    assert list(queue.waiting()) == [later]


def test_capacity_is_measured_when_not_configured() -> None:
    capacity = Capacity(workers=2)
    assert capacity.seconds_per_request() == 0.0  # admits all until measured
    capacity.observe(4, 0.4)  # 100 ms a request on one worker
    assert capacity.seconds_per_request() == pytest.approx(0.05)
    capacity.observe(4, 0.8)
    assert capacity.seconds_per_request() == pytest.approx((0.1 + 0.2 * 0.1) / 2)


@settings(deadline=None)  # timed on a shared machine: no per-example deadline
@given(
    arrivals=st.lists(
        st.tuples(
            st.sampled_from(["live_high_risk", "live", "backfill"]),
            st.integers(min_value=0, max_value=3_000),
        ),
        max_size=60,
    ),
    rps=st.sampled_from([5.0, 20.0, 100.0]),
)
def test_every_request_is_either_waiting_taken_or_shed_exactly_once(
    arrivals: list[tuple[str, int]], rps: float
) -> None:
    """Nothing is lost or answered twice; what waits was predicted to make its time."""
    queue = pool(rps)
    offered = [waiting(priority, answer_in_ms=budget) for priority, budget in arrivals]
    shed: list[Waiting] = []
    for one in offered:
        shed += queue.offer(one, NOW)
    for position, one in enumerate(queue.waiting()):
        assert queue.predicted_answer(position, NOW) <= one.answer_by_ms
    taken, late = queue.take(len(offered), NOW)
    seqs = [w.seq for w in (*shed, *taken, *late)]
    assert sorted(seqs) == sorted(w.seq for w in offered)
    assert len(queue) == 0


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (
            '{"event_id":"e","report_id":"r","content_id":"c-9","content_version":2,'
            '"reporter_id":"u","reason":"spam","ts":5}',
            ("c-9", 2),
        ),
        ('{"content_id":"c-9"}', None),  # no version
        ('{"content_id":"c-9","content_version":"2"}', None),  # mistyped
        ("{oops", None),
        ("[" * 100_000 + "]" * 100_000, None),
        (None, None),
    ],
)
def test_a_report_names_the_version_to_bump_or_nothing(
    value: str | None, expected: tuple[str, int] | None
) -> None:
    assert reported_version(value) == expected
