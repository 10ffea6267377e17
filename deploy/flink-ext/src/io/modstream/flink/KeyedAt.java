package io.modstream.flink;

import org.apache.flink.api.common.functions.MapFunction;
import org.apache.flink.api.common.typeinfo.BasicTypeInfo;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.java.typeutils.RowTypeInfo;
import org.apache.flink.types.Row;

/**
 * A sink row {@code Row(topic, key, value)} as keyed input of {@link BatchedVersions},
 * {@code Row("keyed", key, topic, value, ts, 0, "")}, at the top-level integer {@code field} of
 * its JSON value (0 without one), without a Python call: the version operator's {@code
 * _sanctions} rows at {@code at}, the time it emitted them, so that the batched operator's
 * hold-until-the-watermark is the sanctions' buffer by that time.
 */
public final class KeyedAt implements MapFunction<Row, Row> {
    private static final long serialVersionUID = 1L;
    private final String field;

    public KeyedAt(String field) {
        this.field = field;
    }

    @Override
    public Row map(Row row) {
        String value = (String) row.getField(2);
        long at = PayloadTime.of(value, field, 0L);
        return Row.of("keyed", row.getField(1), row.getField(0), value, at, 0L, "");
    }

    /** The decoded row: {@code Row(route, key, topic, value, ts, seq, lane)}. */
    public static TypeInformation<Row> outputType() {
        return new RowTypeInfo(
                BasicTypeInfo.STRING_TYPE_INFO, BasicTypeInfo.STRING_TYPE_INFO,
                BasicTypeInfo.STRING_TYPE_INFO, BasicTypeInfo.STRING_TYPE_INFO,
                BasicTypeInfo.LONG_TYPE_INFO, BasicTypeInfo.LONG_TYPE_INFO,
                BasicTypeInfo.STRING_TYPE_INFO);
    }
}
