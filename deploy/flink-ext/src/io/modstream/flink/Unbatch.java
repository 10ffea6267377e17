package io.modstream.flink;

import org.apache.flink.api.common.functions.FlatMapFunction;
import org.apache.flink.types.Row;
import org.apache.flink.util.Collector;

/**
 * The way out of a Python operator that emits a whole batch in one crossing: a batch
 * {@code Row(column0[], column1[], ...)} of equal-length arrays becomes one
 * {@code Row(column0[i], column1[i], ...)} per entry, in order. The scan job's
 * {@code Row(topics[], keys[], values[])} and the moderate step's become sink rows.
 */
public final class Unbatch implements FlatMapFunction<Row, Row> {
    private static final long serialVersionUID = 1L;

    @Override
    public void flatMap(Row batch, Collector<Row> out) {
        int arity = batch.getArity();
        Object[][] columns = new Object[arity][];
        for (int f = 0; f < arity; f++) {
            columns[f] = (Object[]) batch.getField(f);
        }
        for (int i = 0; i < columns[0].length; i++) {
            Row row = new Row(arity);
            for (int f = 0; f < arity; f++) {
                row.setField(f, columns[f][i]);
            }
            out.collect(row);
        }
    }
}
