package io.modstream.flink;

import java.util.HashMap;
import java.util.List;
import java.util.Map;

import org.apache.flink.metrics.Counter;
import org.apache.flink.metrics.Histogram;
import org.apache.flink.metrics.MetricGroup;
import org.apache.flink.runtime.metrics.DescriptiveStatisticsHistogram;

/**
 * The metric updates a Python side answers with ({@code RecordedMetrics},
 * modstream/jobs/moderation/batch.py), applied to an operator's metric group under the names
 * modstream/jobs/metrics.py gives them: {@code [kind, name, [label, value, ...], amount]}, a
 * counter's increment, a gauge's value or a histogram's sample, each registered on first use.
 * {@link BatchedVersions} and {@link BatchedDecode} share it.
 */
final class PythonMetrics {
    private final MetricGroup group;
    private final Map<String, Object> made = new HashMap<>();

    PythonMetrics(MetricGroup group) {
        this.group = group;
    }

    @SuppressWarnings("unchecked")
    void apply(List<Object> update) {
        String kind = (String) update.get(0);
        String name = (String) update.get(1);
        List<Object> labels = (List<Object>) update.get(2);
        long amount = ((Number) update.get(3)).longValue();
        String id = kind + "\u001f" + name + "\u001f" + labels;
        Object metric = made.get(id);
        if (metric == null) {
            MetricGroup at = group;
            for (int i = 0; i + 1 < labels.size(); i += 2) {
                at = at.addGroup((String) labels.get(i), (String) labels.get(i + 1));
            }
            if (kind.equals("counter")) {
                metric = at.counter(name);
            } else if (kind.equals("gauge")) {
                long[] cell = new long[1];
                at.gauge(name, () -> cell[0]);
                metric = cell;
            } else {
                metric = at.histogram(name, new DescriptiveStatisticsHistogram(1024));
            }
            made.put(id, metric);
        }
        if (metric instanceof Counter) {
            ((Counter) metric).inc(amount);
        } else if (metric instanceof long[]) {
            ((long[]) metric)[0] = amount;
        } else {
            ((Histogram) metric).update(amount);
        }
    }
}
