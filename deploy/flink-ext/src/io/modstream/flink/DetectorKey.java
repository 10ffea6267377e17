package io.modstream.flink;

import java.io.IOException;

import org.apache.flink.api.common.typeinfo.BasicTypeInfo;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.java.functions.KeySelector;
import org.apache.flink.api.java.typeutils.RowTypeInfo;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.core.JsonFactory;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.core.JsonParser;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.core.JsonToken;
import org.apache.flink.types.Row;

/**
 * The batching key of a scan request {@code Row(topic, key, value, ...)}: {@code Row(detector)},
 * the top-level string {@code detector} of its JSON value, or {@code ""} when there is none
 * (such a record is validated, and dead-lettered, by the Python scan operator like any other).
 * With {@code shards > 1} the key is {@code Row("detector/N")}, N from the record key's hash, so
 * that one detector's requests spread over the subtasks of a job with parallelism above one.
 *
 * <p>A one-field {@code Row} because that is how PyFlink keys its Python operators (its
 * {@code KeyByKeySelector}): {@link Batcher}'s output can then be reinterpreted as keyed for the
 * Python scan operator, which runs in the same task, without a second shuffle. Only a hint:
 * the scan operator groups a batch by each request's own parsed detector.
 */
public final class DetectorKey implements KeySelector<Row, Row> {
    private static final long serialVersionUID = 1L;
    private static final JsonFactory JSON = new JsonFactory();
    private final int shards;

    public DetectorKey(int shards) {
        if (shards < 1) {
            throw new IllegalArgumentException("shards >= 1");
        }
        this.shards = shards;
    }

    @Override
    public Row getKey(Row row) {
        Object value = row.getField(2);
        String detector = value instanceof String ? of((String) value) : "";
        if (shards == 1) {
            return Row.of(detector);
        }
        Object key = row.getField(1);
        int hash = key == null ? 0 : key.hashCode();
        return Row.of(detector + "/" + Math.floorMod(hash, shards));
    }

    /** The key's type: {@code Row(String)}. */
    public static TypeInformation<Row> keyType() {
        return new RowTypeInfo(BasicTypeInfo.STRING_TYPE_INFO);
    }

    static String of(String value) {
        try (JsonParser parser = JSON.createParser(value)) {
            if (parser.nextToken() != JsonToken.START_OBJECT) {
                return "";
            }
            while (parser.nextToken() == JsonToken.FIELD_NAME) {
                String name = parser.getCurrentName();
                JsonToken token = parser.nextToken();
                if ("detector".equals(name)) {
                    return token == JsonToken.VALUE_STRING ? parser.getText() : "";
                }
                parser.skipChildren();
            }
        } catch (IOException | RuntimeException e) {
            return "";
        }
        return "";
    }
}
