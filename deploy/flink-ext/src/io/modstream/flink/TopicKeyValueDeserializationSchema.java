package io.modstream.flink;

import java.nio.ByteBuffer;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;

import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.connector.kafka.source.reader.deserializer.KafkaRecordDeserializationSchema;
import org.apache.flink.kafka.shaded.org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.flink.types.Row;
import org.apache.flink.util.Collector;

/**
 * Reads a Kafka record as {@code Row(topic, key, value, ts, lane)}: three strings, the event time
 * in epoch milliseconds (the value's top-level {@code ts} when it has one, else the Kafka record's
 * timestamp, {@link PayloadTime}; not validated: a job validates before trusting it) and the
 * record's lane, {@code topic#partition@offset}, for watermarks kept per partition after
 * validation ({@link ValidatedTime}: the offset tells it whether the partition still holds input
 * on the broker).
 *
 * <p>PyFlink's KafkaSource only offers value-only deserializers; modstream needs the source topic
 * (one source reads several topics), the key (a DLQ record names both) and the record timestamp
 * (the event time of an input too broken to carry its own `ts`). Bytes that are not UTF-8 are
 * not repaired: they arrive as a marker naming their digest and fail validation in Python, which
 * routes them to the DLQ rather than losing them here.
 */
public final class TopicKeyValueDeserializationSchema implements KafkaRecordDeserializationSchema<Row> {
    private static final long serialVersionUID = 1L;
    /** Stands for a value that is not UTF-8 (modstream/contract/registry.py NOT_UTF8). */
    static final String NOT_UTF8 = "\u0000modstream:not-utf-8:";

    @Override
    public void deserialize(ConsumerRecord<byte[], byte[]> record, Collector<Row> out) {
        byte[] key = record.key();
        byte[] value = record.value();
        String text = value == null ? null : utf8(value);
        out.collect(Row.of(
                record.topic(),
                key == null ? null : new String(key, StandardCharsets.UTF_8),
                text,
                PayloadTime.of(text, record.timestamp()),
                record.topic() + "#" + record.partition() + "@" + record.offset()));
    }

    /**
     * The value as text, or, when it is not UTF-8, {@link #NOT_UTF8} followed by the sha256 and
     * the length of the bytes: no JSON starts with NUL, so every job refuses it (modstream.contract.registry
     * names it), and no byte of it is altered into an acceptable record on the way.
     */
    static String utf8(byte[] value) {
        try {
            return StandardCharsets.UTF_8.newDecoder().decode(ByteBuffer.wrap(value)).toString();
        } catch (CharacterCodingException e) {
            return NOT_UTF8 + sha256(value) + ":" + value.length;
        }
    }

    private static String sha256(byte[] value) {
        try {
            byte[] digest = MessageDigest.getInstance("SHA-256").digest(value);
            StringBuilder hex = new StringBuilder(64);
            for (byte b : digest) {
                hex.append(String.format("%02x", b));
            }
            return hex.toString();
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException(e);
        }
    }

    @Override
    public TypeInformation<Row> getProducedType() {
        return Types.ROW(Types.STRING, Types.STRING, Types.STRING, Types.LONG, Types.STRING);
    }
}
