package io.modstream.flink;

import org.apache.flink.api.common.functions.FlatMapFunction;
import org.apache.flink.types.Row;
import org.apache.flink.util.Collector;

/**
 * The inverse of {@link Batcher} on the way out: {@code Row(topics[], keys[], values[])} from a
 * Python operator, one {@code Row(topic, key, value)} per entry for the Kafka sink. Lets the
 * Python operator emit a whole batch of results in one crossing.
 */
public final class Unbatch implements FlatMapFunction<Row, Row> {
    private static final long serialVersionUID = 1L;

    @Override
    public void flatMap(Row batch, Collector<Row> out) {
        Object[] topics = (Object[]) batch.getField(0);
        Object[] keys = (Object[]) batch.getField(1);
        Object[] values = (Object[]) batch.getField(2);
        for (int i = 0; i < topics.length; i++) {
            out.collect(Row.of(topics[i], keys[i], values[i]));
        }
    }
}
