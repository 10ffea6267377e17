package io.modstream.flink;

import java.io.ByteArrayOutputStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;

/**
 * The subset of MessagePack that {@link BatchedVersions} and its Python side
 * (modstream/jobs/moderation/batch.py, msgspec) exchange: nil, booleans, integers, floats, strings,
 * binaries and arrays. No library: the payload is a handful of shapes, and the jar stays
 * dependency-free.
 */
final class MsgPack {
    private MsgPack() {}

    /** Appends MessagePack values to a growing buffer. */
    static final class Writer {
        private final ByteArrayOutputStream out = new ByteArrayOutputStream(4096);

        byte[] bytes() {
            return out.toByteArray();
        }

        Writer nil() {
            out.write(0xc0);
            return this;
        }

        Writer array(int size) {
            if (size < 16) {
                out.write(0x90 | size);
            } else if (size < 65536) {
                out.write(0xdc);
                short16(size);
            } else {
                out.write(0xdd);
                int32(size);
            }
            return this;
        }

        Writer integer(long value) {
            if (value >= 0 && value < 128) {
                out.write((int) value);
            } else if (value < 0 && value >= -32) {
                out.write((int) (value & 0xff));
            } else {
                out.write(0xd3);
                int32((int) (value >>> 32));
                int32((int) value);
            }
            return this;
        }

        Writer string(String value) {
            if (value == null) {
                return nil();
            }
            byte[] data = value.getBytes(StandardCharsets.UTF_8);
            int size = data.length;
            if (size < 32) {
                out.write(0xa0 | size);
            } else if (size < 256) {
                out.write(0xd9);
                out.write(size);
            } else if (size < 65536) {
                out.write(0xda);
                short16(size);
            } else {
                out.write(0xdb);
                int32(size);
            }
            out.write(data, 0, size);
            return this;
        }

        Writer binary(byte[] value) {
            if (value == null) {
                return nil();
            }
            int size = value.length;
            if (size < 256) {
                out.write(0xc4);
                out.write(size);
            } else if (size < 65536) {
                out.write(0xc5);
                short16(size);
            } else {
                out.write(0xc6);
                int32(size);
            }
            out.write(value, 0, size);
            return this;
        }

        private void short16(int value) {
            out.write((value >>> 8) & 0xff);
            out.write(value & 0xff);
        }

        private void int32(int value) {
            out.write((value >>> 24) & 0xff);
            out.write((value >>> 16) & 0xff);
            out.write((value >>> 8) & 0xff);
            out.write(value & 0xff);
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
