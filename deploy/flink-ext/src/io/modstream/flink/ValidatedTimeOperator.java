package io.modstream.flink;

import java.util.ArrayList;
import java.util.List;

import org.apache.flink.api.common.state.ListState;
import org.apache.flink.api.common.state.ListStateDescriptor;
import org.apache.flink.runtime.state.StateInitializationContext;
import org.apache.flink.runtime.state.StateSnapshotContext;
import org.apache.flink.streaming.api.operators.AbstractStreamOperatorFactory;
import org.apache.flink.streaming.api.operators.OneInputStreamOperatorFactory;
import org.apache.flink.streaming.api.operators.StreamOperator;
import org.apache.flink.streaming.api.operators.StreamOperatorParameters;
import org.apache.flink.streaming.runtime.operators.TimestampsAndWatermarksOperator;
import org.apache.flink.types.Row;

/**
 * Flink's timestamps-and-watermarks operator running {@link ValidatedTime}, with what the
 * generator needs kept in operator state (docs/moderation.md, "Time"): its last emitted
 * watermark and its lanes. Without it a restored job emitted nothing until new input arrived, so
 * input buffered before the checkpoint (the event-time order, the moderate operator's timers)
 * waited for new input: a restored job whose inputs stayed silent never finished (issue 32).
 *
 * <p>Union list state, one entry per subtask ({@code index/parallelism}, a newline, the
 * snapshot). Restored at the same parallelism, a subtask takes its own entry; rescaled, it takes
 * no lanes and the smallest watermark of all entries (its partitions may have been any).
 */
public final class ValidatedTimeOperator extends TimestampsAndWatermarksOperator<Row> {
    private static final long serialVersionUID = 1L;
    private static final ListStateDescriptor<String> STATE =
            new ListStateDescriptor<>("validated-time", String.class);

    private final ValidatedTime strategy;
    private transient ListState<String> saved;

    ValidatedTimeOperator(StreamOperatorParameters<Row> parameters, ValidatedTime strategy) {
        super(parameters, strategy, true);
        this.strategy = strategy;
    }

    @Override
    public void initializeState(StateInitializationContext context) throws Exception {
        super.initializeState(context);
        saved = context.getOperatorStateStore().getUnionListState(STATE);
        if (context.isRestored()) {
            List<String> entries = new ArrayList<>();
            saved.get().forEach(entries::add);
            String mine = pick(entries, subtask());
            if (mine != null) {
                strategy.restoreFrom(mine);
            }
        }
    }

    @Override
    public void snapshotState(StateSnapshotContext context) throws Exception {
        super.snapshotState(context);
        String snapshot = strategy.snapshot();
        saved.update(snapshot == null ? List.of() : List.of(subtask() + "\n" + snapshot));
    }

    private String subtask() {
        return getRuntimeContext().getTaskInfo().getIndexOfThisSubtask()
                + "/" + getRuntimeContext().getTaskInfo().getNumberOfParallelSubtasks();
    }

    /**
     * This subtask's snapshot among the entries of every subtask: its own when the parallelism
     * is unchanged; else the smallest watermark alone (safe for any partition), or null.
     */
    public static String pick(List<String> entries, String subtask) {
        long smallest = Long.MAX_VALUE;
        boolean any = false;
        for (String entry : entries) {
            int newline = entry.indexOf('\n');
            String snapshot = entry.substring(newline + 1);
            if (entry.substring(0, newline).equals(subtask)) {
                return snapshot;
            }
            String[] head = snapshot.split("\n", 2)[0].split("\t");
            if (head.length > 1) {
                smallest = Math.min(smallest, Long.parseLong(head[1]));
                any = true;
            }
        }
        // Only the watermark: no lane, nothing heard (the expected lanes hold as after a start).
        return any ? "v1\t" + smallest + "\tfalse\tfalse\tfalse\t0" : null;
    }

    /** The factory the job's wiring hands to {@code DataStream.transform}. */
    public static final class Factory extends AbstractStreamOperatorFactory<Row>
            implements OneInputStreamOperatorFactory<Row, Row> {
        private static final long serialVersionUID = 1L;
        private final ValidatedTime strategy;

        public Factory(ValidatedTime strategy) {
            this.strategy = strategy;
        }

        @Override
        @SuppressWarnings("unchecked")
        public <T extends StreamOperator<Row>> T createStreamOperator(StreamOperatorParameters<Row> parameters) {
            return (T) new ValidatedTimeOperator(parameters, strategy);
        }

        @Override
        @SuppressWarnings("rawtypes")
        public Class<? extends StreamOperator> getStreamOperatorClass(ClassLoader classLoader) {
            return ValidatedTimeOperator.class;
        }
    }
}
