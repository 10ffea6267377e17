package io.modstream.flink;

import java.util.ArrayList;
import java.util.List;

import org.apache.flink.api.common.functions.OpenContext;
import org.apache.flink.api.common.state.ListState;
import org.apache.flink.api.common.state.ListStateDescriptor;
import org.apache.flink.api.common.state.ValueState;
import org.apache.flink.api.common.state.ValueStateDescriptor;
import org.apache.flink.api.common.typeinfo.BasicArrayTypeInfo;
import org.apache.flink.api.common.typeinfo.BasicTypeInfo;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.java.typeutils.RowTypeInfo;
import org.apache.flink.streaming.api.functions.KeyedProcessFunction;
import org.apache.flink.types.Row;
import org.apache.flink.util.Collector;

/**
 * Dynamic batching in front of a Python operator: buffers {@code Row(topic, key, value, ...)}
 * per key ({@link DetectorKey}) in keyed state and emits one
 * {@code Row(key, Row(topics[], keys[], values[], arrivals[]))} when {@code maxBatch} records
 * are buffered or {@code maxWaitMs} (processing time) after the first. That is the shape of a
 * PyFlink keyed stream, so the output is reinterpreted as keyed and the Python operator runs
 * chained.
 *
 * <p>{@code arrivals[i]} is the record's timestamp as the Kafka source gave it (the Kafka record
 * timestamp: the job reads without a timestamp assigner), in epoch ms as text, or null: when a
 * request reached Kafka, which admission counts its budget from (modstream/scanning/admission.py),
 * so what waited upstream of the pool is not given its whole budget again.
 *
 * <p>PyFlink pays a framework crossing per element (tens of microseconds); a text model scores
 * a request in less than a hundred. Batching on the Java side makes the Python scan operator
 * cross once per batch. The buffer is keyed state, so it is part of every checkpoint: a
 * restored job flushes what it held.
 */
public final class Batcher extends KeyedProcessFunction<Row, Row, Row> {
    private static final long serialVersionUID = 1L;
    private final int maxBatch;
    private final long maxWaitMs;
    private transient ListState<String[]> buffer;
    private transient ValueState<Integer> count;
    private transient ValueState<Long> timer;

    public Batcher(int maxBatch, long maxWaitMs) {
        if (maxBatch < 1 || maxWaitMs < 0) {
            throw new IllegalArgumentException("maxBatch >= 1 and maxWaitMs >= 0");
        }
        this.maxBatch = maxBatch;
        this.maxWaitMs = maxWaitMs;
    }

    /** The type of a batch: {@code Row(topics[], keys[], values[], arrivals[])}. */
    public static TypeInformation<Row> batchType() {
        return new RowTypeInfo(
                BasicArrayTypeInfo.STRING_ARRAY_TYPE_INFO,
                BasicArrayTypeInfo.STRING_ARRAY_TYPE_INFO,
                BasicArrayTypeInfo.STRING_ARRAY_TYPE_INFO,
                BasicArrayTypeInfo.STRING_ARRAY_TYPE_INFO);
    }

    /** The type of the output: {@code Row(key, batch)}. */
    public static TypeInformation<Row> outputType() {
        return new RowTypeInfo(BasicTypeInfo.STRING_TYPE_INFO, batchType());
    }

    @Override
    public void open(OpenContext context) {
        buffer = getRuntimeContext().getListState(
                new ListStateDescriptor<>("buffer", BasicArrayTypeInfo.STRING_ARRAY_TYPE_INFO));
        count = getRuntimeContext().getState(new ValueStateDescriptor<>("count", Integer.class));
        timer = getRuntimeContext().getState(new ValueStateDescriptor<>("timer", Long.class));
    }

    @Override
    public void processElement(Row row, Context ctx, Collector<Row> out) throws Exception {
        Long arrived = ctx.timestamp();
        buffer.add(new String[] {
            (String) row.getField(0), (String) row.getField(1), (String) row.getField(2),
            arrived == null ? null : Long.toString(arrived)
        });
        Integer buffered = count.value();
        int now = buffered == null ? 1 : buffered + 1;
        if (now >= maxBatch) {
            Long pending = timer.value();
            if (pending != null) {
                ctx.timerService().deleteProcessingTimeTimer(pending);
            }
            flush((String) ctx.getCurrentKey().getField(0), out);
            return;
        }
        count.update(now);
        if (now == 1) {
            long due = ctx.timerService().currentProcessingTime() + maxWaitMs;
            ctx.timerService().registerProcessingTimeTimer(due);
            timer.update(due);
        }
    }

    @Override
    public void onTimer(long timestamp, OnTimerContext ctx, Collector<Row> out) throws Exception {
        flush((String) ctx.getCurrentKey().getField(0), out);
    }

    private void flush(String key, Collector<Row> out) throws Exception {
        List<String[]> rows = new ArrayList<>();
        for (String[] entry : buffer.get()) {
            rows.add(entry);
        }
        buffer.clear();
        count.clear();
        timer.clear();
        if (rows.isEmpty()) {
            return;
        }
        String[] topics = new String[rows.size()];
        String[] keys = new String[rows.size()];
        String[] values = new String[rows.size()];
        String[] arrivals = new String[rows.size()];
        for (int i = 0; i < rows.size(); i++) {
            String[] entry = rows.get(i);
            topics[i] = entry[0];
            keys[i] = entry[1];
            values[i] = entry[2];
            // Entries buffered by an older Batcher (a restored checkpoint) have no arrival.
            arrivals[i] = entry.length > 3 ? entry[3] : null;
        }
        out.collect(Row.of(key, Row.of(topics, keys, values, arrivals)));
    }
}
