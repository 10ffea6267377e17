package io.modstream.flink;

import java.util.ArrayList;
import java.util.List;

import org.apache.flink.api.common.operators.ProcessingTimeService.ProcessingTimeCallback;
import org.apache.flink.api.common.typeinfo.BasicArrayTypeInfo;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.java.typeutils.RowTypeInfo;
import org.apache.flink.streaming.api.operators.AbstractStreamOperator;
import org.apache.flink.streaming.api.operators.BoundedOneInput;
import org.apache.flink.streaming.api.operators.OneInputStreamOperator;
import org.apache.flink.streaming.api.watermark.Watermark;
import org.apache.flink.streaming.runtime.streamrecord.StreamRecord;
import org.apache.flink.types.Row;

/**
 * Source rows {@code Row(topic, key, value, ts, lane[, seq])} in front of a Python operator,
 * handed on as one {@code Row(topics[], keys[], values[], stamps[], lanes[], seqs[])} of up to
 * {@code maxSize} rows, at most {@code maxWaitMs} (processing time) after the first, in arrival
 * order. PyFlink pays a framework crossing per element; the moderation job's decode step is
 * entered once per batch instead of once per record.
 *
 * <p>Nothing is held across a checkpoint (the batch is emitted before the barrier), a watermark
 * or the end of the input, so the operator has no state and changes no order.
 */
public final class MiniBatch extends AbstractStreamOperator<Row>
        implements OneInputStreamOperator<Row, Row>, ProcessingTimeCallback, BoundedOneInput {
    private static final long serialVersionUID = 1L;
    private final int maxSize;
    private final long maxWaitMs;
    private transient List<Row> buffer;
    private transient boolean timerSet;

    public MiniBatch(int maxSize, long maxWaitMs) {
        if (maxSize < 1 || maxWaitMs < 0) {
            throw new IllegalArgumentException("maxSize >= 1 and maxWaitMs >= 0");
        }
        this.maxSize = maxSize;
        this.maxWaitMs = maxWaitMs;
    }

    /** {@code Row(topics[], keys[], values[], stamps[], lanes[], seqs[])}. */
    public static TypeInformation<Row> outputType() {
        return new RowTypeInfo(
                BasicArrayTypeInfo.STRING_ARRAY_TYPE_INFO,
                BasicArrayTypeInfo.STRING_ARRAY_TYPE_INFO,
                BasicArrayTypeInfo.STRING_ARRAY_TYPE_INFO,
                BasicArrayTypeInfo.LONG_ARRAY_TYPE_INFO,
                BasicArrayTypeInfo.STRING_ARRAY_TYPE_INFO,
                BasicArrayTypeInfo.LONG_ARRAY_TYPE_INFO);
    }

    @Override
    public void open() throws Exception {
        super.open();
        buffer = new ArrayList<>();
    }

    @Override
    public void processElement(StreamRecord<Row> element) {
        buffer.add(element.getValue());
        if (buffer.size() >= maxSize) {
            flush();
        } else if (!timerSet) {
            timerSet = true;
            long now = getProcessingTimeService().getCurrentProcessingTime();
            getProcessingTimeService().registerTimer(now + maxWaitMs, this);
        }
    }

    @Override
    public void onProcessingTime(long time) {
        timerSet = false;
        flush();
    }

    @Override
    public void prepareSnapshotPreBarrier(long checkpointId) throws Exception {
        flush();
        super.prepareSnapshotPreBarrier(checkpointId);
    }

    @Override
    public void processWatermark(Watermark mark) throws Exception {
        flush();
        super.processWatermark(mark);
    }

    @Override
    public void endInput() {
        flush();
    }

    @Override
    public void finish() throws Exception {
        flush();
        super.finish();
    }

    private void flush() {
        if (buffer == null || buffer.isEmpty()) {
            return;
        }
        int size = buffer.size();
        String[] topics = new String[size];
        String[] keys = new String[size];
        String[] values = new String[size];
        Long[] stamps = new Long[size];
        String[] lanes = new String[size];
        Long[] seqs = new Long[size];
        for (int i = 0; i < size; i++) {
            Row row = buffer.get(i);
            topics[i] = (String) row.getField(0);
            keys[i] = (String) row.getField(1);
            values[i] = (String) row.getField(2);
            stamps[i] = row.getField(3) == null ? 0L : (Long) row.getField(3);
            lanes[i] = row.getArity() > 4 ? (String) row.getField(4) : null;
            Object seq = row.getArity() > 5 ? row.getField(5) : null;
            seqs[i] = seq == null ? 0L : (Long) seq;
        }
        buffer.clear();
        output.collect(new StreamRecord<>(Row.of(topics, keys, values, stamps, lanes, seqs)));
    }
}
