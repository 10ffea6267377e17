"""ValidatedTime (deploy/flink-ext), the moderation job's event time, driven on a manual clock
through the JVM gateway: quiet live lanes let time follow the clock, a paused backfill holds it,
a record stamped ahead cannot pull it past the clock, and lanes without a name never move it."""

from __future__ import annotations

from typing import Any

import pytest

pytestmark = pytest.mark.integration  # needs a JVM (the gateway), not the stack

BOUND = 1_000  # out-of-orderness
IDLE = 1_000
BACKFILL_IDLE = 120_000
LIVE_WINDOW = 30_000
NOW = 1_764_460_800_000
HOLD = -(2**63)  # Long.MIN_VALUE: nothing new to emit


class Lanes:
    def __init__(
        self,
        jvm: Any,
        *,
        wall_clock: bool = True,
        expected: tuple[str, ...] = (),
        drained: int = BACKFILL_IDLE,
        ends: Any = None,
        at: int = NOW,
    ) -> None:
        from pyflink.java_gateway import get_gateway

        self.jvm = jvm
        self.options: dict[str, Any] = {
            "wall_clock": wall_clock,
            "expected": expected,
            "drained": drained,
            "ends": ends,
        }
        self.clock = jvm.io.modstream.flink.ValidatedTime.ManualClock(at)
        names = get_gateway().new_array(jvm.String, len(expected))
        for index, name in enumerate(expected):
            names[index] = name
        strategy = jvm.io.modstream.flink.ValidatedTime(
            BOUND, IDLE, BACKFILL_IDLE, LIVE_WINDOW, wall_clock, names, drained, "", ""
        )  # no broker: the ends come from `ends` (EndOffsets.Manual) when a test gives them
        self.generator = (
            strategy.generator(self.clock) if ends is None else strategy.generator(self.clock, ends)
        )

    def record(self, at_clock: int, lane: str, ts: int) -> None:
        self.clock.set(at_clock)
        row = self.jvm.org.apache.flink.types.Row(7)
        for index, value in enumerate(("keyed", "k", "content.versions", "{}", ts, 0, lane)):
            row.setField(index, value)
        self.generator.onEvent(row, ts, None)

    def watermark(self, at_clock: int) -> int:
        return int(self.generator.candidate(at_clock))

    def emit(self, at_clock: int) -> int:
        """The watermark emitted at `at_clock` (recorded as emitted), or HOLD."""
        self.clock.set(at_clock)
        return int(self.generator.advance(at_clock))

    def restored(self, at: int) -> Lanes:
        """A new instance started at `at` from what a checkpoint of this one kept."""
        after = Lanes(self.jvm, at=at, **self.options)
        after.generator.restore(self.generator.snapshot())
        return after


def test_quiet_live_lanes_let_event_time_follow_the_clock(jvm: Any) -> None:
    lanes = Lanes(jvm)
    lanes.record(NOW + 200, "content.versions#0", NOW)  # arrived 200 ms after its ts
    assert lanes.watermark(NOW + 200) == NOW - BOUND - 1
    # Still speaking: the clock less the bound and the observed delay.
    assert lanes.watermark(NOW + 500) == NOW + 500 - 200 - BOUND - 1
    # Ten quiet seconds: time goes on with the clock, so deadlines fire without new input.
    assert lanes.watermark(NOW + 10_000) == NOW + 10_000 - 200 - BOUND - 1


def test_a_paused_backfill_holds_event_time(jvm: Any) -> None:
    lanes = Lanes(jvm)
    hour_ago = NOW - 3_600_000
    lanes.record(NOW, "content.versions#0", hour_ago)  # an hour behind: a backlog
    assert lanes.watermark(NOW + 100) == hour_ago - BOUND - 1
    # Silent for a minute (backpressure, a paused partition): time does not jump to the clock.
    assert lanes.watermark(NOW + 60_000) == hour_ago - BOUND - 1
    # A live lane speaking beside it does not let the clock in either.
    lanes.record(NOW + 61_000, "detector.results#0", NOW + 61_000)
    assert lanes.watermark(NOW + 61_500) == hour_ago - BOUND - 1
    # Silent past the backfill idleness: released, but the clock advance waits for live input.
    lanes.record(NOW + 200_000, "detector.results#0", NOW + 200_000)
    assert lanes.watermark(NOW + 200_100) == NOW + 200_100 - BOUND - 1


def test_a_silent_lane_keeps_holding_while_the_backlog_is_read_from_other_lanes(jvm: Any) -> None:
    """One reader, many partitions, backpressure: a partition not fetched for longer than the
    backfill idleness while others of the backlog are read is paused, not done."""
    lanes = Lanes(jvm)
    hour_ago = NOW - 3_600_000
    lanes.record(NOW, "content.versions#0", hour_ago)
    for step in range(1, 5):  # the other lane speaks for four backfill idlenesses
        at = NOW + step * BACKFILL_IDLE
        lanes.record(at, "detector.results#0", hour_ago + step * 60_000)
        assert lanes.watermark(at + 1) == hour_ago - BOUND - 1
    # Every lane silent: what was read is complete.
    assert lanes.watermark(NOW + 6 * BACKFILL_IDLE) == hour_ago + 4 * 60_000 - BOUND - 1


def test_when_a_backlog_falls_silent_time_moves_to_what_was_read_never_to_the_clock(
    jvm: Any,
) -> None:
    lanes = Lanes(jvm)
    hour_ago = NOW - 3_600_000
    lanes.record(NOW, "content.versions#0", hour_ago)
    lanes.record(NOW + 5, "content.versions#1", hour_ago + 120_000)  # a far-ahead "tick"
    assert lanes.watermark(NOW + 1_000) == hour_ago - BOUND - 1  # both still count
    silent = NOW + 5 + BACKFILL_IDLE
    assert lanes.watermark(silent) == hour_ago + 120_000 - BOUND - 1  # not the clock


def test_a_record_stamped_ahead_cannot_pull_event_time_past_the_clock(jvm: Any) -> None:
    lanes = Lanes(jvm)
    lanes.record(NOW, "content.versions#0", NOW + 240_000)  # four minutes ahead, admitted
    assert lanes.watermark(NOW + 10) <= NOW + 10 - BOUND


def test_records_without_a_lane_never_move_event_time(jvm: Any) -> None:
    lanes = Lanes(jvm)
    lanes.record(NOW, "", NOW)  # re-evaluation, policy, hash bank
    assert lanes.watermark(NOW + 10_000) == HOLD


def test_without_the_wall_clock_time_follows_the_data_alone(jvm: Any) -> None:
    lanes = Lanes(jvm, wall_clock=False)
    lanes.record(NOW, "replay", NOW - 86_400_000)
    # Replay: however long the file takes to read, event time never comes from the clock.
    assert lanes.watermark(NOW + 10_000) == NOW - 86_400_000 - BOUND - 1
    lanes.record(NOW + 10_001, "replay", NOW - 86_400_000 + 5)
    assert lanes.watermark(NOW + 10_002) == NOW - 86_400_000 + 5 - BOUND - 1


def test_only_a_live_instance_that_never_read_anything_declares_itself_idle(jvm: Any) -> None:
    live = Lanes(jvm)
    assert not live.generator.idleAt(NOW + BACKFILL_IDLE - 1)  # too early: input may come
    assert live.generator.idleAt(NOW + BACKFILL_IDLE)  # reads no partition: not holding back
    live.record(NOW + BACKFILL_IDLE + 1, "content.versions#0", NOW)
    assert not live.generator.idleAt(NOW + 10 * BACKFILL_IDLE)  # once read, never idle
    # Replay never: a bounded input ending while idle let the end of time overtake records.
    assert not Lanes(jvm, wall_clock=False).generator.idleAt(NOW + 10 * BACKFILL_IDLE)


EXPECTED = ("content.versions#0", "review.decisions#0")


def test_after_a_restart_a_partition_not_read_yet_holds_event_time(jvm: Any) -> None:
    """The full fault run (docs/RELIABILITY.md, "Exactly once"): after each restore the few records
    of review.decisions were read before the upload partition they follow, event time passed
    the uploads, and their reviews were letters `stale`. A partition the job reads but has not
    heard from since it started holds event time like a paused backfill."""
    lanes = Lanes(jvm, expected=EXPECTED)
    hour_ago = NOW - 3_600_000
    lanes.record(NOW, "review.decisions#0", hour_ago + 60_000)  # read first after the restore
    for step in range(1, 5):  # the backlog goes on being read from other partitions
        at = NOW + step * BACKFILL_IDLE
        lanes.record(at, "detector.results#0", hour_ago + step * 60_000)
        assert lanes.watermark(at + 1) == HOLD
    lanes.record(NOW + 4 * BACKFILL_IDLE + 1, "content.versions#0", hour_ago)
    assert lanes.watermark(NOW + 4 * BACKFILL_IDLE + 2) == hour_ago - BOUND - 1


def test_a_partition_that_stays_empty_stops_holding_once_the_job_is_live(jvm: Any) -> None:
    """No backlog read (every lane heard is live): a partition not heard from after the backfill
    idleness is empty, not queued (a quiet live job's deadlines fire on time)."""
    lanes = Lanes(jvm, expected=EXPECTED, drained=4 * BACKFILL_IDLE)
    lanes.record(NOW + 100, "content.versions#0", NOW)  # live: arrived 100 ms after its ts
    assert lanes.watermark(NOW + 200) == HOLD  # review.decisions#0 may still have records
    at = NOW + BACKFILL_IDLE
    lanes.record(at, "content.versions#0", at - 100)
    assert lanes.watermark(at + 1) == at + 1 - 100 - BOUND - 1


def test_a_partition_not_read_yet_holds_beside_a_live_one_until_the_first_round_ends(
    jvm: Any,
) -> None:
    """The last TaskManager kill of the full fault run, near the end of the input: after the
    restore the reviews were read up to live at once, and an upload partition still queued was
    let go 5 s after the start. Unheard, it holds until a lane begins a second run (the first
    fetch was handed out) or for the drain time."""
    lanes = Lanes(jvm, expected=(*EXPECTED, "moderation.appeals#0"), drained=4 * BACKFILL_IDLE)
    at = NOW + 2 * BACKFILL_IDLE
    lanes.record(NOW, "moderation.appeals#0", NOW - 60_000)  # the outage's backlog, behind
    lanes.record(NOW + 100, "review.decisions#0", NOW)  # live: arrived 100 ms after its ts
    lanes.record(at, "review.decisions#0", at - 100)  # one run, however long
    assert lanes.watermark(at + 1) == HOLD  # content.versions#0 may still have records
    lanes.record(at + 2, "detector.results#0", at - 100)
    lanes.record(at + 3, "review.decisions#0", at - 50)  # a second run: the fetch was handed out
    # content.versions#0 no longer holds; the appeals partition, behind, still does.
    assert lanes.watermark(at + 4) == NOW - 60_000 - BOUND - 1


def test_when_every_lane_falls_silent_an_empty_partition_no_longer_holds(jvm: Any) -> None:
    lanes = Lanes(jvm, expected=EXPECTED)
    hour_ago = NOW - 3_600_000
    lanes.record(NOW, "content.versions#0", hour_ago)  # a backlog, read to its end
    assert lanes.watermark(NOW + BACKFILL_IDLE - 1) == HOLD
    assert lanes.watermark(NOW + BACKFILL_IDLE + 1) == hour_ago - BOUND - 1
    # Released once, it is not held for again: the next burst of backlog moves time at once.
    later = NOW + 2 * BACKFILL_IDLE
    lanes.record(later, "content.versions#0", hour_ago + 60_000)
    assert lanes.watermark(later + 1) == hour_ago + 60_000 - BOUND - 1


def test_an_instance_with_expected_partitions_that_never_read_one_still_declares_idle(
    jvm: Any,
) -> None:
    lanes = Lanes(jvm, expected=EXPECTED)
    assert lanes.watermark(NOW + 10 * BACKFILL_IDLE) == HOLD
    assert lanes.generator.idleAt(NOW + BACKFILL_IDLE)


def test_a_stalled_backlog_holds_event_time_until_it_is_surely_drained(jvm: Any) -> None:
    """The full fault run: after a restart every lane of the backlog fell silent for a few
    seconds (the source stalled), event time jumped to the newest review read, and the reviews
    went to the DLQ `stale` ahead of the uploads still unread. Silence shorter than the drain
    time is a stall: event time holds; longer, what was read is complete."""
    drained = 4 * BACKFILL_IDLE
    lanes = Lanes(jvm, drained=drained)
    hour_ago = NOW - 3_600_000
    lanes.record(NOW, "content.versions#0", hour_ago)
    lanes.record(NOW + 5, "review.decisions#0", hour_ago + 60_000)
    assert lanes.watermark(NOW + 10) == hour_ago - BOUND - 1
    for silent in (NOW + 2 * BACKFILL_IDLE, NOW + drained - 1):
        assert lanes.watermark(silent) == hour_ago - BOUND - 1  # where it was
    assert lanes.watermark(NOW + 5 + drained) == hour_ago + 60_000 - BOUND - 1


def test_a_behind_partition_holds_beside_live_ones_until_two_fetch_rounds_passed(
    jvm: Any,
) -> None:
    """The full fault run after its last TaskManager kill, near the end of the input: the few
    reviews were read up to live while an upload partition's backlog still waited behind other
    partitions' records; a live lane speaking released the silent partition after the backfill
    idleness, and the reviews went `stale`. A behind partition now holds until two fetch rounds
    passed since its last record (its next records would have come by then), or the drain time."""
    drained = 4 * BACKFILL_IDLE
    lanes = Lanes(jvm, drained=drained)
    hour_ago = NOW - 3_600_000
    lanes.record(NOW, "content.versions#0", hour_ago)  # behind, then silent
    at = NOW + 2 * BACKFILL_IDLE
    lanes.record(at, "review.decisions#0", at - 100)  # live, and only it speaks
    lanes.record(at + 1, "review.decisions#0", at - 99)
    assert lanes.watermark(at + 2) == hour_ago - BOUND - 1  # still held
    for step in range(6):  # two partitions take turns: rounds of fetches go by
        lane = ("review.decisions#0", "detector.results#0")[step % 2]
        lanes.record(at + 10 + step, lane, at + step)
    assert lanes.watermark(at + 20) > hour_ago  # released: it had nothing queued


def test_a_partition_still_unheard_when_another_speaks_again_had_nothing_to_read(
    jvm: Any,
) -> None:
    """The harness stalled on this: resumed from a savepoint in a backlog, an appeals partition
    with nothing new held event time until its next appeal, minutes away. The consumer hands out
    one fetch partition by partition and fetches a partition again only once it was handed out:
    a lane speaking again after others did means every partition with input was heard."""
    lanes = Lanes(jvm, expected=(*EXPECTED, "moderation.appeals#0"))
    hour_ago = NOW - 3_600_000
    for index in range(3):  # the first fetch: one partition's run, then the next
        lanes.record(NOW + index, "review.decisions#0", hour_ago + 60_000 + index)
    lanes.record(NOW + 10, "content.versions#0", hour_ago)
    lanes.record(NOW + 11, "content.versions#0", hour_ago + 1)  # one run: still holding
    assert lanes.watermark(NOW + 12) == HOLD
    lanes.record(NOW + 20, "review.decisions#0", hour_ago + 61_000)  # the second fetch
    assert lanes.watermark(NOW + 21) == hour_ago + 1 - BOUND - 1


def live_rounds(lanes: Lanes, at: int, offset: int = 100) -> None:
    """Two live partitions take turns: rounds of fetches go by."""
    for step in range(6):
        lane = ("review.decisions#0", "content.versions#0")[step % 2]
        lanes.record(at + step, f"{lane}@{offset + step}", at - 100 + step)


def test_a_partition_with_input_on_the_broker_holds_however_the_fetches_come(jvm: Any) -> None:
    """The full fault run after a 100 s machine stall: every job restarted at once, and the
    restored moderation job passed three detector partitions' input, already on the broker,
    while their fetches came late (its round counting let them go). A lane whose input the broker
    holds past the job's committed position (not read yet) or past the record read last holds
    event time, whatever the rounds say, up to the drain time."""
    ends = jvm.io.modstream.flink.EndOffsets.Manual()
    ends.setCommitted("detector.results#1", 10)
    ends.setEnd("detector.results#1", 13)
    drained = 8 * BACKFILL_IDLE
    lanes = Lanes(jvm, expected=(*EXPECTED, "detector.results#1"), ends=ends, drained=drained)
    hour_ago = NOW - 3_600_000
    live_rounds(lanes, NOW)
    assert lanes.watermark(NOW + 10) == HOLD  # unheard after the first round: input waits
    at = NOW + 2 * BACKFILL_IDLE
    lanes.record(at, "detector.results#1@10", hour_ago + 1)
    lanes.record(at + 1, "detector.results#1@11", hour_ago + 2)  # offset 12 still unread
    at += 2 * BACKFILL_IDLE
    live_rounds(lanes, at, offset=200)
    assert lanes.watermark(at + 10) == hour_ago + 2 - BOUND - 1  # held past two rounds
    at += 2 * BACKFILL_IDLE
    lanes.record(at, "detector.results#1@12", hour_ago + 3)  # read to the broker's end
    at += 2 * BACKFILL_IDLE
    live_rounds(lanes, at, offset=300)
    assert lanes.watermark(at + 10) > hour_ago + 3  # nothing left: let go after two rounds


def test_a_partition_whose_input_was_all_read_lets_go_after_the_first_round(jvm: Any) -> None:
    """Committed position at the broker's end: nothing to read, the first round lets it go."""
    ends = jvm.io.modstream.flink.EndOffsets.Manual()
    ends.setCommitted("detector.results#1", 13)
    ends.setEnd("detector.results#1", 13)
    lanes = Lanes(jvm, expected=(*EXPECTED, "detector.results#1"), ends=ends)
    live_rounds(lanes, NOW)
    assert lanes.watermark(NOW + 10) != HOLD


@pytest.mark.parametrize(("offsets", "holds"), [((0, 1, 3, 4), False), ((1, 2, 3, 4), True)])
def test_a_transactional_partition_is_drained_at_its_last_commit_marker(
    jvm: Any, offsets: tuple[int, ...], holds: bool
) -> None:
    """A read_committed consumer skips commit markers: once a lane showed an offset gap (records
    0-1, marker 2, records 3-4, marker 5), its last record and one marker are its end. Without a
    gap, offset 5 is a record still to read."""
    ends = jvm.io.modstream.flink.EndOffsets.Manual()
    ends.setEnd("detector.results#1", 6)
    lanes = Lanes(jvm, ends=ends, drained=8 * BACKFILL_IDLE)
    hour_ago = NOW - 3_600_000
    for offset in offsets:
        lanes.record(NOW + offset, f"detector.results#1@{offset}", hour_ago + offset)
    at = NOW + 2 * BACKFILL_IDLE
    live_rounds(lanes, at)
    held = lanes.watermark(at + 10) == hour_ago + 4 - BOUND - 1
    assert held == holds


# Issue 27: no producer can hold event time. Issue 32: event time survives a restore.
LIVE = "content.versions#0"
OTHER = "content.versions#1"


def live_every_2s(lanes: Lanes, start: int, stop: int, *, offset: int = 0) -> None:
    """Live uploads on LIVE every 2 s, each 100 ms after its ts, watermarks emitted between."""
    for index, at in enumerate(range(start, stop, 2_000)):
        lanes.record(at, f"{LIVE}@{offset + index}", at - 100)
        lanes.emit(at + 1)


def test_human_input_never_holds_event_time(jvm: Any) -> None:
    """Back-dated valid reports (a witness lane: modstream/jobs/moderation/decode.py) every 2 s
    beside live uploads: event time follows the uploads, and each upload is released within
    seconds."""
    lanes = Lanes(jvm, drained=60_000)
    month_ago = NOW - 30 * 86_400_000
    for index, at in enumerate(range(NOW, NOW + 60_000, 2_000)):
        lanes.record(at, f"~moderation.reports#0@{index}", month_ago)
        lanes.record(at + 500, f"{LIVE}@{index}", at + 400)
        assert lanes.emit(at + 600) >= at + 400 - BOUND - 1 - 100


def test_a_live_witness_lets_a_job_that_read_nothing_else_follow_the_clock(jvm: Any) -> None:
    """A quiet job after a start with only reviews to read: once no partition holds, event time
    follows the clock; a back-dated review alone never starts it."""
    stale = Lanes(jvm, expected=(LIVE,))
    stale.record(NOW, "~review.decisions#0@0", NOW - 3_600_000)
    assert stale.watermark(NOW + 10 * BACKFILL_IDLE) == HOLD
    assert stale.generator.idleAt(NOW + BACKFILL_IDLE)  # reads nothing that holds
    live = Lanes(jvm, expected=(LIVE,))
    live.record(NOW, "~review.decisions#0@0", NOW - 100)
    assert live.watermark(NOW + BACKFILL_IDLE - 1) == HOLD  # an upload partition may have input
    at = NOW + BACKFILL_IDLE + 1
    assert live.watermark(at) == at - BOUND - 1
    assert not live.generator.idleAt(at)


def test_a_lane_whose_newest_ts_stops_advancing_is_released_after_the_drain_time(
    jvm: Any,
) -> None:
    """A producer of uploads stamped an hour back, every 2 s, on one partition, beside live
    uploads: heard all the time, never further; released once its newest ts has not advanced
    for --drained-after-ms, and it holds no more however often it is heard."""
    drained = 60_000
    lanes = Lanes(jvm, drained=drained)
    hour_ago = NOW - 3_600_000
    for index, at in enumerate(range(NOW, NOW + 120_000, 2_000)):
        lanes.record(at, f"{OTHER}@{index}", hour_ago)
        lanes.record(at + 500, f"{LIVE}@{index}", at + 400)
        watermark = lanes.watermark(at + 600)
        if at < NOW + drained:
            assert watermark == hour_ago - BOUND - 1  # a backlog's first minute: it holds
        else:
            assert watermark == at + 600 - 100 - BOUND - 1  # released: the live lane decides


def test_a_back_dated_record_never_switches_a_quiet_job_off_the_clock(jvm: Any) -> None:
    """A quiet live job: one valid upload stamped an hour back, on a partition with nothing more
    on the broker, leaves event time on the clock (a new upload's fast gate and deadlines on
    time). The same record with more of its partition on the broker (a backlog) holds."""
    for more_on_broker, holds in ((0, False), (500, True)):
        ends = jvm.io.modstream.flink.EndOffsets.Manual()
        ends.setEnd(OTHER, 1 + more_on_broker)
        lanes = Lanes(jvm, drained=60_000, ends=ends)
        live_every_2s(lanes, NOW, NOW + 10_000)
        quiet = NOW + 20_000
        assert lanes.emit(quiet) == quiet - 100 - BOUND - 1  # quiet: on the clock
        lanes.record(quiet + 1, f"{OTHER}@0", NOW - 3_600_000)
        later = quiet + 30_000
        on_clock = later - 100 - BOUND - 1
        assert (lanes.emit(later) == on_clock) is not holds
        lanes.record(later + 1, f"{LIVE}@99", later + 1 - 100)  # a new upload
        assert (lanes.emit(later + 2) == later + 2 - 100 - BOUND - 1) is not holds


def backlog_read(lanes: Lanes, count: int = 5) -> int:
    """A backlog stamped an hour back read on LIVE and OTHER; returns the newest ts read."""
    hour_ago = NOW - 3_600_000
    for index in range(count):
        lanes.record(NOW + index, f"{LIVE}@{index}", hour_ago + index * 1_000)
        lanes.record(NOW + index, f"{OTHER}@{index}", hour_ago + index * 1_000 + 500)
        lanes.emit(NOW + index)
    return hour_ago + (count - 1) * 1_000 + 500


def test_a_restored_job_whose_inputs_stay_silent_finishes_its_buffer(jvm: Any) -> None:
    """Issue 32: killed after the last input of a backlog was read and restored with no new
    input, the job emitted nothing and what it had buffered waited for input that never came.
    The watermark comes back at once; after --drained-after-ms of silence, the newest read."""
    drained = 4 * BACKFILL_IDLE
    lanes = Lanes(jvm, expected=(LIVE, OTHER), drained=drained)
    newest = backlog_read(lanes)
    kept = int(lanes.generator.emitted())
    assert kept == NOW - 3_600_000 + 4_000 - BOUND - 1  # the smaller lane's newest
    start = NOW + 600_000
    after = lanes.restored(start)
    assert after.generator.emitted() == kept  # emitted again before anything else
    assert after.emit(start + drained - 1) == HOLD  # a stall, as before the kill
    assert after.emit(start + drained) == newest - BOUND - 1  # the whole buffer


def test_a_restored_watermark_never_passes_input_still_on_the_broker(jvm: Any) -> None:
    """Restored lanes are behind until they speak: one whose input is on the broker past what
    was read before the checkpoint holds event time until it is read (or the drain time)."""
    ends = jvm.io.modstream.flink.EndOffsets.Manual()
    ends.setEnd(LIVE, 5)
    ends.setEnd(OTHER, 9)  # four records of OTHER came after the checkpoint
    lanes = Lanes(jvm, expected=(LIVE, OTHER), ends=ends, drained=8 * BACKFILL_IDLE)
    newest_other = backlog_read(lanes)
    start = NOW + 600_000
    after = lanes.restored(start)
    live_rounds(after, start + BACKFILL_IDLE, offset=100)  # other partitions speak live
    # OTHER's input waits on the broker: event time stays at its newest read, not the clock.
    assert after.emit(start + 2 * BACKFILL_IDLE) == newest_other - BOUND - 1
    assert after.emit(start + 3 * BACKFILL_IDLE) == HOLD
    after.record(start + 3 * BACKFILL_IDLE + 1, f"{OTHER}@8", NOW - 3_600_000 + 9_000)
    assert after.emit(start + 3 * BACKFILL_IDLE + 2) == NOW - 3_600_000 + 9_000 - BOUND - 1


def test_a_live_job_restored_quiet_follows_the_clock_once_the_broker_says_nothing_waits(
    jvm: Any,
) -> None:
    for more_on_broker in (0, 1):
        ends = jvm.io.modstream.flink.EndOffsets.Manual()
        ends.setEnd(LIVE, 5 + more_on_broker)
        lanes = Lanes(jvm, expected=(LIVE,), ends=ends, drained=4 * BACKFILL_IDLE)
        live_every_2s(lanes, NOW, NOW + 10_000)
        after = lanes.restored(NOW + 600_000)
        at = NOW + 600_000 + 10
        quiet = after.emit(at) == at - 100 - BOUND - 1  # nothing more: a quiet live job
        assert quiet is (more_on_broker == 0)


def test_a_rescaled_restore_keeps_only_the_smallest_watermark(jvm: Any) -> None:
    from pyflink.java_gateway import get_gateway

    entries = get_gateway().jvm.java.util.ArrayList()
    entries.add("0/2\nv1\t100\ttrue\tfalse\ttrue\t0\ncontent.versions#0\t2000\t5\tfalse")
    entries.add("1/2\nv1\t50\ttrue\tfalse\ttrue\t0\ncontent.versions#1\t2000\t5\tfalse")
    pick = jvm.io.modstream.flink.ValidatedTimeOperator.pick
    assert pick(entries, "1/2").endswith("content.versions#1\t2000\t5\tfalse")
    assert pick(entries, "0/1") == "v1\t50\tfalse\tfalse\tfalse\t0"
    assert pick(get_gateway().jvm.java.util.ArrayList(), "0/1") is None
