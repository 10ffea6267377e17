package io.modstream.flink;

import org.apache.flink.api.common.functions.MapFunction;
import org.apache.flink.types.Row;

/** {@code row -> Row(row[f0], row[f1], ...)}: a few fields of a row, in Java. */
public final class Project implements MapFunction<Row, Row> {
    private static final long serialVersionUID = 1L;
    private final int[] fields;

    public Project(int[] fields) {
        this.fields = fields.clone();
    }

    @Override
    public Row map(Row row) {
        Row out = new Row(fields.length);
        for (int i = 0; i < fields.length; i++) {
            out.setField(i, row.getField(fields[i]));
        }
        return out;
    }
}
