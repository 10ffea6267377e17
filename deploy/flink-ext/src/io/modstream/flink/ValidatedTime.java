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
import org.apache.flink.metrics.Gauge;
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
 *       from other partitions cannot pull event time past the upload they follow (without
 *       this, the first lanes read after a restart alone decided event time). The hold ends for
 *       every lane still unheard when a lane speaks again after other lanes spoke since its last
 *       record: the Kafka consumer hands out what one fetch returned partition by partition, and
 *       fetches a partition again only once its data was handed out, so a lane's second run of
 *       records comes after every partition that had input when the job started (a partition
 *       with nothing to read must not hold a backlog's event time until its next record);
 *   <li>no producer holds event time for long: a lane heard from since its newest {@code ts}
 *       last advanced no longer holds {@code drainedAfterMs} after that advance, however often it
 *       is heard (a producer sending a back-dated record every 2 s held every decision); a lane
 *       that is behind and below the watermark already emitted, with nothing more of it on the
 *       broker, is a stray back-dated record: it neither holds nor switches a live job off the
 *       clock;
 *   <li><em>witness</em> lanes (named with {@link #WITNESS} first: reviews, appeals, reports)
 *       never hold event time; their records are applied at their own {@code ts} all the same.
 *       A live one only tells a job that has read no other lane yet that its input is live.
 * </ul>
 *
 * <p>The last emitted watermark and what the rules need of the lanes are kept in operator state
 * ({@link ValidatedTimeOperator}): a restored job releases what it had buffered without new
 * input, within {@code drainedAfterMs} when its inputs stay silent.
 */
public final class ValidatedTime implements WatermarkStrategy<Row> {
    private static final long serialVersionUID = 1L;
    static final int TS = 4;
    static final int LANE = 6;
    /** A lane name's prefix for input that never holds event time (modstream/moderation/admission.py). */
    public static final String WITNESS = "~";
    /** The gauge of the processing clock less the last emitted watermark (`modstream` group). */
    public static final String LAG_GAUGE = "watermark_lag_ms";

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
        Generator generator = new Generator(this, System::currentTimeMillis, ends);
        if (restored != null) {
            generator.restore(restored);
        }
        if (wallClock) { // replay's distance from the wall clock means nothing
            context.getMetricGroup().addGroup("modstream").gauge(LAG_GAUGE, (Gauge<Long>) generator::lagMs);
        }
        current = generator;
        return generator;
    }

    // One strategy object per operator instance (deserialized per subtask): the operator hands
    // it what a checkpoint kept before the generator is made, and snapshots the generator made.
    private transient String restored;
    private transient Generator current;

    /** What a restored operator kept ({@link Generator#snapshot}), before its generator is made. */
    void restoreFrom(String snapshot) {
        restored = snapshot;
    }

    /** What this instance's generator keeps in a checkpoint, or null before it was made. */
    String snapshot() {
        return current == null ? null : current.snapshot();
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
        long advancedAt; // when newestTs last grew (or the start, or the restore)
        long delayMs = Long.MAX_VALUE;
        long roundAtLast; // the fetch rounds handed out before this lane's last record
        long nextOffset = EndOffsets.UNKNOWN; // past the last record read, when the lane says
        boolean gaps; // offsets skipped: transaction markers or aborted records sit between

        boolean live(long liveWindowMs) {
            return delayMs <= liveWindowMs;
        }
    }

    /** Per parallel instance; not shared, so no locking (but the gauge reads {@code emitted}). */
    public static final class Generator implements WatermarkGenerator<Row> {
        private final ValidatedTime config;
        private final Clock clock;
        private final EndOffsets ends;
        private final Map<String, Lane> lanes = new HashMap<>();
        private final long startedAt;
        private boolean heardAny;
        private boolean witnessed; // a live witness record was read
        // Fetch rounds: a round ends when a lane begins a second run of records in it (the
        // consumer fetches a partition again only once its data was handed out, and hands out
        // fetches in order), so two rounds after a lane's last record, its next records, had it
        // any on the broker then, would have been handed out.
        private long rounds;
        private String previousLane;
        private final java.util.Set<String> runsThisRound = new java.util.HashSet<>();
        private volatile long emitted = Long.MIN_VALUE;
        private boolean restoredUnsent; // a restored watermark not emitted again yet
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
                lane.advancedAt = startedAt;
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
            long now = clock.now();
            if (lane.startsWith(WITNESS)) {
                witnessed |= now - timestamp <= config.liveWindowMs;
                return; // applied at its ts by the event-time order; never holds event time
            }
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
            if (timestamp > state.newestTs) {
                state.newestTs = timestamp;
                state.advancedAt = now;
            }
            state.heardAt = now;
            state.delayMs = now - state.newestTs;
            if (!below(state)) { // a back-dated record never switches a live job off the clock
                lastDelayMs = Math.max(0, state.delayMs);
                lastLive = state.live(config.liveWindowMs);
                lastHeardAt = now;
            }
        }

        @Override
        public void onPeriodicEmit(WatermarkOutput output) {
            if (restoredUnsent) { // the restored operators downstream start again from it
                restoredUnsent = false;
                output.emitWatermark(new Watermark(emitted));
            }
            if (!heardAny && !witnessed) {
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
            long next = advance(clock.now());
            if (next != Long.MIN_VALUE) {
                output.emitWatermark(new Watermark(next));
            }
        }

        /** The watermark to emit at {@code now}, recorded as emitted, or Long.MIN_VALUE. */
        public long advance(long now) {
            long candidate = candidate(now);
            if (candidate <= emitted) {
                return Long.MIN_VALUE;
            }
            emitted = candidate;
            return candidate;
        }

        /** The last emitted watermark, or Long.MIN_VALUE. */
        public long emitted() {
            return emitted;
        }

        /**
         * The processing clock less the last emitted watermark: how far event time is behind
         * (a backlog shows its age). Before the first watermark, the time since this instance
         * started (every input waits), or 0 while it reads nothing.
         */
        public long lagMs() {
            long now = clock.now();
            if (emitted != Long.MIN_VALUE) {
                return now - emitted;
            }
            return heardAny || witnessed ? now - startedAt : 0;
        }

        /** Whether this instance declares itself idle at {@code now} (it never read a lane). */
        public boolean idleAt(long now) {
            return !heardAny && !witnessed && config.wallClock && now - startedAt >= config.backfillIdlenessMs;
        }

        private boolean heard(Lane lane, boolean live, long now) {
            long silence = live ? config.idlenessMs : config.backfillIdlenessMs;
            return now - lane.heardAt < silence;
        }

        /**
         * Whether a heard lane is behind and below the watermark already emitted: its records
         * are late whatever the job does, and holding for it only holds everything else.
         */
        private boolean below(Lane lane) {
            return lane.newestTs != Long.MIN_VALUE
                    && emitted != Long.MIN_VALUE
                    && !lane.live(config.liveWindowMs)
                    && lane.newestTs - config.outOfOrdernessMs - 1 < emitted;
        }

        /**
         * Whether a heard lane no longer counts at all: heard from since its newest {@code ts}
         * last advanced, {@code drainedAfterMs} ago or more, however often (a producer re-sending
         * old records; a lane paused in a backlog was last heard when it advanced), or it is
         * below the watermark with nothing more of it on the broker (a stray back-dated record;
         * the broker was asked, so a backlog still queued keeps holding).
         */
        private boolean stray(String name, Lane lane, long now) {
            if (lane.newestTs == Long.MIN_VALUE) {
                return false; // not heard from yet: the start rules
            }
            if (lane.heardAt > lane.advancedAt && now - lane.advancedAt >= config.drainedAfterMs) {
                return true; // heard since, never further: a paused lane's last record advanced it
            }
            return below(lane) && ends.end(name) >= 0 && !pending(name, lane);
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
        private boolean catchingUp(long now, java.util.Set<String> strays) {
            boolean anyHeard = false;
            for (Map.Entry<String, Lane> entry : lanes.entrySet()) {
                Lane lane = entry.getValue();
                boolean live = lane.live(config.liveWindowMs);
                if (!strays.contains(entry.getKey()) && heard(lane, live, now)) {
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
            if (!heardAny && !(witnessed && config.wallClock)) {
                return Long.MIN_VALUE;
            }
            java.util.Set<String> strays = new java.util.HashSet<>();
            boolean backlog = false; // a lane heard from is behind
            long newest = Long.MIN_VALUE;
            for (Map.Entry<String, Lane> entry : lanes.entrySet()) {
                Lane lane = entry.getValue();
                newest = Math.max(newest, lane.newestTs);
                if (stray(entry.getKey(), lane, now)) {
                    strays.add(entry.getKey());
                } else {
                    backlog |= lane.newestTs != Long.MIN_VALUE && !lane.live(config.liveWindowMs);
                }
            }
            long oldest = Long.MAX_VALUE;
            boolean speaking = false;
            boolean allLive = true;
            long delay = 0;
            boolean catchingUp = catchingUp(now, strays);
            java.util.List<String> released = new java.util.ArrayList<>();
            for (Map.Entry<String, Lane> entry : lanes.entrySet()) {
                Lane lane = entry.getValue();
                boolean live = lane.live(config.liveWindowMs);
                if (strays.contains(entry.getKey())) {
                    continue;
                }
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
                // Nothing read yet but live witnesses, and no partition holds: a quiet live job.
                boolean quietStart = !heardAny && !speaking;
                return quietStart ? now - config.outOfOrdernessMs - 1 : Long.MIN_VALUE;
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

        /**
         * What a checkpoint keeps: the last emitted watermark, what the quiet rules know of the
         * last record, and per lane heard from its newest {@code ts} and read position. One line
         * of header, then a line per lane; lane names (topic#partition) hold no tab or newline.
         */
        public String snapshot() {
            StringBuilder out = new StringBuilder();
            out.append("v1\t").append(emitted).append('\t').append(heardAny).append('\t')
                    .append(witnessed).append('\t').append(lastLive).append('\t').append(lastDelayMs);
            for (Map.Entry<String, Lane> entry : lanes.entrySet()) {
                Lane lane = entry.getValue();
                if (lane.newestTs != Long.MIN_VALUE) {
                    out.append('\n').append(entry.getKey()).append('\t').append(lane.newestTs)
                            .append('\t').append(lane.nextOffset).append('\t').append(lane.gaps);
                }
            }
            return out.toString();
        }

        /**
         * Restores what {@link #snapshot} kept. Its processing times are not: every restored
         * lane counts as heard at the restore and as behind (its next records may be anything
         * but live: the job was down), so it holds as a paused backfill does (for its input on
         * the broker, two fetch rounds, at most {@code drainedAfterMs}), beside the expected
         * lanes not heard from, which hold as after any start. The watermark is emitted again
         * at once; it never passes input still on the broker (it was emitted with that input
         * unread before the checkpoint, and the source resumes from there).
         */
        public void restore(String snapshot) {
            long now = startedAt;
            String[] lines = snapshot.split("\n");
            String[] head = lines[0].split("\t");
            if (!"v1".equals(head[0])) {
                return; // a format this version does not know: start as without a checkpoint
            }
            emitted = Long.parseLong(head[1]);
            restoredUnsent = emitted != Long.MIN_VALUE;
            heardAny = Boolean.parseBoolean(head[2]);
            witnessed = Boolean.parseBoolean(head[3]);
            lastLive = Boolean.parseBoolean(head[4]);
            lastDelayMs = Long.parseLong(head[5]);
            lastHeardAt = now;
            for (int index = 1; index < lines.length; index++) {
                String[] fields = lines[index].split("\t");
                Lane lane = lanes.computeIfAbsent(fields[0], name -> new Lane());
                lane.newestTs = Long.parseLong(fields[1]);
                lane.nextOffset = Long.parseLong(fields[2]);
                lane.gaps = Boolean.parseBoolean(fields[3]);
                lane.heardAt = now;
                lane.advancedAt = now;
                lane.delayMs = Long.MAX_VALUE;
            }
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
