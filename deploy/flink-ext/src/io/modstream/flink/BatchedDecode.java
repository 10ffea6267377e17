package io.modstream.flink;

import java.util.List;

import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.metrics.Counter;
import org.apache.flink.metrics.MetricGroup;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.datastream.SingleOutputStreamOperator;
import org.apache.flink.streaming.api.operators.AbstractStreamOperator;
import org.apache.flink.streaming.api.operators.OneInputStreamOperator;
import org.apache.flink.streaming.api.transformations.OneInputTransformation;
import org.apache.flink.streaming.runtime.streamrecord.StreamRecord;
import org.apache.flink.types.Row;

/**
 * The moderation job's decode step with its Python called once per mini-batch through pemja
 * (issue 26), as {@link BatchedVersions} calls the version operator: each batch
 * {@code Row(topics[], keys[], values[], stamps[], lanes[], seqs[])} from {@link MiniBatch} is
 * handed to the Python side (modstream/jobs/moderation/decode.py {@code BatchedDecode}) as one
 * MessagePack payload; its answer, one payload too, holds the decoded rows in order (the
 * caller's row type, seven fields: route, key, topic, value, ts, seq, lane), emitted one by one,
 * and the metric updates ({@link PythonMetrics}).
 *
 * <p>Before (stop 45), PyFlink's embedded operator took each batch, converting its six arrays
 * into Python and the seven arrays out back into Java in Python code, field by field, and
 * {@link Unbatch} split its answer. MessagePack is encoded and decoded in C on the Python side.
 * The operator has no state: a batch is decoded when it arrives.
 */
public final class BatchedDecode extends AbstractStreamOperator<Row>
        implements OneInputStreamOperator<Row, Row> {
    private static final long serialVersionUID = 1L;
    public static final String MODULE = "modstream.jobs.moderation.decode";
    public static final String CLASS = "BatchedDecode";

    private final byte[] pickledConfig;
    private final EmbeddedPython python;

    private transient String handler;
    private transient Counter pythonCalls;
    private transient PythonMetrics metrics;

    public BatchedDecode(byte[] pickledConfig, EmbeddedPython python) {
        this.pickledConfig = pickledConfig;
        this.python = python;
    }

    /** {@code batches} through this operator, its rows of type {@code type}; the caller names it,
     * gives its uid and its parallelism. */
    public static SingleOutputStreamOperator<Row> apply(
            DataStream<Row> batches, byte[] pickledConfig, TypeInformation<Row> type) {
        EmbeddedPython python = EmbeddedPython.of(batches.getExecutionEnvironment(), CLASS);
        OneInputTransformation<Row, Row> transform = new OneInputTransformation<>(
                batches.getTransformation(), "decode", new BatchedDecode(pickledConfig, python),
                type, batches.getExecutionEnvironment().getParallelism());
        batches.getExecutionEnvironment().addOperator(transform);
        // Its constructor is protected: an anonymous subclass, so that the caller sets the name,
        // uid and parallelism as on any operator.
        return new SingleOutputStreamOperator<Row>(batches.getExecutionEnvironment(), transform) {};
    }

    @Override
    public void open() throws Exception {
        super.open();
        MetricGroup group = getMetricGroup().addGroup("modstream");
        pythonCalls = group.counter("python_calls");
        metrics = new PythonMetrics(group);
        python.open(getRuntimeContext(),
                getContainingTask().getEnvironment().getTaskManagerInfo().getTmpDirectories());
        handler = python.instantiate("_modstream_decode_", this, MODULE, CLASS, pickledConfig,
                getRuntimeContext().getTaskInfo().getIndexOfThisSubtask(),
                getContainingTask().getCancelables());
    }

    /** One Python call per batch: [[topic, key, value, ts, lane, seq], ...] in, [rows, metric
     * updates] out. */
    @Override
    @SuppressWarnings("unchecked")
    public void processElement(StreamRecord<Row> element) {
        Row batch = element.getValue();
        Object[] topics = (Object[]) batch.getField(0);
        Object[] keys = (Object[]) batch.getField(1);
        Object[] values = (Object[]) batch.getField(2);
        Object[] stamps = (Object[]) batch.getField(3);
        Object[] lanes = (Object[]) batch.getField(4);
        Object[] seqs = (Object[]) batch.getField(5);
        MsgPack.Writer payload = new MsgPack.Writer();
        payload.array(topics.length);
        for (int i = 0; i < topics.length; i++) {
            payload.array(6).string((String) topics[i]).string((String) keys[i])
                    .string((String) values[i]).integer(stamps[i] == null ? 0L : (Long) stamps[i])
                    .string((String) lanes[i]).integer(seqs[i] == null ? 0L : (Long) seqs[i]);
        }
        pythonCalls.inc();
        byte[] answer = python.call(handler, "decode", payload.bytes());
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
