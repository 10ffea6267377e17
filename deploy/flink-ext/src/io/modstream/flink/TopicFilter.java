package io.modstream.flink;

import org.apache.flink.api.common.functions.FilterFunction;
import org.apache.flink.types.Row;

/**
 * Splits a {@code Row(topic, key, value, ...)} stream by its first field without a Python call:
 * keeps the rows whose topic equals {@code topic} ({@code keep = true}) or all the others.
 *
 * <p>PyFlink's thread mode gives keyed broadcast functions no side outputs, so the moderation
 * operator emits its internal rows (decisions for the author-keyed sanctions operator) on its
 * main output under a reserved topic name, and this filter routes them.
 */
public final class TopicFilter implements FilterFunction<Row> {
    private static final long serialVersionUID = 1L;
    private final String topic;
    private final boolean keep;

    public TopicFilter(String topic, boolean keep) {
        this.topic = topic;
        this.keep = keep;
    }

    @Override
    public boolean filter(Row row) {
        return topic.equals(row.getField(0)) == keep;
    }
}
