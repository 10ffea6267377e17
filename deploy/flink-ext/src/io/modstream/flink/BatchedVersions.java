package io.modstream.flink;

import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;

import org.apache.flink.api.common.state.BroadcastState;
import org.apache.flink.api.common.state.MapState;
import org.apache.flink.api.common.state.MapStateDescriptor;
import org.apache.flink.api.common.state.ValueState;
import org.apache.flink.api.common.state.ValueStateDescriptor;
import org.apache.flink.api.common.typeinfo.BasicArrayTypeInfo;
import org.apache.flink.api.common.typeinfo.BasicTypeInfo;
import org.apache.flink.api.common.typeinfo.PrimitiveArrayTypeInfo;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.common.typeutils.base.LongSerializer;
import org.apache.flink.api.java.typeutils.RowTypeInfo;
import org.apache.flink.metrics.Counter;
import org.apache.flink.metrics.Gauge;
import org.apache.flink.metrics.MetricGroup;
import org.apache.flink.runtime.checkpoint.CheckpointType;
import org.apache.flink.runtime.state.AbstractKeyedStateBackend;
import org.apache.flink.runtime.state.KeyGroupStatePartitionStreamProvider;
import org.apache.flink.runtime.state.KeyedStateCheckpointOutputStream;
import org.apache.flink.runtime.state.StateInitializationContext;
import org.apache.flink.runtime.state.StateSnapshotContext;
import org.apache.flink.runtime.state.VoidNamespace;
import org.apache.flink.runtime.state.VoidNamespaceSerializer;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.datastream.KeyedStream;
import org.apache.flink.streaming.api.operators.AbstractStreamOperator;
import org.apache.flink.streaming.api.operators.InternalTimer;
import org.apache.flink.streaming.api.operators.InternalTimerService;
import org.apache.flink.streaming.api.operators.OneInputStreamOperator;
import org.apache.flink.streaming.api.operators.Triggerable;
import org.apache.flink.streaming.api.operators.TwoInputStreamOperator;
import org.apache.flink.streaming.api.transformations.OneInputTransformation;
import org.apache.flink.streaming.api.transformations.TwoInputTransformation;
import org.apache.flink.streaming.api.typeinfo.python.PickledByteArrayTypeInfo;
import org.apache.flink.streaming.api.watermark.Watermark;
import org.apache.flink.streaming.runtime.streamrecord.StreamRecord;
import org.apache.flink.types.Row;

import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The moderation job's keyed operator with the engine in Java (issue 26, point 2): it owns, per
 * content version, what the Python adapter {@code Moderate} paid a Python-to-Java call for each
 * time: the input held until the watermark passes it (event-time order, as
 * {@link EventTimeOrder}), the version's stored value as {@code ValueState<byte[]>}, its due
 * timers and the metric counters. At each watermark it fires what is due, gathers every version
 * that became ready and calls the Python per-version code ONCE for all of them through pemja
 * (as PyFlink's embedded operators do), with one MessagePack payload; the answer, one payload
 * too, holds the new stored values, the timers to set or delete, the output rows, and the metric
 * updates (modstream/jobs/moderation/batch.py). No Python-to-Java call on the decision path.
 *
 * <p>Input 1: the decoded keyed rows {@code Row(route, key, topic, value, ts, seq, lane)}, keyed
 * by {@code Row(key)}; input 2: the policy and hash-bank rows, broadcast. Those reach Python when
 * they arrive, and what Python keeps of them is mirrored in broadcast (operator) state, sent
 * again to Python after a restore. Output: sink rows {@code Row(topic, key, value)}.
 *
 * <p>Watermarks come every 50 ms on a live job and each may ready one or two versions; calling
 * Python for each would cost a call per few records. So the call is coalesced: a watermark that
 * readied work within {@code flushIntervalMs} of the last call is held back (not forwarded)
 * with its work, and one processing-time timer makes the call for everything readied since,
 * then forwards the newest watermark held. Work never waits past the interval, the end of
 * input (a watermark of Long.MAX_VALUE), a broadcast record (which Python must see after
 * the versions readied before it, as without coalescing) or a checkpoint barrier
 * ({@link #prepareSnapshotPreBarrier}: what was readied is in no state, so it is decided
 * before the barrier). A watermark is forwarded only after the rows of the inputs it readied.
 *
 * <p>The Python side is a parameter (module and class, {@code handler(pickled_config, subtask)}
 * with {@code restore}, {@code broadcast} and {@code fire}), so the job's other keyed operators
 * run behind the same Java: the retro join by hash key (modstream/jobs/moderation/retro_batch.py) and the sanctions
 * by author (modstream/jobs/moderation/sanctions_batch.py). Their Python answers rows of any arity (the output type
 * is the caller's). Input 2 is optional: without it the operator is a one-input operator, so a
 * handler that keeps nothing of the policy and banks is not called for each of their records
 * (and its held work is not flushed at each).
 *
 * <p>A savepoint of the PyFlink engine restores into this operator (issue 26): it runs under
 * the uid of the PyFlink operator it replaces and reads that operator's state where its own
 * has none. {@code restoredValue} names the PyFlink value states, the first holding a value
 * wins, comma-separated ({@code "name:pickled"} for {@code Types.PICKLED_BYTE_ARRAY}, handed
 * to Python as the pickle PyFlink wrote, or {@code "name:string"}, handed on as UTF-8 bytes);
 * a key's restored value moves into this operator's own state at its first write. The PyFlink operator's timers ({@code "user-timers"},
 * void namespace) fire as this operator's own; one that Python sets again is deleted there (so
 * it fires once). {@code restoredBuffer} names the map state in which a PyFlink adapter held
 * its input until a timer at the input's ts (the sanctions' {@code decisions}): at that timer
 * the held JSON list reaches Python as one input record of topic {@link #RESTORED_BUFFER}.
 * The held input of the PyFlink engine's event-time order is another operator's state
 * ({@link RestoredOrder}).
 */
public final class BatchedVersions extends AbstractStreamOperator<Row>
        implements TwoInputStreamOperator<Row, Row, Row>, OneInputStreamOperator<Row, Row>,
                Triggerable<Row, Long> {
    private static final long serialVersionUID = 1L;
    private static final Logger LOG = LoggerFactory.getLogger(BatchedVersions.class);
    private static final int TOPIC = 2;
    private static final int VALUE = 3;
    private static final int TS = 4;
    private static final int SEQ = 5;
    private static final long INPUT = 0L; // timer namespace: held input due at its ts
    private static final long VERSION = 1L; // timer namespace: the version's own timer
    // The most versions one Python call decides; more readied at once are split (flush).
    static final int MAX_VERSIONS_PER_CALL = 256;
    /** The moderation step's Python side, the handler when none is named. */
    public static final String MODERATE_MODULE = "modstream.jobs.moderation.batch";
    public static final String MODERATE_CLASS = "BatchedModerate";
    /** The PyFlink engine's broadcast state (modstream/jobs/moderation/config.py BROADCAST_STATE): the
     * same entries, written by the same Python code, so a savepoint of either restores. */
    private static final MapStateDescriptor<String, String> BROADCAST = new MapStateDescriptor<>(
            "moderation_broadcast", BasicTypeInfo.STRING_TYPE_INFO, BasicTypeInfo.STRING_TYPE_INFO);
    /** The topic of a restored PyFlink buffer entry: a JSON list of the inputs held at its ts. */
    public static final String RESTORED_BUFFER = "_restored_buffer";
    /** The PyFlink keyed operators' timer service: its timers restore here. */
    private static final String PYFLINK_TIMERS = "user-timers";

    private final byte[] pickledConfig;
    private final EmbeddedPython python;
    private final long flushIntervalMs;
    /** The least delay of a call for input read behind the last watermark (ms): a live job's
     * watermark interval, so records read in one burst are decided in one call. */
    static final long LATE_CALL_MS = 50;
    // Held input kept in memory (HeldInput) up to this many characters (keys, topics, values,
    // and HeldInput.RECORD_CHARS per record for its objects: about as many bytes, up to twice
    // that for text beyond Latin-1); past it, all of it moves to keyed state (spill), as a
    // watermark held back by a slow partition would otherwise grow the heap without bound.
    private final long maxHeldChars;
    private final String handlerModule;
    private final String handlerClass;
    private final String restoredValue;
    private final String restoredBuffer;

    private transient String handler;
    private transient InternalTimerService<Long> timers;
    private transient HeldInput heldInput; // input held until the watermark, in memory
    // Input held in keyed state: a checkpoint's from before HeldInput, a PyFlink buffer, a spill.
    private transient MapState<Long, String[]> pending;
    private transient Set<String> pendingKeys; // keys whose `pending` input a timer readied
    private transient ValueState<byte[]> version;
    private transient BroadcastState<String, String> broadcast;
    private transient List<ValueState<?>> pyflinkValues; // restored: pickled bytes or text
    private transient MapState<Long, String> pyflinkBuffer;
    private transient InternalTimerService<VoidNamespace> pyflinkTimers;
    private transient Set<String> restoredKeys; // read from the PyFlink state in this flush
    private transient LinkedHashSet<String> inputKeys;
    private transient List<Object[]> firedTimers;
    private transient long watermark;
    private transient Watermark held; // readied work waits for the next call; forwarded after it
    private transient long lastCallMs;
    private transient boolean callScheduled;
    private transient MetricGroup group;
    private transient Counter pythonCalls;
    private transient Counter versionsBatched;
    private transient Counter recordsIn;
    private transient Counter pythonNanos;
    private transient Counter spills;
    private transient PythonMetrics metrics;

    public BatchedVersions(
            byte[] pickledConfig, EmbeddedPython python, long flushIntervalMs, long maxHeldChars,
            String handlerModule, String handlerClass, String restoredValue,
            String restoredBuffer) {
        this.pickledConfig = pickledConfig;
        this.python = python;
        this.flushIntervalMs = flushIntervalMs;
        this.maxHeldChars = maxHeldChars;
        this.handlerModule = handlerModule;
        this.handlerClass = handlerClass;
        this.restoredValue = restoredValue;
        this.restoredBuffer = restoredBuffer;
    }

    /** {@code keyed} (by {@link FieldKey#selector} on the version key) joined with the broadcast
     * {@code broadcast} rows through this operator: one sink row stream. Python is called at
     * most once per {@code flushIntervalMs} of processing time for readied versions (0: at every
     * watermark that readied one); input waiting for the watermark is held in memory up to
     * {@code maxHeldChars} characters ({@link #spill}). Its Python is the job's, as PyFlink's
     * operators get theirs ({@link EmbeddedPython}). */
    public static DataStream<Row> apply(
            KeyedStream<Row, Row> keyed, DataStream<Row> broadcast, byte[] pickledConfig,
            String uid, long flushIntervalMs, long maxHeldChars, String restoredValue) {
        return apply(keyed, broadcast, pickledConfig, uid, flushIntervalMs, maxHeldChars,
                "moderate (batched)", MODERATE_MODULE, MODERATE_CLASS, outputType(),
                restoredValue, null);
    }

    /** {@code keyed} through this operator with the Python handler {@code handlerModule.
     * handlerClass}, named {@code name}, its rows of type {@code type}; {@code broadcast} may be
     * null (a one-input operator: the handler is never called with a broadcast record);
     * {@code restoredValue} and {@code restoredBuffer} the PyFlink operator's state read
     * where this one has none (see the class comment; null: none). */
    public static DataStream<Row> apply(
            KeyedStream<Row, Row> keyed, DataStream<Row> broadcast, byte[] pickledConfig,
            String uid, long flushIntervalMs, long maxHeldChars, String name,
            String handlerModule, String handlerClass, TypeInformation<Row> type,
            String restoredValue, String restoredBuffer) {
        EmbeddedPython python = EmbeddedPython.of(keyed.getExecutionEnvironment(), handlerClass);
        BatchedVersions operator = new BatchedVersions(pickledConfig, python, flushIntervalMs,
                maxHeldChars, handlerModule, handlerClass, restoredValue, restoredBuffer);
        int parallelism = keyed.getExecutionEnvironment().getParallelism();
        if (broadcast == null) {
            OneInputTransformation<Row, Row> transform = new OneInputTransformation<>(
                    keyed.getTransformation(), name, operator, type, parallelism);
            transform.setStateKeySelector(keyed.getKeySelector());
            transform.setStateKeyType(keyed.getKeyType());
            transform.setUid(uid);
            keyed.getExecutionEnvironment().addOperator(transform);
            return new DataStream<>(keyed.getExecutionEnvironment(), transform);
        }
        DataStream<Row> everywhere = broadcast.broadcast();
        TwoInputTransformation<Row, Row, Row> transform = new TwoInputTransformation<>(
                keyed.getTransformation(),
                everywhere.getTransformation(),
                name,
                operator,
                type,
                parallelism);
        transform.setStateKeySelectors(keyed.getKeySelector(), null);
        transform.setStateKeyType(keyed.getKeyType());
        transform.setUid(uid);
        keyed.getExecutionEnvironment().addOperator(transform);
        return new DataStream<>(keyed.getExecutionEnvironment(), transform);
    }

    /** {@code Row(topic, key, value)}. */
    public static TypeInformation<Row> outputType() {
        return new RowTypeInfo(
                BasicTypeInfo.STRING_TYPE_INFO, BasicTypeInfo.STRING_TYPE_INFO, BasicTypeInfo.STRING_TYPE_INFO);
    }

    @Override
    public void open() throws Exception {
        super.open();
        pending = getKeyedStateStore().getMapState(new MapStateDescriptor<>(
                "pending", BasicTypeInfo.LONG_TYPE_INFO, BasicArrayTypeInfo.STRING_ARRAY_TYPE_INFO));
        version = getKeyedStateStore().getState(new ValueStateDescriptor<>(
                "version_bytes", PrimitiveArrayTypeInfo.BYTE_PRIMITIVE_ARRAY_TYPE_INFO));
        broadcast = getOperatorStateBackend().getBroadcastState(BROADCAST);
        timers = getInternalTimerService("batched-versions", LongSerializer.INSTANCE, this);
        refuseLegacyTimers();
        openRestored();
        pendingKeys = new HashSet<>();
        inputKeys = new LinkedHashSet<>();
        firedTimers = new ArrayList<>();
        watermark = Long.MIN_VALUE;
        held = null;
        lastCallMs = Long.MIN_VALUE;
        callScheduled = false;
        group = getMetricGroup().addGroup("modstream");
        pythonCalls = group.counter("python_calls");
        versionsBatched = group.counter("versions_batched");
        recordsIn = group.counter("batched_records_in");
        pythonNanos = group.counter("python_fire_ns");
        spills = group.counter("held_input_spills");
        // The records held in memory: each checkpoint writes every one of them (snapshotHeld),
        // so a large hold costs each checkpoint its size. Read by the reporter's thread: a
        // count read without a lock, at worst one update old.
        group.gauge("held_input_records", (Gauge<Long>) () -> {
            HeldInput held = heldInput;
            return held == null ? 0L : (long) held.size();
        });
        metrics = new PythonMetrics(group);
        openPython();
    }

    /** The PyFlink operator's state this uid may hold from a savepoint of that engine. */
    private void openRestored() throws Exception {
        restoredKeys = new HashSet<>();
        pyflinkTimers = getInternalTimerService(
                PYFLINK_TIMERS, VoidNamespaceSerializer.INSTANCE, new Triggerable<Row, VoidNamespace>() {
                    @Override
                    public void onEventTime(InternalTimer<Row, VoidNamespace> timer) throws Exception {
                        onRestoredTimer((String) timer.getKey().getField(0), timer.getTimestamp());
                    }

                    @Override
                    public void onProcessingTime(InternalTimer<Row, VoidNamespace> timer) {}
                });
        pyflinkValues = new ArrayList<>();
        for (String state : restoredValue == null ? new String[0] : restoredValue.split(",")) {
            String[] named = state.split(":");
            ValueState<?> value;
            if (named[1].equals("pickled")) {
                value = getKeyedStateStore().getState(new ValueStateDescriptor<>(
                        named[0], PickledByteArrayTypeInfo.PICKLED_BYTE_ARRAY_TYPE_INFO));
            } else {
                value = getKeyedStateStore().getState(
                        new ValueStateDescriptor<>(named[0], BasicTypeInfo.STRING_TYPE_INFO));
            }
            // Only a state the savepoint filled is read for each new key: this operator never
            // writes one, so an empty one stays empty, and reading it for every new version
            // cost one RocksDB lookup (a miss) per state.
            if (holdsAnyKey(named[0])) {
                pyflinkValues.add(value);
            }
        }
        if (restoredBuffer != null) {
            pyflinkBuffer = getKeyedStateStore().getMapState(new MapStateDescriptor<>(
                    restoredBuffer, BasicTypeInfo.LONG_TYPE_INFO, BasicTypeInfo.STRING_TYPE_INFO));
        }
    }

    /** The input held at the checkpoint restored: raw keyed state, the key groups this
     * subtask owns ({@link #snapshotState}). */
    @Override
    public void initializeState(StateInitializationContext context) throws Exception {
        super.initializeState(context);
        heldInput = new HeldInput();
        for (KeyGroupStatePartitionStreamProvider group : context.getRawKeyedStateInputs()) {
            DataInputStream in = new DataInputStream(group.getStream());
            byte[] snapshot = new byte[in.readInt()];
            in.readFully(snapshot);
            heldInput.restore(snapshot);
        }
    }

    /** The held input is this operator's raw keyed state (so no timers of Flink's there). */
    @Override
    protected boolean isUsingCustomRawKeyedState() {
        return true;
    }

    /** Whether this subtask's keyed state `name` holds a value for any key. */
    private boolean holdsAnyKey(String name) throws Exception {
        try (java.util.stream.Stream<Object> keys =
                getKeyedStateBackend().getKeys(name, VoidNamespace.INSTANCE)) {
            return keys.findAny().isPresent();
        }
    }

    /** A PyFlink timer from the savepoint: the inputs its buffer held at that ts, else the
     * version's own timer. */
    private void onRestoredTimer(String key, long ts) throws Exception {
        String held = pyflinkBuffer == null ? null : pyflinkBuffer.get(ts);
        if (held == null) {
            firedTimers.add(new Object[] {key, ts});
            return;
        }
        pyflinkBuffer.remove(ts);
        EventTimeOrder.hold(pending, ts, RESTORED_BUFFER, held, 0L);
        inputKeys.add(key);
        pendingKeys.add(key);
    }

    /** The current key's stored value: this operator's, else the PyFlink operator's restored
     * one (moved into this operator's state at the key's next write). */
    private byte[] storedValue(String key) throws Exception {
        byte[] value = version.value();
        if (value != null) {
            return value;
        }
        for (ValueState<?> state : pyflinkValues) {
            Object restored = state.value();
            if (restored != null) {
                restoredKeys.add(key);
                return restored instanceof String
                        ? ((String) restored).getBytes(StandardCharsets.UTF_8) : (byte[]) restored;
            }
        }
        return null;
    }

    /** Held input is raw keyed state, which Flink's heap timers on RocksDB would also write
     * (`state.backend.rocksdb.timer-service.factory: HEAP`): refused at start, not at the
     * first checkpoint. */
    private void refuseLegacyTimers() {
        if (getKeyedStateBackend() instanceof AbstractKeyedStateBackend
                && ((AbstractKeyedStateBackend<?>) getKeyedStateBackend())
                        .requiresLegacySynchronousTimerSnapshots(CheckpointType.CHECKPOINT)) {
            throw new IllegalStateException("BatchedVersions keeps its held input as raw keyed"
                    + " state, which heap timers on RocksDB also need: run RocksDB's timers"
                    + " (state.backend.rocksdb.timer-service.factory: ROCKSDB, the default)");
        }
    }

    private void openPython() throws Exception {
        python.open(getRuntimeContext(),
                getContainingTask().getEnvironment().getTaskManagerInfo().getTmpDirectories());
        handler = python.instantiate("_modstream_batched_", this, handlerModule, handlerClass,
                pickledConfig, getRuntimeContext().getTaskInfo().getIndexOfThisSubtask(),
                getContainingTask().getCancelables());
        // After a restore: what Python keeps of the policy and the banks, from broadcast state.
        MsgPack.Writer entries = new MsgPack.Writer();
        List<Map.Entry<String, String>> kept = new ArrayList<>();
        for (Map.Entry<String, String> entry : broadcast.entries()) {
            kept.add(entry);
        }
        entries.array(kept.size());
        for (Map.Entry<String, String> entry : kept) {
            entries.array(2).string(entry.getKey()).string(entry.getValue());
        }
        call("restore", entries.bytes());
    }

    private byte[] call(String method, byte[] payload) {
        pythonCalls.inc();
        return python.call(handler, method, payload);
    }

    /** Input 1 when there is no input 2. */
    @Override
    public void processElement(StreamRecord<Row> element) throws Exception {
        processElement1(element);
    }

    @Override
    public void processElement1(StreamRecord<Row> element) throws Exception {
        Row row = element.getValue();
        recordsIn.inc();
        Object seq = row.getField(SEQ);
        long ts = (Long) row.getField(TS);
        heldInput.add((String) ((Row) getCurrentKey()).getField(0), new HeldInput.Record(
                (String) row.getField(TOPIC), (String) row.getField(VALUE), ts,
                seq == null ? 0L : (Long) seq));
        if (heldInput.chars() > maxHeldChars) {
            spill();
        }
        if (ts <= watermark) {
            // Behind the last watermark (human input, which never holds event time, read
            // late): the next watermark may be long in coming (a stream that is behind and
            // drained holds event time at its newest record), so it is decided by a call
            // LATE_CALL_MS or flushIntervalMs from now, whichever is longer, or by the next
            // watermark's if that comes first; never at once, so late records read together
            // are still decided together, in ts order, as a watermark would have readied them.
            heldInput.readied(watermark, inputKeys);
            if (readied()) {
                long now = getProcessingTimeService().getCurrentProcessingTime();
                scheduleCall(now + Math.max(flushIntervalMs, LATE_CALL_MS));
            }
        }
    }

    /** A call now, or at most {@code flushIntervalMs} after the last one. */
    private void scheduleCall() throws Exception {
        long now = getProcessingTimeService().getCurrentProcessingTime();
        long due = lastCallMs == Long.MIN_VALUE ? now : lastCallMs + flushIntervalMs;
        if (flushIntervalMs <= 0 || now >= due) {
            callAndForward();
        } else {
            scheduleCall(due);
        }
    }

    /** A call at {@code due} unless one is scheduled already (it then comes sooner or later). */
    private void scheduleCall(long due) {
        if (!callScheduled) {
            callScheduled = true;
            getProcessingTimeService().registerTimer(due, at -> {
                callScheduled = false;
                callAndForward();
            });
        }
    }

    /**
     * Everything held in memory into keyed state (`pending`, a timer at each ts), as all input
     * was held before {@link HeldInput}: it then waits on disk, and what arrives after it
     * waits in memory again. All of it, so that a key's input in `pending` always arrived
     * before its input in memory ({@link #ready} keeps arrival order across the two). A key
     * a watermark already readied (waiting for the next call) reads `pending` at that call,
     * not a watermark later when its timers fire: its input is decided with the timers and
     * the later input of the same call, and before the watermark is forwarded.
     */
    private void spill() throws Exception {
        Object current = getCurrentKey();
        int records = heldInput.size();
        for (Map.Entry<String, List<HeldInput.Record>> entry : heldInput.drain().entrySet()) {
            if (inputKeys.contains(entry.getKey())) {
                pendingKeys.add(entry.getKey());
            }
            setCurrentKey(Row.of(entry.getKey()));
            for (HeldInput.Record record : entry.getValue()) {
                if (EventTimeOrder.hold(pending, record.ts, record.topic, record.value, record.seq)) {
                    timers.registerEventTimeTimer(INPUT, record.ts);
                }
            }
        }
        setCurrentKey(current);
        spills.inc();
        LOG.warn("BatchedVersions {}: {} held records over {} characters moved to keyed state"
                + " (the watermark at {})", handlerClass, records, maxHeldChars, watermark);
    }

    @Override
    public void processElement2(StreamRecord<Row> element) throws Exception {
        Row row = element.getValue();
        recordsIn.inc();
        Object stamp = row.getField(TS);
        long ts = stamp == null ? 0L : (Long) stamp;
        callAndForward(); // versions readied before this record are decided before it
        MsgPack.Writer payload = new MsgPack.Writer();
        payload.array(3).string((String) row.getField(TOPIC)).string((String) row.getField(VALUE))
                .integer(ts);
        applyAnswer(call("broadcast", payload.bytes()), ts);
    }

    @Override
    public void onEventTime(InternalTimer<Row, Long> timer) {
        String key = (String) timer.getKey().getField(0);
        if (timer.getNamespace() == INPUT) {
            inputKeys.add(key);
            pendingKeys.add(key);
        } else {
            firedTimers.add(new Object[] {key, timer.getTimestamp()});
        }
    }

    @Override
    public void onProcessingTime(InternalTimer<Row, Long> timer) {}

    @Override
    public void processWatermark(Watermark mark) throws Exception {
        watermark = mark.getTimestamp();
        if (timeServiceManager != null) {
            timeServiceManager.advanceWatermark(mark);
        }
        heldInput.readied(watermark, inputKeys);
        if (held == null && !readied()) {
            output.emitWatermark(mark);
            return;
        }
        held = mark;
        if (mark.getTimestamp() == Long.MAX_VALUE) {
            callAndForward();
        } else {
            scheduleCall();
        }
    }

    /** Decided before the barrier: readied input and fired timers are held in no state. */
    @Override
    public void prepareSnapshotPreBarrier(long checkpointId) throws Exception {
        super.prepareSnapshotPreBarrier(checkpointId);
        callAndForward();
    }

    @Override
    public void finish() throws Exception {
        callAndForward();
        super.finish();
    }

    private boolean readied() {
        return !inputKeys.isEmpty() || !firedTimers.isEmpty();
    }

    /** One Python call for everything readied since the last, then the newest watermark held. */
    private void callAndForward() throws Exception {
        if (readied()) {
            lastCallMs = getProcessingTimeService().getCurrentProcessingTime();
            flush();
        }
        if (held != null) {
            Watermark mark = held;
            held = null;
            output.emitWatermark(mark);
        }
    }

    /**
     * Every version made ready since the last call, in Python calls of at most
     * {@link #MAX_VERSIONS_PER_CALL} versions: a version's input and fired timers always in one
     * call (Python orders them by ts), each call's answer applied before the next reads the
     * stored values. One call per batch interval on live input; a backlog's watermark readies
     * thousands of versions at once, and one call for all of them costs more per version
     * (in process, 6,667 versions readied at once: about 7% more Python per event in one call
     * than in calls of 256; docs/BENCHMARKS.md) and holds them all in memory twice.
     */
    private void flush() throws Exception {
        if (inputKeys.isEmpty() && firedTimers.isEmpty()) {
            return;
        }
        LinkedHashSet<String> inputs = inputKeys;
        List<Object[]> timers = firedTimers;
        inputKeys = new LinkedHashSet<>();
        firedTimers = new ArrayList<>();
        Map<String, Integer> callOf = new HashMap<>(); // key -> the call it goes in, in order
        for (String key : inputs) {
            callOf.put(key, callOf.size() / MAX_VERSIONS_PER_CALL);
        }
        for (Object[] fired : timers) {
            callOf.putIfAbsent((String) fired[0], callOf.size() / MAX_VERSIONS_PER_CALL);
        }
        int calls = (callOf.size() + MAX_VERSIONS_PER_CALL - 1) / MAX_VERSIONS_PER_CALL;
        List<List<String>> inputsOf = new ArrayList<>();
        List<List<Object[]>> timersOf = new ArrayList<>();
        for (int call = 0; call < calls; call++) {
            inputsOf.add(new ArrayList<>());
            timersOf.add(new ArrayList<>());
        }
        for (String key : inputs) {
            inputsOf.get(callOf.get(key)).add(key);
        }
        for (Object[] fired : timers) {
            timersOf.get(callOf.get((String) fired[0])).add(fired);
        }
        for (int call = 0; call < calls; call++) {
            fire(inputsOf.get(call), timersOf.get(call));
        }
    }

    /** One Python call: these keys' ready input, then these fired timers in firing order. */
    private void fire(List<String> inputs, List<Object[]> timers) throws Exception {
        Map<String, byte[]> stored = new LinkedHashMap<>();
        List<Object[]> tasks = new ArrayList<>();
        for (String key : inputs) {
            setCurrentKey(Row.of(key));
            List<Object[]> records = ready(key);
            if (records.isEmpty()) {
                continue; // a spilled input's timer, its input taken at the call it was readied
            }
            stored.put(key, storedValue(key));
            tasks.add(new Object[] {0L, key, records});
        }
        for (Object[] fired : timers) {
            String key = (String) fired[0];
            if (!stored.containsKey(key)) {
                setCurrentKey(Row.of(key));
                stored.put(key, storedValue(key));
            }
            tasks.add(new Object[] {1L, key, fired[1]});
        }
        versionsBatched.inc(stored.size());
        MsgPack.Writer payload = new MsgPack.Writer();
        payload.array(3).integer(watermark).array(stored.size());
        for (Map.Entry<String, byte[]> entry : stored.entrySet()) {
            payload.array(2).string(entry.getKey()).binary(entry.getValue());
        }
        payload.array(tasks.size());
        for (Object[] task : tasks) {
            payload.array(3).integer((Long) task[0]).string((String) task[1]);
            if (task[2] instanceof Long) {
                payload.integer((Long) task[2]);
            } else {
                @SuppressWarnings("unchecked")
                List<Object[]> entries = (List<Object[]>) task[2];
                payload.array(entries.size());
                for (Object[] entry : entries) {
                    payload.array(4).string((String) entry[0]).string((String) entry[1])
                            .integer((Long) entry[2]).integer((Long) entry[3]);
                }
            }
        }
        long started = System.nanoTime();
        byte[] answer = call("fire", payload.bytes());
        long called = System.nanoTime();
        applyAnswer(answer, watermark);
        long applied = System.nanoTime();
        pythonNanos.inc(called - started);
        if (applied - started > 1_000_000_000L) {
            LOG.info("BatchedVersions: {} versions, {} tasks at watermark {}: Python {} ms, "
                    + "answer applied {} ms", stored.size(), tasks.size(), watermark,
                    (called - started) / 1_000_000, (applied - called) / 1_000_000);
        }
    }

    /** The current key's held input with ts <= watermark: {topic, value, ts, seq} by ts, then
     * seq, then arrival; no longer held. Keyed state is read only for a key whose `pending`
     * input a timer readied; that input arrived before any the key holds in memory. */
    private List<Object[]> ready(String key) throws Exception {
        List<HeldInput.Record> due = new ArrayList<>();
        if (pendingKeys.remove(key)) {
            // The values as the scan read them: one RocksDB seek for the key, not a lookup per ts.
            List<Long> stamps = new ArrayList<>();
            for (Map.Entry<Long, String[]> entry : pending.entries()) {
                if (entry.getKey() <= watermark) {
                    stamps.add(entry.getKey());
                    String[] held = entry.getValue();
                    for (int i = 0; i < held.length; i += 3) {
                        due.add(new HeldInput.Record(held[i], held[i + 1], entry.getKey(),
                                Long.parseLong(held[i + 2])));
                    }
                }
            }
            for (Long ts : stamps) {
                pending.remove(ts);
            }
        }
        due.addAll(heldInput.take(key, watermark));
        due.sort(HeldInput.ORDER); // stable: arrival
        List<Object[]> records = new ArrayList<>(due.size());
        for (HeldInput.Record record : due) {
            records.add(new Object[] {record.topic, record.value, record.ts, record.seq});
        }
        return records;
    }

    /** Python's answer: [stored values, timer changes, rows, metric updates, broadcast puts]. */
    @SuppressWarnings("unchecked")
    private void applyAnswer(byte[] answer, long timestamp) throws Exception {
        List<Object> parts = (List<Object>) MsgPack.read(answer);
        for (Object item : (List<Object>) parts.get(0)) {
            List<Object> entry = (List<Object>) item;
            String key = (String) entry.get(0);
            setCurrentKey(Row.of(key));
            byte[] value = (byte[]) entry.get(1);
            if (value == null) {
                version.clear();
            } else {
                version.update(value);
            }
            if (restoredKeys.remove(key)) {
                for (ValueState<?> state : pyflinkValues) {
                    state.clear();
                }
            }
        }
        for (Object item : (List<Object>) parts.get(1)) {
            List<Object> change = (List<Object>) item;
            setCurrentKey(Row.of((String) change.get(0)));
            long at = (Long) change.get(1);
            if (Boolean.TRUE.equals(change.get(2))) {
                timers.registerEventTimeTimer(VERSION, at);
            } else {
                timers.deleteEventTimeTimer(VERSION, at);
            }
            pyflinkTimers.deleteEventTimeTimer(VoidNamespace.INSTANCE, at); // fires once, as ours
        }
        StreamRecord<Row> record = new StreamRecord<>(null, timestamp);
        for (Object item : (List<Object>) parts.get(2)) {
            output.collect(record.replace(Row.of(((List<Object>) item).toArray())));
        }
        for (Object item : (List<Object>) parts.get(3)) {
            metrics.apply((List<Object>) item);
        }
        for (Object item : (List<Object>) parts.get(4)) {
            List<Object> put = (List<Object>) item;
            broadcast.put((String) put.get(0), (String) put.get(1));
        }
    }

    /** The counts so far in the TaskManager's log at each checkpoint too: benchmarks read
     * them there (a cancelled job never closes its operators). */
    @Override
    public void snapshotState(StateSnapshotContext context) throws Exception {
        super.snapshotState(context);
        snapshotHeld(context);
        logCounts();
    }

    /** What is held in memory (not yet readied: readied input was decided before the barrier,
     * {@link #prepareSnapshotPreBarrier}), as raw keyed state: per key group a length and
     * {@link HeldInput#snapshot}'s bytes, written as they are (an operator-state list of byte
     * arrays went through Flink's checkpoint stream one byte per call). */
    private void snapshotHeld(StateSnapshotContext context) throws Exception {
        if (heldInput.size() == 0) {
            return;
        }
        int maxParallelism = getRuntimeContext().getTaskInfo().getMaxNumberOfParallelSubtasks();
        KeyedStateCheckpointOutputStream out = context.getRawKeyedOperatorStateOutput();
        long bytes = 0;
        for (Map.Entry<Integer, byte[]> group : heldInput.snapshot(maxParallelism).entrySet()) {
            out.startNewKeyGroup(group.getKey());
            DataOutputStream data = new DataOutputStream(out); // not closed: Flink's stream
            data.writeInt(group.getValue().length);
            data.write(group.getValue());
            data.flush();
            bytes += group.getValue().length;
        }
        LOG.debug("BatchedVersions {}: checkpoint {} holds {} records in memory, {} bytes",
                handlerClass, context.getCheckpointId(), heldInput.size(), bytes);
    }

    private void logCounts() {
        LOG.info("BatchedVersions {} {}: python_calls {} versions_batched {} records_in {}"
                        + " python_fire_ms {}",
                handlerClass,
                getRuntimeContext().getTaskInfo().getIndexOfThisSubtask(),
                pythonCalls == null ? 0 : pythonCalls.getCount(),
                versionsBatched == null ? 0 : versionsBatched.getCount(),
                recordsIn == null ? 0 : recordsIn.getCount(),
                pythonNanos == null ? 0 : pythonNanos.getCount() / 1_000_000);
    }

    @Override
    public void close() throws Exception {
        logCounts();
        try {
            python.close();
        } finally {
            super.close();
        }
    }
}
