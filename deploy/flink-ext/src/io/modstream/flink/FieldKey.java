package io.modstream.flink;

import org.apache.flink.api.common.functions.MapFunction;
import org.apache.flink.api.common.typeinfo.BasicTypeInfo;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.java.functions.KeySelector;
import org.apache.flink.api.java.typeutils.RowTypeInfo;
import org.apache.flink.types.Row;

/**
 * Keys a row by one of its string fields, in Java, the way PyFlink keys its Python operators:
 * the key is {@code Row(field)}, the same as PyFlink's {@code KeyByKeySelector} gives for
 * {@code Row(key, value)}. PyFlink's own {@code key_by(lambda)} runs a Python map before the
 * shuffle (a framework crossing per record, tens of microseconds); this costs none.
 *
 * <p>{@link #selector} keys rows as they are (for a Java operator such as
 * {@link EventTimeOrder}); {@link #withKey} makes the {@code Row(key, row)} a Python keyed
 * operator reads, to be keyed with {@code KeyByKeySelector}.
 */
public final class FieldKey implements KeySelector<Row, Row> {
    private static final long serialVersionUID = 1L;
    private final int field;

    private FieldKey(int field) {
        this.field = field;
    }

    /** Keys a row by its field {@code field}: {@code Row(row[field])}. */
    public static FieldKey selector(int field) {
        return new FieldKey(field);
    }

    /** {@code row -> Row(row[field], row)}, the input of a PyFlink keyed operator. */
    public static MapFunction<Row, Row> withKey(int field) {
        return new WithKey(field);
    }

    /** The type of {@link #withKey}'s output for rows of type {@code rowType}. */
    public static TypeInformation<Row> withKeyType(TypeInformation<Row> rowType) {
        return new RowTypeInfo(BasicTypeInfo.STRING_TYPE_INFO, rowType);
    }

    /** The key's type: {@code Row(String)}. */
    public static TypeInformation<Row> keyType() {
        return new RowTypeInfo(BasicTypeInfo.STRING_TYPE_INFO);
    }

    @Override
    public Row getKey(Row row) {
        return Row.of(row.getField(field));
    }

    private static final class WithKey implements MapFunction<Row, Row> {
        private static final long serialVersionUID = 1L;
        private final int field;

        WithKey(int field) {
            this.field = field;
        }

        @Override
        public Row map(Row row) {
            return Row.of(row.getField(field), row);
        }
    }
}
