package io.modstream.flink;

import java.nio.ByteBuffer;

import org.apache.flink.api.common.functions.OpenContext;
import org.apache.flink.api.common.state.ValueState;
import org.apache.flink.api.common.state.ValueStateDescriptor;
import org.apache.flink.api.common.typeinfo.BasicTypeInfo;
import org.apache.flink.api.common.typeinfo.PrimitiveArrayTypeInfo;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.java.typeutils.RowTypeInfo;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.core.io.JsonStringEncoder;
import org.apache.flink.streaming.api.functions.KeyedProcessFunction;
import org.apache.flink.util.Collector;
import org.apache.flink.types.Row;

/**
 * The engine's own limit for {@code modstream bench} (modstream/bench/java_floor.py): per record of
 * {@code Row(topic, key, value, ts, …)} keyed by its Kafka key, read the key's
 * {@code ValueState<byte[]>} (inputs seen, newest ts: 16 bytes), write it back and emit one
 * {@code Row(output, key, {"content_id", "ts", "inputs"})} for the exactly-once sink. No Python,
 * no JSON parsing (the ts is the source's, {@link PayloadTime}): what the moderation job costs
 * beyond this is the Python side and the moderation logic.
 */
public final class JavaFloor extends KeyedProcessFunction<Row, Row, Row> {
    private static final long serialVersionUID = 1L;
    private final String output;
    private transient ValueState<byte[]> touched;

    public JavaFloor(String output) {
        this.output = output;
    }

    /** The type of the rows it emits: {@code Row(topic, key, value)}, the sink's. */
    public static TypeInformation<Row> outputType() {
        return new RowTypeInfo(
                BasicTypeInfo.STRING_TYPE_INFO,
                BasicTypeInfo.STRING_TYPE_INFO,
                BasicTypeInfo.STRING_TYPE_INFO);
    }

    @Override
    public void open(OpenContext context) {
        touched = getRuntimeContext().getState(
                new ValueStateDescriptor<>("floor", PrimitiveArrayTypeInfo.BYTE_PRIMITIVE_ARRAY_TYPE_INFO));
    }

    @Override
    public void processElement(Row row, Context ctx, Collector<Row> out) throws Exception {
        byte[] stored = touched.value();
        long inputs = stored == null ? 1 : ByteBuffer.wrap(stored).getLong() + 1;
        Object field = row.getField(3);
        long ts = field instanceof Long ? (Long) field : 0L;
        touched.update(ByteBuffer.allocate(16).putLong(inputs).putLong(ts).array());
        String key = row.getField(1) == null ? "" : (String) row.getField(1);
        String quoted = new String(JsonStringEncoder.getInstance().quoteAsString(key));
        out.collect(Row.of(output, key,
                "{\"content_id\":\"" + quoted + "\",\"ts\":" + ts + ",\"inputs\":" + inputs + "}"));
    }
}
