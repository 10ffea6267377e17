package io.modstream.flink;

import java.nio.charset.StandardCharsets;

import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.connector.kafka.source.reader.deserializer.KafkaRecordDeserializationSchema;
import org.apache.flink.kafka.shaded.org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.flink.types.Row;
import org.apache.flink.util.Collector;

/**
 * Reads a Kafka record as {@code Row(topic, key, value, ts)}: three strings and the event time in
 * epoch milliseconds: the value's top-level {@code ts} when it has one, else the Kafka record's
 * timestamp ({@link PayloadTime}).
 *
 * <p>PyFlink's KafkaSource only offers value-only deserializers; modstream needs the source topic
 * (one source reads several topics), the key (a DLQ record names both) and the record timestamp
 * (the event time of an input too broken to carry its own `ts`). Bytes that are not
 * UTF-8 are decoded with replacement characters and then fail JSON validation in Python, which
 * routes them to the DLQ rather than losing them here.
 */
public final class TopicKeyValueDeserializationSchema implements KafkaRecordDeserializationSchema<Row> {
    private static final long serialVersionUID = 1L;

    @Override
    public void deserialize(ConsumerRecord<byte[], byte[]> record, Collector<Row> out) {
        byte[] key = record.key();
        byte[] value = record.value();
        String text = value == null ? null : new String(value, StandardCharsets.UTF_8);
        out.collect(Row.of(
                record.topic(),
                key == null ? null : new String(key, StandardCharsets.UTF_8),
                text,
                PayloadTime.of(text, record.timestamp())));
    }

    @Override
    public TypeInformation<Row> getProducedType() {
        return Types.ROW(Types.STRING, Types.STRING, Types.STRING, Types.LONG);
    }
}
