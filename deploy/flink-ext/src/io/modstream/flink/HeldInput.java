package io.modstream.flink;

import java.util.ArrayList;
import java.util.Collection;
import java.util.Comparator;
import java.util.HashMap;
import java.util.Iterator;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

import org.apache.flink.runtime.state.KeyGroupRangeAssignment;
import org.apache.flink.types.Row;

/**
 * The input {@link BatchedVersions} holds until the watermark passes its ts, in the task's
 * memory instead of keyed state (issue 26). Held input lives for the out-of-orderness bound and
 * a batch interval (well under a second on a live job), yet in RocksDB each record cost a lookup,
 * a write, a timer, and at the watermark a scan, a delete and the timer's removal, each value
 * serialized char by char, and the background threads then compacted what was deleted a second
 * after it was written. Here a record costs a list append and a map entry per (ts, key).
 *
 * <p>Durability: at a checkpoint {@link #snapshot} gives what is held by key group, which the
 * operator writes as raw keyed state ({@link BatchedVersions#snapshotState}), so Flink hands
 * each key group back to the subtask that owns it after a restore, rescaled or not
 * ({@link #restore}). Order: a key's records leave by ts, then seq, then arrival, as they left
 * keyed state.
 */
public final class HeldInput {
    /** One held record. */
    public static final class Record {
        public final String topic;
        public final String value;
        public final long ts;
        public final long seq;
        /** Its entry in a snapshot ({@code [key, topic, value, ts, seq]}), made at the first
         * checkpoint it is held at and copied at the next ones: in a backlog the operator holds
         * tens of thousands of records across checkpoints (held_input_records), and writing
         * each anew every second was 3.5% of the version operator's thread (perf, stop 51). */
        byte[] packed;

        public Record(String topic, String value, long ts, long seq) {
            this.topic = topic;
            this.value = value;
            this.ts = ts;
            this.seq = seq;
        }

        long chars() {
            return RECORD_CHARS + (topic == null ? 0 : topic.length())
                    + (value == null ? 0 : value.length()) + (packed == null ? 0 : packed.length);
        }
    }

    /** What a record's objects (the record, its list and index entries, two string headers)
     * count for in {@link #chars}, beside its characters: about their bytes on the heap. */
    public static final long RECORD_CHARS = 128L;
    /** The snapshot's format (its first field). */
    public static final long FORMAT = 1L;
    /** By ts, then seq; a stable sort keeps arrival for the rest. */
    public static final Comparator<Record> ORDER =
            Comparator.<Record>comparingLong(r -> r.ts).thenComparingLong(r -> r.seq);

    private final Map<String, List<Record>> byKey = new HashMap<>();
    private final TreeMap<Long, LinkedHashSet<String>> due = new TreeMap<>();
    private long chars;
    private int size;

    public void add(String key, Record record) {
        byKey.computeIfAbsent(key, k -> new ArrayList<>(4)).add(record);
        due.computeIfAbsent(record.ts, ts -> new LinkedHashSet<>()).add(key);
        chars += key.length() + record.chars();
        size++;
    }

    /** The keys holding input at ts &lt;= {@code watermark}, by ts then first arrival, added
     * to {@code into}; they stay held until {@link #take}. */
    public void readied(long watermark, Collection<String> into) {
        Iterator<Map.Entry<Long, LinkedHashSet<String>>> entries =
                due.headMap(watermark, true).entrySet().iterator();
        while (entries.hasNext()) {
            into.addAll(entries.next().getValue());
            entries.remove();
        }
    }

    /** The key's records with ts &lt;= {@code watermark} in arrival order, no longer held
     * (nor due, where {@link #readied} has not handed the key on yet). */
    public List<Record> take(String key, long watermark) {
        List<Record> held = byKey.get(key);
        if (held == null) {
            return List.of();
        }
        List<Record> taken = new ArrayList<>(held.size());
        List<Record> kept = new ArrayList<>(0);
        for (Record record : held) {
            (record.ts <= watermark ? taken : kept).add(record);
        }
        if (kept.isEmpty()) {
            byKey.remove(key);
        } else {
            byKey.put(key, kept);
        }
        for (Record record : taken) {
            chars -= key.length() + record.chars();
            size--;
            LinkedHashSet<String> keys = due.get(record.ts);
            if (keys != null && keys.remove(key) && keys.isEmpty()) {
                due.remove(record.ts);
            }
        }
        return taken;
    }

    public int size() {
        return size;
    }

    /** Characters held (keys, topics and values), {@link #RECORD_CHARS} per record and the bytes
     * of its snapshot entry once made ({@link Record#packed}): what the spill bound counts. */
    public long chars() {
        return chars;
    }

    /** Every key's records in arrival order, then nothing held. */
    public Map<String, List<Record>> drain() {
        Map<String, List<Record>> all = new HashMap<>(byKey);
        byKey.clear();
        due.clear();
        chars = 0;
        size = 0;
        return all;
    }

    /** The key group of a key of the operator ({@code Row(key)}, as Flink assigns it). */
    public static int keyGroup(String key, int maxParallelism) {
        return KeyGroupRangeAssignment.assignToKeyGroup(Row.of(key), maxParallelism);
    }

    /** What is held, by key group ({@link #keyGroup}), each group's records as MessagePack
     * {@code [FORMAT, [[key, topic, value, ts, seq], ...]]} in arrival order. */
    public TreeMap<Integer, byte[]> snapshot(int maxParallelism) {
        TreeMap<Integer, List<String>> keysOf = new TreeMap<>();
        for (String key : byKey.keySet()) {
            keysOf.computeIfAbsent(keyGroup(key, maxParallelism), group -> new ArrayList<>())
                    .add(key);
        }
        TreeMap<Integer, byte[]> groups = new TreeMap<>();
        for (Map.Entry<Integer, List<String>> group : keysOf.entrySet()) {
            int records = 0;
            long size = 0;  // the group's bytes: exact when every entry was made before
            for (String key : group.getValue()) {
                for (Record record : byKey.get(key)) {
                    records++;
                    size += record.packed != null ? record.packed.length : unpackedSize(key, record);
                }
            }
            size += 2 + MsgPack.Writer.arrayHead(records);
            MsgPack.Writer writer = new MsgPack.Writer((int) Math.min(size, Integer.MAX_VALUE - 8));
            writer.array(2).integer(FORMAT).array(records);
            for (String key : group.getValue()) {
                for (Record record : byKey.get(key)) {
                    if (record.packed != null) {
                        writer.packed(record.packed);
                        continue;
                    }
                    int start = writer.size();
                    writer.array(5).string(key).string(record.topic).string(record.value)
                            .integer(record.ts).integer(record.seq);
                    record.packed = writer.since(start);
                    chars += record.packed.length;  // kept: the spill bound counts it
                }
            }
            groups.put(group.getKey(), writer.bytes());
        }
        return groups;
    }

    /** About the bytes of a record's snapshot entry not made yet: its ASCII text's (a
     * string of other characters takes more, and the writer then grows). */
    private static long unpackedSize(String key, Record record) {
        return 1 + 3 * 5 + 2 * 9 + key.length()
                + (record.topic == null ? 0 : record.topic.length())
                + (record.value == null ? 0 : record.value.length());
    }

    /** The records of one key group's {@link #snapshot}, held again in its order. */
    @SuppressWarnings("unchecked")
    public void restore(byte[] snapshot) {
        List<Object> group = (List<Object>) MsgPack.read(snapshot);
        if (!Long.valueOf(FORMAT).equals(group.get(0))) {
            throw new IllegalStateException("held input of an unknown format: " + group.get(0));
        }
        for (Object item : (List<Object>) group.get(1)) {
            List<Object> fields = (List<Object>) item;
            add((String) fields.get(0), new Record((String) fields.get(1), (String) fields.get(2),
                    (Long) fields.get(3), (Long) fields.get(4)));
        }
    }
}
