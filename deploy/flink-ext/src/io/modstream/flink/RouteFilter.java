package io.modstream.flink;

import java.util.HashSet;
import java.util.Set;

import org.apache.flink.api.common.functions.FilterFunction;
import org.apache.flink.types.Row;

/**
 * Keeps the decoded rows {@code Row(route, key, topic, ...)} whose (route, topic) is one of
 * {@code pairs} ({@code "route/topic"}), without a Python call: the hash-bank retro join needs
 * only uploads and bank records, a small part of the moderation job's input.
 */
public final class RouteFilter implements FilterFunction<Row> {
    private static final long serialVersionUID = 1L;
    private final Set<String> pairs;

    public RouteFilter(String[] pairs) {
        this.pairs = new HashSet<>();
        for (String pair : pairs) {
            this.pairs.add(pair);
        }
    }

    @Override
    public boolean filter(Row row) {
        return pairs.contains(row.getField(0) + "/" + row.getField(2));
    }
}
