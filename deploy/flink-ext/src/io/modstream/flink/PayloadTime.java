package io.modstream.flink;

import java.io.IOException;

import org.apache.flink.api.common.eventtime.SerializableTimestampAssigner;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.core.JsonFactory;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.core.JsonParser;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.core.JsonToken;
import org.apache.flink.types.Row;

/**
 * Event time for modstream records: the top-level integer {@code ts} of the JSON value.
 *
 * <p>Used in the Kafka source itself (so Flink keeps one watermark per partition and an idle or
 * lagging partition cannot let timers fire early), on the {@code Row(topic, key, value,
 * timestamp)} rows of {@link TopicKeyValueDeserializationSchema}, whose last field already holds
 * this time. A value without a usable {@code ts} keeps the Kafka record timestamp: it will be
 * dead-lettered downstream, and must not move the watermark backwards or block it.
 */
public final class PayloadTime implements SerializableTimestampAssigner<Row> {
    private static final long serialVersionUID = 1L;
    private static final JsonFactory JSON = new JsonFactory();

    @Override
    public long extractTimestamp(Row element, long recordTimestamp) {
        Object ts = element.getField(3);
        return ts instanceof Long ? (Long) ts : recordTimestamp;
    }

    /** The top-level {@code ts} of a JSON object, or {@code fallback}. Reads no further than it. */
    public static long of(String value, long fallback) {
        return of(value, "ts", fallback);
    }

    /** The top-level integer {@code field} (>= 0) of a JSON object, or {@code fallback}. */
    public static long of(String value, String field, long fallback) {
        if (value == null) {
            return fallback;
        }
        try (JsonParser parser = JSON.createParser(value)) {
            if (parser.nextToken() != JsonToken.START_OBJECT) {
                return fallback;
            }
            while (parser.nextToken() == JsonToken.FIELD_NAME) {
                String name = parser.getCurrentName();
                JsonToken token = parser.nextToken();
                if (field.equals(name)) {
                    if (token == JsonToken.VALUE_NUMBER_INT) {
                        long ts = parser.getLongValue();
                        return ts >= 0 ? ts : fallback;
                    }
                    return fallback;
                }
                parser.skipChildren();
            }
        } catch (IOException | RuntimeException e) {
            return fallback;
        }
        return fallback;
    }
}
