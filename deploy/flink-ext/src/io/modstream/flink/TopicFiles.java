package io.modstream.flink;

import java.io.BufferedWriter;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.HashMap;
import java.util.Map;

import org.apache.flink.api.common.functions.OpenContext;
import org.apache.flink.streaming.api.functions.ProcessFunction;
import org.apache.flink.types.Row;
import org.apache.flink.util.Collector;

/**
 * A bounded job's file sink (`modstream replay`): each {@code Row(topic, key, value)}'s value as
 * one line of {@code <outDir>/<topic>.jsonl}, in the order the rows reach it (run it at
 * parallelism 1). In Java: the Python writer it replaces cost a Python call per output row
 * (a 20,000-version replay writes 156,000), behind which the whole job waited at the end of
 * input (docs/BENCHMARKS.md, "Replay"). Topics starting with {@code skipPrefix} are dropped.
 */
public final class TopicFiles extends ProcessFunction<Row, Row> {
    private static final long serialVersionUID = 1L;
    private final String outDir;
    private final String skipPrefix;
    private transient Map<String, BufferedWriter> files;

    public TopicFiles(String outDir, String skipPrefix) {
        this.outDir = outDir;
        this.skipPrefix = skipPrefix;
    }

    @Override
    public void open(OpenContext context) {
        files = new HashMap<>();
    }

    @Override
    public void processElement(Row row, Context ctx, Collector<Row> out) throws IOException {
        String topic = (String) row.getField(0);
        if (!skipPrefix.isEmpty() && topic.startsWith(skipPrefix)) {
            return;
        }
        BufferedWriter lines = files.get(topic);
        if (lines == null) {
            Path path = Paths.get(outDir, topic + ".jsonl");
            lines = Files.newBufferedWriter(path, StandardCharsets.UTF_8);
            files.put(topic, lines);
        }
        lines.write((String) row.getField(2));
        lines.write('\n');
    }

    @Override
    public void close() throws Exception {
        if (files != null) {
            for (BufferedWriter lines : files.values()) {
                lines.close();
            }
        }
        super.close();
    }
}
