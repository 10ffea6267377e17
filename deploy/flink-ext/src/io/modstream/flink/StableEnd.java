package io.modstream.flink;

import java.io.Serializable;

/**
 * One lane's last stable offset (LSO, the end a read_committed consumer can reach) against its
 * high watermark (the read_uncommitted end), as {@link EndOffsets.Broker} observes them. Records
 * past the LSO wait for the oldest open transaction on the partition: an open, hanging
 * transaction makes every record behind it late by up to the broker's
 * {@code transaction.max.timeout.ms} (issue 27, point 11), and a read_committed consumer's lag
 * says nothing of it. docs/OPERATIONS.md, "Open transaction", reads the two numbers.
 *
 * <ul>
 *   <li>{@link #unstableRecords()}: the high watermark minus the LSO, in offsets (records and
 *       transaction markers written but not readable yet); 0 when unknown;
 *   <li>{@link #stalledMs(long)}: how long the LSO has stayed below the high watermark without
 *       moving, counted from the first observation that saw it so (a stall older than the job is
 *       counted from the job's first poll); 0 while the LSO is at the end.
 * </ul>
 *
 * <p>Transactional producers that commit keep moving the LSO, so their in-flight records show
 * as unstable records but never as a stall longer than their commit interval.
 */
public final class StableEnd implements Serializable {
    private static final long serialVersionUID = 1L;
    private static final long UNKNOWN = EndOffsets.UNKNOWN;

    private long stable = UNKNOWN;
    private long end = UNKNOWN;
    private long stalledSince = UNKNOWN; // processing time the LSO was last seen move below the end

    /**
     * One poll's observation at processing time {@code now}: the LSO, then the high watermark
     * (asked in that order, so that {@code end >= stable} but for a truncation).
     */
    public synchronized void observe(long stable, long end, long now) {
        if (stable < 0 || end < 0) {
            return; // not answered this time: keep what was seen
        }
        boolean moved = stable != this.stable;
        this.stable = stable;
        this.end = end;
        if (stable >= end) {
            stalledSince = UNKNOWN;
        } else if (moved || stalledSince == UNKNOWN) {
            stalledSince = now;
        }
    }

    /** The high watermark minus the LSO as last observed; 0 before an observation. */
    public synchronized long unstableRecords() {
        return stable < 0 || end < 0 ? 0 : Math.max(0, end - stable);
    }

    /** How long, at {@code now}, the LSO has stayed below the end without moving; else 0. */
    public synchronized long stalledMs(long now) {
        return stalledSince == UNKNOWN ? 0 : Math.max(0, now - stalledSince);
    }
}
