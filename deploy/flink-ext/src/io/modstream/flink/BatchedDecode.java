package io.modstream.flink;

import java.util.ArrayList;
import java.util.List;

import org.apache.flink.api.common.operators.ProcessingTimeService.ProcessingTimeCallback;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.metrics.Counter;
import org.apache.flink.metrics.MetricGroup;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.operators.AbstractStreamOperator;
import org.apache.flink.streaming.api.operators.BoundedOneInput;
import org.apache.flink.streaming.api.operators.OneInputStreamOperator;
import org.apache.flink.streaming.api.transformations.OneInputTransformation;
import org.apache.flink.streaming.api.watermark.Watermark;
import org.apache.flink.streaming.runtime.streamrecord.StreamRecord;
import org.apache.flink.types.Row;

import pemja.core.PythonInterpreter;

/**
 * The moderation job's decode step with its Python called once per mini-batch through pemja
 * (issue 26), as {@link BatchedVersions} calls the version operator: source rows
 * {@code Row(topic, key, value, ts, lane[, seq])} are held, up to {@code maxSize}, at most
 * {@code maxWaitMs} (processing time) after the first, and handed to the Python side
 * (modstream/jobs/moderation/decode.py {@code BatchedDecode}) as one MessagePack payload; its
 * answer, one payload too, holds the decoded rows in order (the caller's row type, seven fields:
 * route, key, topic, value, ts, seq, lane) and the metric updates ({@link PythonMetrics}).
 *
 * <p>Before (stop 45), a Java mini-batch operator handed each batch to PyFlink's embedded
 * operator as a row of six arrays, which PyFlink converted into Python and the seven arrays
 * out back into Java field by field in Python code. MessagePack is encoded and decoded in C on
 * the Python side.
 *
 * <p>Nothing is held across a checkpoint (the batch is decoded before the barrier), a watermark
 * or the end of the input, so the operator has no state and changes no order.
 */
public final class BatchedDecode extends AbstractStreamOperator<Row>
        implements OneInputStreamOperator<Row, Row>, ProcessingTimeCallback, BoundedOneInput {
    private static final long serialVersionUID = 1L;
    public static final String MODULE = "modstream.jobs.moderation.decode";
    public static final String CLASS = "BatchedDecode";

    private final byte[] pickledConfig;
    private final EmbeddedPython python;
    private final int maxSize;
    private final long maxWaitMs;

    private transient List<Row> buffer;
    private transient boolean timerSet;
    private transient PythonInterpreter interpreter;
    private transient String handler;
    private transient Counter pythonCalls;
    private transient PythonMetrics metrics;

    public BatchedDecode(byte[] pickledConfig, EmbeddedPython python, int maxSize, long maxWaitMs) {
        if (maxSize < 1 || maxWaitMs < 0) {
            throw new IllegalArgumentException("maxSize >= 1 and maxWaitMs >= 0");
        }
        this.pickledConfig = pickledConfig;
        this.python = python;
        this.maxSize = maxSize;
        this.maxWaitMs = maxWaitMs;
    }

    /** {@code source} through this operator, named {@code name}, its rows of type {@code type},
     * at {@code parallelism} (0: the environment's). */
    public static DataStream<Row> apply(
            DataStream<Row> source, byte[] pickledConfig, int maxSize, long maxWaitMs,
            TypeInformation<Row> type, String name, String uid, int parallelism) {
        EmbeddedPython python = EmbeddedPython.of(source.getExecutionEnvironment());
        BatchedDecode operator = new BatchedDecode(pickledConfig, python, maxSize, maxWaitMs);
        OneInputTransformation<Row, Row> transform = new OneInputTransformation<>(
                source.getTransformation(), name, operator, type,
                parallelism > 0 ? parallelism : source.getExecutionEnvironment().getParallelism());
        transform.setUid(uid);
        source.getExecutionEnvironment().addOperator(transform);
        return new DataStream<>(source.getExecutionEnvironment(), transform);
    }

    @Override
    public void open() throws Exception {
        super.open();
        buffer = new ArrayList<>();
        MetricGroup group = getMetricGroup().addGroup("modstream");
        pythonCalls = group.counter("python_calls");
        metrics = new PythonMetrics(group);
        interpreter = python.open(getRuntimeContext(),
                getContainingTask().getEnvironment().getTaskManagerInfo().getTmpDirectories());
        int subtask = getRuntimeContext().getTaskInfo().getIndexOfThisSubtask();
        handler = "_modstream_decode_" + subtask + "_" + System.identityHashCode(this);
        interpreter.set(handler + "_config", pickledConfig);
        interpreter.exec("import " + MODULE + " as " + handler + "_module\n"
                + handler + " = " + handler + "_module." + CLASS + "(" + handler + "_config, "
                + subtask + ")");
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

    /** One Python call for the rows held: [[topic, key, value, ts, lane, seq], ...] in, [rows,
     * metric updates] out. */
    @SuppressWarnings("unchecked")
    private void flush() {
        if (buffer == null || buffer.isEmpty()) {
            return;
        }
        MsgPack.Writer payload = new MsgPack.Writer();
        payload.array(buffer.size());
        for (Row row : buffer) {
            Object ts = row.getField(3);
            Object seq = row.getArity() > 5 ? row.getField(5) : null;
            payload.array(6).string((String) row.getField(0)).string((String) row.getField(1))
                    .string((String) row.getField(2)).integer(ts == null ? 0L : (Long) ts)
                    .string(row.getArity() > 4 ? (String) row.getField(4) : null)
                    .integer(seq == null ? 0L : (Long) seq);
        }
        buffer.clear();
        pythonCalls.inc();
        byte[] answer = (byte[]) interpreter.invokeMethod(handler, "decode", payload.bytes());
        List<Object> parts = (List<Object>) MsgPack.read(answer);
        StreamRecord<Row> record = new StreamRecord<>(null);
        for (Object item : (List<Object>) parts.get(0)) {
            List<Object> fields = (List<Object>) item;
            output.collect(record.replace(Row.of(fields.get(0), fields.get(1), fields.get(2),
                    fields.get(3), asLong(fields.get(4)), asLong(fields.get(5)), fields.get(6))));
        }
        for (Object item : (List<Object>) parts.get(1)) {
            metrics.apply((List<Object>) item);
        }
    }

    private static Long asLong(Object value) {
        return value == null ? null : ((Number) value).longValue();
    }

    @Override
    public void close() throws Exception {
        try {
            python.close();
        } finally {
            super.close();
        }
    }
}
