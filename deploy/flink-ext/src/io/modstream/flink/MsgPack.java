package io.modstream.flink;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

/**
 * The subset of MessagePack that {@link BatchedVersions} and its Python side
 * (modstream/jobs/moderation/batch.py, msgspec) exchange: nil, booleans, integers, floats, strings,
 * binaries and arrays. No library: the payload is a handful of shapes, and the jar stays
 * dependency-free.
 */
final class MsgPack {
    private MsgPack() {}

    /** Appends MessagePack values to a growing buffer. Its own array, not a
     * ByteArrayOutputStream: that one's writes are synchronized, a lock taken per byte, and in
     * the version operator's thread the writer was 4.5% of its samples (perf, stop 51,
     * docs/BENCHMARKS.md). */
    static final class Writer {
        private byte[] buf;
        private int size;

        Writer() {
            this(4096);
        }

        /** A writer whose first array holds {@code capacity} bytes: a writer sized to what it
         * will write grows no array and copies none at {@link #bytes}. */
        Writer(int capacity) {
            buf = new byte[Math.max(16, capacity)];
        }

        /** What was written: the writer's own array when it is exactly full, else a copy. */
        byte[] bytes() {
            return size == buf.length ? buf : Arrays.copyOf(buf, size);
        }

        /** The bytes of an array head for {@code count} elements ({@link #array}). */
        static int arrayHead(int count) {
            return count < 16 ? 1 : count < 65536 ? 3 : 5;
        }

        /** The bytes written so far. */
        int size() {
            return size;
        }

        /** A copy of what was written from {@code start} ({@link #size} then) on. */
        byte[] since(int start) {
            return Arrays.copyOfRange(buf, start, size);
        }

        /** Values already written as MessagePack (what {@link #since} gave), appended as they
         * are. */
        Writer packed(byte[] values) {
            raw(values);
            return this;
        }

        Writer nil() {
            ensure(1);
            buf[size++] = (byte) 0xc0;
            return this;
        }

        Writer array(int count) {
            ensure(5);
            if (count < 16) {
                buf[size++] = (byte) (0x90 | count);
            } else if (count < 65536) {
                buf[size++] = (byte) 0xdc;
                short16(count);
            } else {
                buf[size++] = (byte) 0xdd;
                int32(count);
            }
            return this;
        }

        Writer integer(long value) {
            ensure(9);
            if (value >= -32 && value < 128) {  // positive or negative fixint
                buf[size++] = (byte) value;
            } else {
                buf[size++] = (byte) 0xd3;
                int32((int) (value >>> 32));
                int32((int) value);
            }
            return this;
        }

        Writer string(String value) {
            if (value == null) {
                return nil();
            }
            int length = value.length();
            for (int i = 0; i < length; i++) {
                if (value.charAt(i) > 0x7f) {  // not ASCII: the UTF-8 encoder
                    byte[] data = value.getBytes(StandardCharsets.UTF_8);
                    header(data.length);
                    raw(data);
                    return this;
                }
            }
            // ASCII (most of what crosses: ids, topics, JSON records): its UTF-8 bytes are its
            // chars' low bytes, copied straight into the buffer without an array in between.
            header(length);
            ensure(length);
            value.getBytes(0, length, buf, size);
            size += length;
            return this;
        }

        Writer binary(byte[] value) {
            if (value == null) {
                return nil();
            }
            sized(value.length, 0xc4, 0xc5, 0xc6);  // bin8, bin16, bin32
            raw(value);
            return this;
        }

        /** A string's head for {@code count} bytes: fixstr below 32, else str8, str16, str32. */
        private void header(int count) {
            if (count < 32) {
                ensure(1);
                buf[size++] = (byte) (0xa0 | count);
            } else {
                sized(count, 0xd9, 0xda, 0xdb);
            }
        }

        /** A head of one byte, then {@code count} in 8, 16 or 32 bits, whichever holds it. */
        private void sized(int count, int head8, int head16, int head32) {
            ensure(5);
            if (count < 256) {
                buf[size++] = (byte) head8;
                buf[size++] = (byte) count;
            } else if (count < 65536) {
                buf[size++] = (byte) head16;
                short16(count);
            } else {
                buf[size++] = (byte) head32;
                int32(count);
            }
        }

        private void raw(byte[] data) {
            ensure(data.length);
            System.arraycopy(data, 0, buf, size, data.length);
            size += data.length;
        }

        private void ensure(int more) {
            if (size + more > buf.length) {
                buf = Arrays.copyOf(buf, Math.max(buf.length * 2, size + more));
            }
        }

        private void short16(int value) {
            buf[size++] = (byte) (value >>> 8);
            buf[size++] = (byte) value;
        }

        private void int32(int value) {
            buf[size++] = (byte) (value >>> 24);
            buf[size++] = (byte) (value >>> 16);
            buf[size++] = (byte) (value >>> 8);
            buf[size++] = (byte) value;
        }
    }

    /**
     * Reads one MessagePack value: null, Boolean, Long, Double, String, byte[] or List of
     * those.
     */
    static Object read(byte[] data) {
        Reader reader = new Reader(data);
        Object value = reader.value();
        if (reader.at != data.length) {
            throw new IllegalArgumentException("MsgPack: trailing bytes after the value");
        }
        return value;
    }

    private static final class Reader {
        private final byte[] data;
        private int at;

        Reader(byte[] data) {
            this.data = data;
        }

        Object value() {
            int head = data[at++] & 0xff;
            if (head <= 0x7f) {
                return (long) head;
            }
            if (head >= 0xe0) {
                return (long) (byte) head;
            }
            if ((head & 0xf0) == 0x90) {
                return array(head & 0x0f);
            }
            if ((head & 0xe0) == 0xa0) {
                return string(head & 0x1f);
            }
            switch (head) {
                case 0xc0: return null;
                case 0xc2: return Boolean.FALSE;
                case 0xc3: return Boolean.TRUE;
                case 0xc4: return binary(unsigned(1));
                case 0xc5: return binary(unsigned(2));
                case 0xc6: return binary(unsigned(4));
                case 0xca: return (double) Float.intBitsToFloat((int) unsigned(4));
                case 0xcb: return Double.longBitsToDouble(signed(8));
                case 0xcc: return unsigned(1);
                case 0xcd: return unsigned(2);
                case 0xce: return unsigned(4);
                case 0xcf: return signed(8);
                case 0xd0: return (long) (byte) unsigned(1);
                case 0xd1: return (long) (short) unsigned(2);
                case 0xd2: return (long) (int) unsigned(4);
                case 0xd3: return signed(8);
                case 0xd9: return string(unsigned(1));
                case 0xda: return string(unsigned(2));
                case 0xdb: return string(unsigned(4));
                case 0xdc: return array(unsigned(2));
                case 0xdd: return array(unsigned(4));
                default:
                    throw new IllegalArgumentException("MsgPack: unsupported type 0x" + Integer.toHexString(head));
            }
        }

        private List<Object> array(long size) {
            List<Object> items = new ArrayList<>((int) size);
            for (long i = 0; i < size; i++) {
                items.add(value());
            }
            return items;
        }

        private String string(long size) {
            String value = new String(data, at, (int) size, StandardCharsets.UTF_8);
            at += (int) size;
            return value;
        }

        private byte[] binary(long size) {
            byte[] value = new byte[(int) size];
            System.arraycopy(data, at, value, 0, (int) size);
            at += (int) size;
            return value;
        }

        private long unsigned(int size) {
            long value = 0;
            for (int i = 0; i < size; i++) {
                value = (value << 8) | (data[at++] & 0xff);
            }
            return value;
        }

        private long signed(int size) {
            return unsigned(size);
        }
    }
}
