package io.modstream.flink;

import org.apache.flink.api.common.functions.FlatMapFunction;
import org.apache.flink.types.Row;
import org.apache.flink.util.Collector;

/**
 * The moderation job's decode step on the way out of a {@link MiniBatch}: its
 * {@code Row(routes[], keys[], topics[], values[], stamps[], seqs[], lanes[])}, one
 * {@code Row(route, key, topic, value, ts, seq, lane)} per entry, in order.
 */
public final class Unbatch7 implements FlatMapFunction<Row, Row> {
    private static final long serialVersionUID = 1L;

    @Override
    public void flatMap(Row batch, Collector<Row> out) {
        Object[] routes = (Object[]) batch.getField(0);
        Object[] keys = (Object[]) batch.getField(1);
        Object[] topics = (Object[]) batch.getField(2);
        Object[] values = (Object[]) batch.getField(3);
        Object[] stamps = (Object[]) batch.getField(4);
        Object[] seqs = (Object[]) batch.getField(5);
        Object[] lanes = (Object[]) batch.getField(6);
        for (int i = 0; i < routes.length; i++) {
            out.collect(Row.of(routes[i], keys[i], topics[i], values[i], stamps[i], seqs[i], lanes[i]));
        }
    }
}
