package io.modstream.flink;

import java.util.HashMap;
import java.util.Map;

import org.apache.flink.api.common.eventtime.TimestampAssigner;
import org.apache.flink.api.common.eventtime.TimestampAssignerSupplier;
import org.apache.flink.api.common.eventtime.Watermark;
import org.apache.flink.api.common.eventtime.WatermarkGenerator;
import org.apache.flink.api.common.eventtime.WatermarkGeneratorSupplier;
import org.apache.flink.api.common.eventtime.WatermarkOutput;
import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.types.Row;

/**
 * Event time for the moderation job, from validated input only (contract v1.1, "Time you can
 * trust" and "Quiet time"). docs/moderation.md, "Time", explains the model.
 *
 * <p>It runs after the Python decode step, on {@code Row(kind, key, topic, value, ts, seq, lane)}:
 * {@code ts} is the validated event time and {@code lane} names where the record came from
 * (Kafka topic and partition; replay has one lane). Rows with an empty lane (policy, control and
 * hash-bank records, re-evaluation requests) never move event time. Per lane it keeps the
 * newest {@code ts} and when that lane was last heard from, and the watermark is the smallest
 * newest {@code ts} over the lanes still speaking, less the out-of-orderness bound, as Flink's
 * per-partition watermarks do. With the wall clock on (live deployments, not replay):
 *
 * <ul>
 *   <li>event time never runs ahead of the processing clock (a record stamped minutes ahead,
 *       inside the allowed skew, cannot fire deadlines early);
 *   <li>a lane is <em>live</em> when its records arrive within {@code liveWindowMs} of their
 *       {@code ts}. While every lane heard from is live, event time is at least the processing
 *       clock less the bound and the lanes' observed delay, so deadlines and provisional expiries
 *       fire on time in a quiet system;
 *   <li>a lane that is behind (a backfill or a backlog) and goes silent may be paused, not quiet:
 *       it holds event time for as long as only lanes that are behind speak (the source is
 *       catching up and has not fetched it for a while), and for {@code backfillIdlenessMs}
 *       once a live lane speaks (a live lane holds for {@code idlenessMs}); no wall-clock advance
 *       happens while any lane heard from is behind;
 *   <li>when every lane is silent and the stream is behind, event time holds for
 *       {@code drainedAfterMs} (a broker pause, a source or task stall, a restore: the partitions
 *       still hold input, and the next records may be older than the newest read elsewhere), then
 *       moves to the newest record read (what was read is complete), never to the processing
 *       clock;
 *   <li><em>expected lanes</em> (the partitions this instance reads, when the job knows them) are
 *       behind and silent until their first record: after a start or a restore, a partition the
 *       source has not fetched yet holds event time like a paused backfill, so records read first
 *       from other partitions (a review, an appeal) cannot pull event time past the upload they
 *       follow. The lane map is not part of a checkpoint; without this, the first lanes read
 *       after a restart alone decided event time. The hold ends for every lane still unheard
 *       when a lane speaks again after other lanes spoke since its last record: the Kafka
 *       consumer hands out what one fetch returned partition by partition, and fetches a
 *       partition again only once its data was handed out, so a lane's second run of records
 *       comes after every partition that had input when the job started (a partition with
 *       nothing to read must not hold a backlog's event time until its next record).
 * </ul>
 */
public final class ValidatedTime implements WatermarkStrategy<Row> {
    private static final long serialVersionUID = 1L;
    static final int TS = 4;
    static final int LANE = 6;

    private final long outOfOrdernessMs;
    private final long idlenessMs;
    private final long backfillIdlenessMs;
    private final long liveWindowMs;
    private final boolean wallClock;
    private final String[] expectedLanes;
    private final long drainedAfterMs;
    private final String bootstrap; // "" when no broker is read (replay, tests)
    private final String group;
    private final String[] clientProperties; // KEY=VALUE: the broker's security (SASL, TLS)

    public ValidatedTime(
            long outOfOrdernessMs,
            long idlenessMs,
            long backfillIdlenessMs,
            long liveWindowMs,
            boolean wallClock,
            String[] expectedLanes,
            long drainedAfterMs,
            String bootstrap,
            String group) {
        this(outOfOrdernessMs, idlenessMs, backfillIdlenessMs, liveWindowMs, wallClock, expectedLanes,
                drainedAfterMs, bootstrap, group, new String[0]);
    }

    public ValidatedTime(
            long outOfOrdernessMs,
            long idlenessMs,
            long backfillIdlenessMs,
            long liveWindowMs,
            boolean wallClock,
            String[] expectedLanes,
            long drainedAfterMs,
            String bootstrap,
            String group,
            String[] clientProperties) {
        this.outOfOrdernessMs = outOfOrdernessMs;
        this.idlenessMs = idlenessMs;
        this.backfillIdlenessMs = backfillIdlenessMs;
        this.liveWindowMs = liveWindowMs;
        this.wallClock = wallClock;
        this.expectedLanes = expectedLanes.clone();
        this.drainedAfterMs = drainedAfterMs;
        this.bootstrap = bootstrap;
        this.group = group;
        this.clientProperties = clientProperties.clone();
    }

    @Override
    public TimestampAssigner<Row> createTimestampAssigner(TimestampAssignerSupplier.Context context) {
        return (row, previous) -> {
            Object ts = row.getField(TS);
            return ts instanceof Long ? (Long) ts : previous;
        };
    }

    @Override
    public WatermarkGenerator<Row> createWatermarkGenerator(WatermarkGeneratorSupplier.Context context) {
        EndOffsets ends =
                bootstrap.isEmpty() ? EndOffsets.NONE : EndOffsets.Broker.of(bootstrap, group, expectedLanes, clientProperties);
        if (ends instanceof EndOffsets.Broker) {
            ((EndOffsets.Broker) ends).reportTo(context.getMetricGroup()); // open transactions, per lane
        }
        return new Generator(this, System::currentTimeMillis, ends);
    }

    /** The processing clock, injectable for tests. */
    public interface Clock extends java.io.Serializable {
        long now();
    }

    /**
     * One lane's newest event time and the processing time it was last heard from. An expected
     * lane not heard from yet has no newest time and counts as behind (its delay is unbounded).
     */
    static final class Lane {
        long newestTs = Long.MIN_VALUE;
        long heardAt;
        long delayMs = Long.MAX_VALUE;
        long roundAtLast; // the fetch rounds handed out before this lane's last record
        long nextOffset = EndOffsets.UNKNOWN; // past the last record read, when the lane says
        boolean gaps; // offsets skipped: transaction markers or aborted records sit between

        boolean live(long liveWindowMs) {
            return delayMs <= liveWindowMs;
        }
    }

    /** Per parallel instance; not shared, so no locking. */
    public static final class Generator implements WatermarkGenerator<Row> {
        private final ValidatedTime config;
        private final Clock clock;
        private final EndOffsets ends;
        private final Map<String, Lane> lanes = new HashMap<>();
        private final long startedAt;
        private boolean heardAny;
        // Fetch rounds: a round ends when a lane begins a second run of records in it (the
        // consumer fetches a partition again only once its data was handed out, and hands out
        // fetches in order), so two rounds after a lane's last record, its next records, had it
        // any on the broker then, would have been handed out.
        private long rounds;
        private String previousLane;
        private final java.util.Set<String> runsThisRound = new java.util.HashSet<>();
        private long emitted = Long.MIN_VALUE;
        private long lastDelayMs;
        private long lastHeardAt;
        private boolean lastLive;

        public Generator(ValidatedTime config, Clock clock) {
            this(config, clock, EndOffsets.NONE);
        }

        public Generator(ValidatedTime config, Clock clock, EndOffsets ends) {
            this.config = config;
            this.clock = clock;
            this.ends = ends;
            this.startedAt = clock.now();
            for (String name : config.expectedLanes) {
                Lane lane = new Lane();
                lane.heardAt = startedAt;
                lanes.put(name, lane);
            }
        }

        @Override
        public void onEvent(Row row, long timestamp, WatermarkOutput output) {
            Object field = row.getField(LANE);
            if (!(field instanceof String) || ((String) field).isEmpty()) {
                return;
            }
            // `topic#partition@offset` from the Kafka source; `topic#partition` or a name else.
            String lane = (String) field;
            long offset = EndOffsets.UNKNOWN;
            int at = lane.lastIndexOf('@');
            if (at > 0) {
                try {
                    offset = Long.parseLong(lane.substring(at + 1));
                    lane = lane.substring(0, at);
                } catch (NumberFormatException e) {
                    offset = EndOffsets.UNKNOWN;
                }
            }
            long now = clock.now();
            heardAny = true;
            Lane state = lanes.computeIfAbsent(lane, name -> new Lane());
            if (offset >= 0) {
                state.gaps |= state.nextOffset >= 0 && offset > state.nextOffset;
                state.nextOffset = Math.max(state.nextOffset, offset + 1);
            }
            if (!lane.equals(previousLane)) {
                if (!runsThisRound.add(lane)) {
                    // A lane's second run of records: every partition with input at the start
                    // was handed out, so a lane still unheard had nothing to read (unless the
                    // broker says it has).
                    lanes.entrySet().removeIf(other -> other.getValue().newestTs == Long.MIN_VALUE
                            && !pending(other.getKey(), other.getValue()));
                    rounds++;
                    runsThisRound.clear();
                    runsThisRound.add(lane);
                }
                previousLane = lane;
            }
            state.roundAtLast = rounds;
            state.newestTs = Math.max(state.newestTs, timestamp);
            state.heardAt = now;
            state.delayMs = now - state.newestTs;
            lastDelayMs = Math.max(0, state.delayMs);
            lastLive = state.live(config.liveWindowMs);
            lastHeardAt = now;
        }

        @Override
        public void onPeriodicEmit(WatermarkOutput output) {
            if (!heardAny) {
                // An instance that reads no partition must not hold the others back: idle, but
                // only in a live job and only after it has read nothing for a while. Marked idle
                // too early, a bounded input (replay) can end while still idle, and the end of
                // time then reaches an operator by one edge before the records still on another
                // (whose timers would never fire).
                if (idleAt(clock.now())) {
                    output.markIdle();
                }
                return;
            }
            long candidate = candidate(clock.now());
            if (candidate > emitted) {
                emitted = candidate;
                output.emitWatermark(new Watermark(candidate));
            }
        }

        /** Whether this instance declares itself idle at {@code now} (it never read a lane). */
        public boolean idleAt(long now) {
            return !heardAny && config.wallClock && now - startedAt >= config.backfillIdlenessMs;
        }

        private boolean heard(Lane lane, boolean live, long now) {
            long silence = live ? config.idlenessMs : config.backfillIdlenessMs;
            return now - lane.heardAt < silence;
        }

        /**
         * Whether a lane still holds event time: heard from lately, or behind and silent for
         * less than two fetch rounds since its last record (its next records may be queued behind
         * other partitions', however long that takes), up to {@code drainedAfterMs}.
         */
        private boolean holds(String name, Lane lane, boolean live, long now, boolean backlog) {
            if (heard(lane, live, now)) {
                return true;
            }
            if (!live && pending(name, lane) && now - lane.heardAt < config.drainedAfterMs) {
                return true; // its input is on the broker, not read yet
            }
            // Not heard from yet: held until the first round ends (then removed), or, while
            // every lane heard is live (no backlog is being read), for the backfill idleness.
            boolean queued =
                    lane.newestTs == Long.MIN_VALUE ? backlog : rounds - lane.roundAtLast < 2;
            return !live && queued && now - lane.heardAt < config.drainedAfterMs;
        }

        /**
         * Whether the broker holds input of this lane that was not read yet: past the record
         * read last (one offset of slack once the lane showed transaction markers, which a
         * read_committed consumer skips), or, for a lane not read yet, past the job's committed
         * position (where a restored source resumes).
         */
        private boolean pending(String name, Lane lane) {
            long end = ends.end(name);
            if (end < 0) {
                return false;
            }
            if (lane.nextOffset < 0) {
                long start = lane.newestTs == Long.MIN_VALUE ? ends.committed(name) : EndOffsets.UNKNOWN;
                return start >= 0 && start < end;
            }
            return end > lane.nextOffset + (lane.gaps ? 1 : 0);
        }

        /**
         * Whether the only lanes still speaking are behind: the job is reading a backlog, and a
         * silent lane that is behind may be one the source has not fetched for a while (one
         * reader, many partitions, backpressure), not one that ended. It keeps holding event
         * time until a live lane speaks or every lane is silent; released earlier, its records
         * would reach the job after event time passed them, and the same backlog would be
         * decided differently from run to run (tests/integration/test_backlog.py).
         */
        private boolean catchingUp(long now) {
            boolean anyHeard = false;
            for (Lane lane : lanes.values()) {
                boolean live = lane.live(config.liveWindowMs);
                if (heard(lane, live, now)) {
                    if (live) {
                        return false;
                    }
                    anyHeard = true;
                }
            }
            return anyHeard;
        }

        /** The watermark this instance may emit now, or Long.MIN_VALUE to hold. */
        public long candidate(long now) {
            if (!heardAny) {
                return Long.MIN_VALUE;
            }
            long oldest = Long.MAX_VALUE;
            long newest = Long.MIN_VALUE;
            boolean speaking = false;
            boolean allLive = true;
            long delay = 0;
            boolean catchingUp = catchingUp(now);
            java.util.List<String> released = new java.util.ArrayList<>();
            boolean backlog = false; // a lane heard from is behind
            for (Lane lane : lanes.values()) {
                backlog |= lane.newestTs != Long.MIN_VALUE && !lane.live(config.liveWindowMs);
            }
            for (Map.Entry<String, Lane> entry : lanes.entrySet()) {
                Lane lane = entry.getValue();
                newest = Math.max(newest, lane.newestTs);
                boolean live = lane.live(config.liveWindowMs);
                if (!holds(entry.getKey(), lane, live, now, backlog) && !(catchingUp && !live)) {
                    if (lane.newestTs == Long.MIN_VALUE) {
                        released.add(entry.getKey());
                    }
                    continue;
                }
                speaking = true;
                oldest = Math.min(oldest, lane.newestTs);
                allLive &= live;
                delay = Math.max(delay, Math.max(0, lane.delayMs));
            }
            if (!speaking && !lastLive && config.wallClock && now - lastHeardAt < config.drainedAfterMs) {
                // Every lane silent and behind: a stalled source or task, or input that ended.
                // Moved to the newest read now, a partition whose next records are older would
                // have them passed by event time (the fault runs' broker and task stalls).
                return Long.MIN_VALUE;
            }
            // An expected lane released unheard had nothing to read: from now on it is a lane
            // like any other, held for only once it speaks.
            released.forEach(lanes::remove);
            // Every lane silent: what was read is complete (never further, never the clock).
            long read = speaking ? oldest : newest;
            if (read == Long.MIN_VALUE) {
                return Long.MIN_VALUE; // an expected lane not heard from yet holds event time
            }
            if (!config.wallClock) {
                return read - config.outOfOrdernessMs - 1;
            }
            long fromData = Math.min(read, now) - config.outOfOrdernessMs - 1;
            boolean live = speaking ? allLive : lastLive;
            if (!live) {
                return fromData;
            }
            long lag = speaking ? delay : lastDelayMs;
            return Math.max(fromData, now - lag - config.outOfOrdernessMs - 1);
        }
    }

    /** Only for tests: a generator on a given clock. */
    public Generator generator(Clock clock) {
        return new Generator(this, clock);
    }

    /** Only for tests: a generator on a given clock and broker ends. */
    public Generator generator(Clock clock, EndOffsets ends) {
        return new Generator(this, clock, ends);
    }

    /** A clock that moves only when told (tests). */
    public static final class ManualClock implements Clock {
        private static final long serialVersionUID = 1L;
        private long now;

        public ManualClock(long now) {
            this.now = now;
        }

        public void set(long now) {
            this.now = now;
        }

        @Override
        public long now() {
            return now;
        }
    }
}
