package io.modstream.flink;

import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Map;

import org.apache.flink.api.common.functions.OpenContext;
import org.apache.flink.api.common.state.MapState;
import org.apache.flink.api.common.state.MapStateDescriptor;
import org.apache.flink.api.common.typeinfo.BasicArrayTypeInfo;
import org.apache.flink.api.common.typeinfo.BasicTypeInfo;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.java.typeutils.RowTypeInfo;
import org.apache.flink.streaming.api.functions.KeyedProcessFunction;
import org.apache.flink.types.Row;
import org.apache.flink.util.Collector;

/**
 * Holds keyed input until the watermark passes its event time, then hands it on in order, one
 * batch per key and watermark: {@code Row(key, Row(topics[], values[], stamps[], seqs[]))}, by
 * {@code ts}, then {@code seq}, then arrival. Input rows are the moderation job's decoded rows
 * {@code Row(route, key, topic, value, ts, seq, lane)}, keyed by {@link FieldKey} on the key.
 *
 * <p>Known limit (docs/moderation.md, "Time"): the batch reaches the operator after it on its
 * keyed input, while policy and hash-bank records come on its broadcast input; Flink reads the
 * two in either order, so a policy or bank record stamped before a batch's records may be
 * applied after them (before issue 14, every input waited for that operator's own watermark,
 * the smaller of its two inputs'). Releasing one watermark late would close it but holds the
 * last records of a quiet stream until the next watermark; not done.
 *
 * <p>The output has the shape of a PyFlink keyed stream, so it is reinterpreted as keyed for the
 * Python operator after it, with no second shuffle (the two are not chained: that operator has
 * two inputs): Python sees each record once, in event-time order, and is entered once per key
 * and watermark instead of once per record and once more per timestamp (its own buffer state
 * and a timer per timestamp, before issue 14). The buffer is keyed state, in every checkpoint.
 */
public final class EventTimeOrder extends KeyedProcessFunction<Row, Row, Row> {
    private static final long serialVersionUID = 1L;
    private static final int TOPIC = 2;
    private static final int VALUE = 3;
    private static final int TS = 4;
    private static final int SEQ = 5;
    private transient MapState<Long, String[]> pending;

    /** The type of a batch: {@code Row(topics[], values[], stamps[], seqs[])}. */
    public static TypeInformation<Row> batchType() {
        return new RowTypeInfo(
                BasicArrayTypeInfo.STRING_ARRAY_TYPE_INFO,
                BasicArrayTypeInfo.STRING_ARRAY_TYPE_INFO,
                BasicArrayTypeInfo.LONG_ARRAY_TYPE_INFO,
                BasicArrayTypeInfo.LONG_ARRAY_TYPE_INFO);
    }

    /** The type of the output: {@code Row(key, batch)}. */
    public static TypeInformation<Row> outputType() {
        return new RowTypeInfo(BasicTypeInfo.STRING_TYPE_INFO, batchType());
    }

    @Override
    public void open(OpenContext context) {
        pending = getRuntimeContext().getMapState(new MapStateDescriptor<>(
                "pending", BasicTypeInfo.LONG_TYPE_INFO, BasicArrayTypeInfo.STRING_ARRAY_TYPE_INFO));
    }

    @Override
    public void processElement(Row row, Context ctx, Collector<Row> out) throws Exception {
        long ts = (Long) row.getField(TS);
        Object seq = row.getField(SEQ);
        if (hold(pending, ts, (String) row.getField(TOPIC), (String) row.getField(VALUE),
                seq == null ? 0L : (Long) seq)) {
            ctx.timerService().registerEventTimeTimer(ts);
        }
    }

    /** One record appended to the current key's input held at {@code ts} in {@code pending}
     * ({@code [topic, value, seq, ...]} in arrival order, the layout BatchedVersions keeps too);
     * true when it is the first at that ts (a timer is due there). */
    static boolean hold(MapState<Long, String[]> pending, long ts, String topic, String value,
            long seq) throws Exception {
        String[] held = pending.get(ts);
        int size = held == null ? 0 : held.length;
        String[] grown = new String[size + 3];
        if (held != null) {
            System.arraycopy(held, 0, grown, 0, size);
        }
        grown[size] = topic;
        grown[size + 1] = value;
        grown[size + 2] = String.valueOf(seq);
        pending.put(ts, grown);
        return held == null;
    }

    @Override
    public void onTimer(long timestamp, OnTimerContext ctx, Collector<Row> out) throws Exception {
        List<Long> due = dueTimes(pending, ctx.timerService().currentWatermark());
        if (due.isEmpty()) {
            return;
        }
        List<String[]> records = new ArrayList<>();
        List<Long> stamps = new ArrayList<>();
        for (long ts : due) {
            for (String[] record : inSeqOrder(pending.get(ts))) {
                records.add(record);
                stamps.add(ts);
            }
            pending.remove(ts);
            if (ts != timestamp) {
                ctx.timerService().deleteEventTimeTimer(ts);
            }
        }
        out.collect(Row.of(ctx.getCurrentKey().getField(0), batch(records, stamps)));
    }

    /** A timestamp's records {topic, value, seq} by seq, ties in arrival order (stable). */
    private static List<String[]> inSeqOrder(String[] held) {
        List<long[]> order = new ArrayList<>();
        for (int i = 0; i < held.length; i += 3) {
            order.add(new long[] {Long.parseLong(held[i + 2]), i});
        }
        order.sort(Comparator.comparingLong(entry -> entry[0]));
        List<String[]> records = new ArrayList<>();
        for (long[] entry : order) {
            int at = (int) entry[1];
            records.add(new String[] {held[at], held[at + 1], held[at + 2]});
        }
        return records;
    }

    private static Row batch(List<String[]> records, List<Long> stamps) {
        String[] topics = new String[records.size()];
        String[] values = new String[records.size()];
        Long[] times = new Long[records.size()];
        Long[] seqs = new Long[records.size()];
        for (int i = 0; i < records.size(); i++) {
            topics[i] = records.get(i)[0];
            values[i] = records.get(i)[1];
            times[i] = stamps.get(i);
            seqs[i] = Long.parseLong(records.get(i)[2]);
        }
        return Row.of(topics, values, times, seqs);
    }

    /** The held times at or before the watermark, ascending (RestoredOrder reads the same state). */
    static List<Long> dueTimes(MapState<Long, String[]> pending, long watermark) throws Exception {
        List<Long> due = new ArrayList<>();
        for (Map.Entry<Long, String[]> entry : pending.entries()) {
            if (entry.getKey() <= watermark) {
                due.add(entry.getKey());
            }
        }
        due.sort(Comparator.naturalOrder());
        return due;
    }
}
