package io.modstream.flink;

import java.io.Serializable;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.WeakHashMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;

import org.apache.flink.metrics.Gauge;
import org.apache.flink.metrics.MetricGroup;

import org.apache.flink.kafka.shaded.org.apache.kafka.clients.admin.Admin;
import org.apache.flink.kafka.shaded.org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.flink.kafka.shaded.org.apache.kafka.clients.admin.ListOffsetsOptions;
import org.apache.flink.kafka.shaded.org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.flink.kafka.shaded.org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.flink.kafka.shaded.org.apache.kafka.common.IsolationLevel;
import org.apache.flink.kafka.shaded.org.apache.kafka.common.TopicPartition;

/**
 * What the broker holds for each lane ({@code topic#partition}): the end a read_committed
 * consumer can reach (the last stable offset) and the job's committed position (where a restored
 * source resumes, as of the last completed checkpoint). {@link ValidatedTime} holds event time
 * for a lane whose input is on the broker but not read yet, however the consumer orders its
 * fetches: round counting alone let event time pass a partition whose fetch came late (the fault
 * run after a 100 s machine stall, docs/RELIABILITY.md, "Exactly once").
 *
 * <p>Observations only ever lag the truth (ends and committed positions only grow), so a lane
 * seen with input pending had that input; one not seen so falls back to the other rules.
 *
 * <p>{@link Broker} also reads each lane's high watermark, and reports per lane how far the last
 * stable offset is behind it and for how long it has not moved ({@link StableEnd}, metrics
 * {@code unstable_records} and {@code lso_stalled_ms}): an open transaction holds every record
 * behind it, and nothing else says so.
 */
public interface EndOffsets extends Serializable {
    long UNKNOWN = -1L;

    /** The lane's last stable offset as last observed, or {@link #UNKNOWN}. */
    long end(String lane);

    /** The job's committed offset of the lane, or {@link #UNKNOWN}. */
    long committed(String lane);

    /** Nothing known (replay, tests, no broker). */
    EndOffsets NONE = new EndOffsets() {
        private static final long serialVersionUID = 1L;

        @Override
        public long end(String lane) {
            return UNKNOWN;
        }

        @Override
        public long committed(String lane) {
            return UNKNOWN;
        }
    };

    /** Ends and committed positions set by hand (tests). */
    final class Manual implements EndOffsets {
        private static final long serialVersionUID = 1L;
        private final Map<String, Long> ends = new HashMap<>();
        private final Map<String, Long> committed = new HashMap<>();

        public void setEnd(String lane, long offset) {
            ends.put(lane, offset);
        }

        public void setCommitted(String lane, long offset) {
            committed.put(lane, offset);
        }

        @Override
        public long end(String lane) {
            return ends.getOrDefault(lane, UNKNOWN);
        }

        @Override
        public long committed(String lane) {
            return committed.getOrDefault(lane, UNKNOWN);
        }
    }

    /**
     * Polls one broker for the given lanes every {@code POLL_MS} on a daemon thread, shared by
     * the generators of one (bootstrap, group) in this JVM. Asked for nothing for {@code IDLE_MS}
     * (its job restarted elsewhere or was cancelled), the thread closes its client and ends; asked
     * again (an end, a gauge read by the metric reporter), it starts again. A generator whose
     * lanes are all live asks for no end for minutes, so without the restart a retired poller
     * would have left ends and gauges frozen while the job still ran.
     */
    final class Broker implements EndOffsets {
        private static final long serialVersionUID = 1L;
        static final long POLL_MS = 500;
        static final long IDLE_MS = 60_000;
        static final long RESTART_MS = 30_000; // a read restarts a stopped poller at most this often
        private static final Map<String, Broker> SHARED = new ConcurrentHashMap<>();

        private final String bootstrap;
        private final String group;
        private final Set<String> lanes = ConcurrentHashMap.newKeySet();
        private final Map<String, Long> ends = new ConcurrentHashMap<>();
        private final Map<String, Long> committed = new ConcurrentHashMap<>();
        private final Map<String, StableEnd> stability = new ConcurrentHashMap<>();
        // Metric groups reporting this poller's lanes -> the lanes registered there; weak: a
        // cancelled job's operator group goes with it.
        private final transient Map<MetricGroup, Set<String>> reported = new WeakHashMap<>();
        private volatile long askedAt = System.currentTimeMillis();
        private volatile boolean running;
        private volatile long startedAt;

        private final String[] clientProperties;

        private Broker(String bootstrap, String group, String[] clientProperties) {
            this.bootstrap = bootstrap;
            this.group = group;
            this.clientProperties = clientProperties.clone();
        }

        public static Broker of(String bootstrap, String group, String[] lanes) {
            return of(bootstrap, group, lanes, new String[0]);
        }

        /**
         * The poller for this broker and consumer group, started if it is not running;
         * {@code clientProperties} (KEY=VALUE) are the admin client's security settings.
         */
        public static synchronized Broker of(
                String bootstrap, String group, String[] lanes, String[] clientProperties) {
            Broker broker = SHARED.computeIfAbsent(
                    bootstrap + "\u001f" + group, key -> new Broker(bootstrap, group, clientProperties));
            for (String lane : lanes) {
                broker.lanes.add(lane);
            }
            broker.askedAt = System.currentTimeMillis();
            broker.startIfStopped();
            return broker;
        }

        /** Starts the polling thread unless it runs; the caller holds the lock on Broker.class. */
        private void startIfStopped() {
            if (!running) {
                running = true;
                startedAt = System.currentTimeMillis();
                Thread thread = new Thread(this::loop, "modstream-end-offsets");
                thread.setDaemon(true);
                thread.start();
            }
        }

        /**
         * Someone still reads what this poller sees: keep it polling, and start it again if it
         * retired (at most every {@code RESTART_MS}: a client that cannot be made ends the thread
         * at once). A read racing the retirement may find it running and be lost; the next read
         * starts it (reads come every periodic emit or scrape).
         */
        private void ask() {
            long now = System.currentTimeMillis();
            askedAt = now;
            if (!running && now - startedAt >= RESTART_MS) {
                synchronized (Broker.class) {
                    startIfStopped();
                }
            }
        }

        @Override
        public long end(String lane) {
            ask();
            lanes.add(lane);
            return ends.getOrDefault(lane, UNKNOWN);
        }

        @Override
        public long committed(String lane) {
            return committed.getOrDefault(lane, UNKNOWN);
        }

        /** The lane's high watermark minus its last stable offset, as last observed (else 0). */
        public long unstableRecords(String lane) {
            ask();
            StableEnd seen = stability.get(lane);
            return seen == null ? 0 : seen.unstableRecords();
        }

        /** How long the lane's last stable offset has stayed below its end unmoved, ms (else 0). */
        public long lsoStalledMs(String lane) {
            ask();
            StableEnd seen = stability.get(lane);
            return seen == null ? 0 : seen.stalledMs(System.currentTimeMillis());
        }

        /**
         * Report every lane polled, now and as lanes are added, in {@code group} (an operator's
         * metric group): {@code modstream.topic.<topic>.partition.<n>} gauges
         * {@code unstable_records} and {@code lso_stalled_ms}, read on the reporter's thread from
         * what the poller saw (Java only, no Python).
         */
        public Broker reportTo(MetricGroup group) {
            synchronized (reported) {
                reported.putIfAbsent(group, new HashSet<>());
            }
            registerGauges();
            return this;
        }

        private void registerGauges() {
            synchronized (reported) {
                for (Map.Entry<MetricGroup, Set<String>> entry : reported.entrySet()) {
                    for (String lane : lanes) {
                        TopicPartition partition = partitionOf(lane);
                        if (partition != null && entry.getValue().add(lane)) {
                            MetricGroup laneGroup = entry.getKey().addGroup("modstream")
                                    .addGroup("topic", partition.topic())
                                    .addGroup("partition", String.valueOf(partition.partition()));
                            laneGroup.gauge("unstable_records", (Gauge<Long>) () -> unstableRecords(lane));
                            laneGroup.gauge("lso_stalled_ms", (Gauge<Long>) () -> lsoStalledMs(lane));
                        }
                    }
                }
            }
        }

        private void loop() {
            Properties properties = new Properties();
            for (String property : clientProperties) {
                int equals = property.indexOf('=');
                properties.put(property.substring(0, equals), property.substring(equals + 1));
            }
            properties.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
            properties.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, "5000");
            properties.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "5000");
            try (Admin admin = Admin.create(properties)) {
                while (!retiredIdle()) {
                    poll(admin);
                    Thread.sleep(POLL_MS);
                }
                return; // retiredIdle marked it stopped; a newer poller may be running already
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            } catch (RuntimeException e) {
                // No broker client at all: nothing is known, and the other rules apply.
            }
            synchronized (Broker.class) {
                running = false; // ended early: the next generator starts it again
            }
        }

        /**
         * Whether nobody asked for {@code IDLE_MS}; if so the poller is marked stopped under the
         * lock {@link #of} starts it with, so a generator asking at that moment starts a new one
         * instead of finding this one running and about to end.
         */
        private boolean retiredIdle() {
            synchronized (Broker.class) {
                if (System.currentTimeMillis() - askedAt < IDLE_MS) {
                    return false;
                }
                running = false;
                return true;
            }
        }

        private void poll(Admin admin) throws InterruptedException {
            Map<TopicPartition, OffsetSpec> wanted = new HashMap<>();
            for (String lane : lanes) {
                TopicPartition partition = partitionOf(lane);
                if (partition != null) {
                    wanted.put(partition, OffsetSpec.latest());
                }
            }
            if (wanted.isEmpty()) {
                return;
            }
            Map<TopicPartition, Long> stable = new HashMap<>();
            try {
                admin.listOffsets(wanted, new ListOffsetsOptions(IsolationLevel.READ_COMMITTED))
                        .all()
                        .get(5, TimeUnit.SECONDS)
                        .forEach((partition, info) -> {
                            ends.merge(laneOf(partition), info.offset(), Math::max);
                            stable.put(partition, info.offset());
                        });
                Map<TopicPartition, OffsetAndMetadata> positions = admin.listConsumerGroupOffsets(group)
                        .partitionsToOffsetAndMetadata()
                        .get(5, TimeUnit.SECONDS);
                positions.forEach((partition, position) -> {
                    if (position != null) {
                        committed.merge(laneOf(partition), position.offset(), Math::max);
                    }
                });
            } catch (java.util.concurrent.ExecutionException | java.util.concurrent.TimeoutException e) {
                // The broker is away (a restart, a pause): keep what was seen; it only lags.
            }
            pollHighWatermarks(admin, wanted, stable);
        }

        /**
         * The lanes' high watermarks against the LSOs {@code stable} just read, after what event
         * time reads (ends, committed positions), so their freshness does not depend on this
         * request; a lane whose LSO was not read this time keeps its last observation.
         */
        private void pollHighWatermarks(
                Admin admin, Map<TopicPartition, OffsetSpec> wanted, Map<TopicPartition, Long> stable)
                throws InterruptedException {
            if (stable.isEmpty()) {
                return;
            }
            try {
                long now = System.currentTimeMillis();
                admin.listOffsets(wanted, new ListOffsetsOptions(IsolationLevel.READ_UNCOMMITTED))
                        .all()
                        .get(5, TimeUnit.SECONDS)
                        .forEach((partition, info) -> stability
                                .computeIfAbsent(laneOf(partition), lane -> new StableEnd())
                                .observe(stable.getOrDefault(partition, UNKNOWN), info.offset(), now));
                registerGauges();
            } catch (java.util.concurrent.ExecutionException | java.util.concurrent.TimeoutException e) {
                // The broker is away: the gauges keep the last observation (a stall keeps growing).
            }
        }

        static TopicPartition partitionOf(String lane) {
            int hash = lane.lastIndexOf('#');
            if (hash <= 0) {
                return null;
            }
            try {
                return new TopicPartition(lane.substring(0, hash), Integer.parseInt(lane.substring(hash + 1)));
            } catch (NumberFormatException e) {
                return null;
            }
        }

        static String laneOf(TopicPartition partition) {
            return partition.topic() + "#" + partition.partition();
        }
    }
}
