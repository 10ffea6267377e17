package io.modstream.flink;

import java.nio.charset.StandardCharsets;

import org.apache.flink.connector.kafka.sink.KafkaRecordSerializationSchema;
import org.apache.flink.kafka.shaded.org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.flink.types.Row;

/**
 * Writes a PyFlink {@code Row(topic, key, value)} of three strings as one Kafka record.
 *
 * <p>PyFlink's own record serializer can set a topic per record but cannot take the key from a
 * field, and modstream needs both: every job writes all its outputs (decisions, actions, DLQ)
 * through one transactional sink, keyed by {@code content_id}. A null key leaves partitioning to
 * Kafka's default sticky partitioner.
 */
public final class TopicKeyValueSerializationSchema implements KafkaRecordSerializationSchema<Row> {
    private static final long serialVersionUID = 1L;

    @Override
    public ProducerRecord<byte[], byte[]> serialize(Row element, KafkaSinkContext context, Long timestamp) {
        String topic = (String) element.getField(0);
        if (topic == null || topic.isEmpty()) {
            throw new IllegalArgumentException("modstream sink: record without a topic (field 0)");
        }
        String key = (String) element.getField(1);
        String value = (String) element.getField(2);
        // No record timestamp: the producer stamps the time of writing. The element timestamp
        // is event time, which for a replay or backfill of old input lies far in the past and
        // would let the broker's time-based retention delete fresh output at once.
        return new ProducerRecord<>(
                topic,
                null,
                (Long) null,
                key == null ? null : key.getBytes(StandardCharsets.UTF_8),
                value == null ? null : value.getBytes(StandardCharsets.UTF_8));
    }
}
