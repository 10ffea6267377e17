package io.modstream.flink;

import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;

import org.apache.flink.api.common.functions.OpenContext;
import org.apache.flink.api.common.state.MapState;
import org.apache.flink.api.common.state.MapStateDescriptor;
import org.apache.flink.api.common.typeinfo.BasicArrayTypeInfo;
import org.apache.flink.api.common.typeinfo.BasicTypeInfo;
import org.apache.flink.streaming.api.functions.KeyedProcessFunction;
import org.apache.flink.types.Row;
import org.apache.flink.util.Collector;

/**
 * The PyFlink engine's held input, handed to the batched engine after a restore (issue 26): a
 * savepoint of the {@code --engine pyflink} job holds, under the uid of its
 * {@link EventTimeOrder}, the input not yet passed by the watermark, and the batched job's
 * {@link BatchedVersions} holds its own input under another uid. Under that uid, with the same
 * state and timers as {@link EventTimeOrder}, this operator passes new input straight on and,
 * when the watermark passes a restored record's ts, hands it on as the decoded row it came as
 * ({@code Row(route, key, topic, value, ts, seq, lane)}, route {@code keyed}, lane empty)
 * before that watermark: the version operator takes it as input it had held itself.
 *
 * <p>It runs only in a batched job started from a savepoint that holds that uid
 * (modstream/jobs/moderation/job.py, {@link SavepointUids}); once started it stays in that job's savepoints.
 */
public final class RestoredOrder extends KeyedProcessFunction<Row, Row, Row> {
    private static final long serialVersionUID = 1L;
    /** The uid of the PyFlink engine's event-time order (modstream/jobs/moderation/java.py). */
    public static final String UID = "moderation_event_time_order";
    private transient MapState<Long, String[]> pending;

    @Override
    public void open(OpenContext context) {
        pending = getRuntimeContext().getMapState(new MapStateDescriptor<>(
                "pending", BasicTypeInfo.LONG_TYPE_INFO, BasicArrayTypeInfo.STRING_ARRAY_TYPE_INFO));
    }

    @Override
    public void processElement(Row row, Context ctx, Collector<Row> out) {
        out.collect(row);
    }

    /** Every restored record at or before the watermark, by ts, then seq, then arrival. */
    @Override
    public void onTimer(long timestamp, OnTimerContext ctx, Collector<Row> out) throws Exception {
        List<Long> due = EventTimeOrder.dueTimes(pending, ctx.timerService().currentWatermark());
        Object key = ctx.getCurrentKey().getField(0);
        for (long ts : due) {
            String[] held = pending.get(ts);
            List<String[]> records = new ArrayList<>();
            for (int i = 0; i < held.length; i += 3) {
                records.add(new String[] {held[i], held[i + 1], held[i + 2]});
            }
            records.sort(Comparator.comparingLong(record -> Long.parseLong(record[2])));
            for (String[] record : records) {
                out.collect(Row.of("keyed", key, record[0], record[1], ts,
                        Long.parseLong(record[2]), ""));
            }
            pending.remove(ts);
            if (ts != timestamp) {
                ctx.timerService().deleteEventTimeTimer(ts);
            }
        }
    }
}
