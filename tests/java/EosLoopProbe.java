import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.AuthorizationException;
import org.apache.kafka.common.errors.InvalidProducerEpochException;
import org.apache.kafka.common.errors.OutOfOrderSequenceException;
import org.apache.kafka.common.errors.ProducerFencedException;
import org.apache.kafka.common.errors.TimeoutException;
import org.apache.kafka.common.errors.UnsupportedVersionException;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * An exactly-once consume-transform-produce application that outlives its broker's crashes; one
 * JSON object per event on stdout.
 *
 * <pre>
 *   java EosLoopProbe BOOTSTRAP IN OUT GROUP TID ABORT_EVERY MAX_POLL DEADLINE_S
 * </pre>
 *
 * A read_committed consumer in the classic group GROUP reads IN (complete before the probe starts:
 * its end offsets are read once); for each poll (at most MAX_POLL records) a transactional producer
 * (TID) writes one record per input record to OUT, same partition, value {@code "out-" + input value
 * + "@" + transaction number}, and sendOffsetsToTransaction(next offsets, consumer.groupMetadata()).
 * Every ABORT_EVERY-th transaction is aborted on purpose; then, as a real application does, the
 * consumer seeks back to the group's committed offsets and the input is processed again.
 *
 * Any other failure (the broker is gone, the producer is fenced, the group rebalanced under the
 * transaction, a request timed out) is handled as a real application handles it: an abortable
 * error aborts the transaction; a fatal one, a timeout (whose outcome is unknown), or a failed abort
 * closes the producer and creates a new one with the same transactional id (its initTransactions
 * lets the coordinator finish or abort what the old one left); then the consumer seeks back to the
 * committed offsets (read with require_stable, which waits for any pending transactional commit).
 * The loop ends when the committed offsets reach IN's end offsets.
 *
 * Events: {@code started} (end offsets), {@code progress} after each commit (input records
 * committed), {@code failure} per unplanned failure (stage, exception class, message), {@code done}
 * (committed offsets read from the group, counts); {@code fatal} if the deadline passes first.
 */
public class EosLoopProbe {
    static final long T0 = System.nanoTime();
    static Properties producerProps, consumerProps;
    static long deadline;
    static int failures = 0, producers = 0;

    static Map<String, Object> event(String name) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("event", name);
        m.put("t", (System.nanoTime() - T0) / 1_000_000);
        return m;
    }

    static void failure(String stage, Exception e) {
        failures++;
        Map<String, Object> m = event("failure");
        m.put("stage", stage);
        m.put("error", e.getClass().getSimpleName());
        m.put("message", String.valueOf(e.getMessage()));
        JsonLines.print(m);
        checkDeadline();
    }

    static void checkDeadline() {
        if (System.currentTimeMillis() > deadline) {
            throw new IllegalStateException("deadline passed");
        }
    }

    static KafkaProducer<String, String> newProducer() {
        producers++;
        KafkaProducer<String, String> p = new KafkaProducer<>(producerProps);
        while (true) {
            try {
                p.initTransactions();
                return p;
            } catch (TimeoutException e) {
                failure("initTransactions", e); // may be retried on the same producer
            } catch (KafkaException e) {
                failure("initTransactions", e);
                p.close(Duration.ZERO);
                producers++;
                p = new KafkaProducer<>(producerProps);
            }
        }
    }

    /** After an unplanned failure: abort if the producer can, else replace it. */
    static KafkaProducer<String, String> recover(KafkaProducer<String, String> p, Exception e) {
        boolean fatal = e instanceof ProducerFencedException || e instanceof InvalidProducerEpochException
                || e instanceof OutOfOrderSequenceException || e instanceof AuthorizationException
                || e instanceof UnsupportedVersionException || e instanceof TimeoutException
                || e instanceof IllegalStateException;
        if (!fatal) {
            try {
                p.abortTransaction();
                return p;
            } catch (Exception abort) {
                failure("abortTransaction", abort);
            }
        }
        try {
            p.close(Duration.ZERO);
        } catch (Exception ignored) {
            // closing a broken producer may fail; the new one fences it anyway
        }
        return newProducer();
    }

    /** Seek every assigned partition back to the group's committed offset; returns them all. */
    static Map<TopicPartition, Long> rewind(KafkaConsumer<String, String> c, List<TopicPartition> all) {
        while (true) {
            try {
                Map<TopicPartition, OffsetAndMetadata> committed = c.committed(new java.util.HashSet<>(all));
                Map<TopicPartition, Long> at = new HashMap<>();
                for (TopicPartition tp : all) {
                    OffsetAndMetadata om = committed.get(tp);
                    at.put(tp, om == null ? 0L : om.offset());
                }
                for (TopicPartition tp : c.assignment()) {
                    c.seek(tp, at.get(tp));
                }
                return at;
            } catch (KafkaException e) {
                failure("committed", e);
            }
        }
    }

    static boolean finished(Map<TopicPartition, Long> committed, Map<TopicPartition, Long> end) {
        for (Map.Entry<TopicPartition, Long> e : end.entrySet()) {
            if (committed.getOrDefault(e.getKey(), 0L) < e.getValue()) {
                return false;
            }
        }
        return true;
    }

    static Map<String, Long> byPartition(Map<TopicPartition, Long> m) {
        Map<String, Long> out = new TreeMap<>();
        m.forEach((tp, o) -> out.put(String.valueOf(tp.partition()), o));
        return out;
    }

    public static void main(String[] args) {
        String bootstrap = args[0], in = args[1], out = args[2], group = args[3], tid = args[4];
        int abortEvery = Integer.parseInt(args[5]), maxPoll = Integer.parseInt(args[6]);
        deadline = System.currentTimeMillis() + 1000L * Integer.parseInt(args[7]);

        producerProps = new Properties();
        producerProps.put("bootstrap.servers", bootstrap);
        producerProps.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, tid);
        producerProps.put(ProducerConfig.TRANSACTION_TIMEOUT_CONFIG, "30000");
        producerProps.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, "4000");
        producerProps.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, "4000");
        producerProps.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "8000");
        producerProps.put(ProducerConfig.RECONNECT_BACKOFF_MAX_MS_CONFIG, "500");
        producerProps.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        producerProps.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());

        consumerProps = new Properties();
        consumerProps.put("bootstrap.servers", bootstrap);
        consumerProps.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        consumerProps.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
        consumerProps.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        consumerProps.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        consumerProps.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, String.valueOf(maxPoll));
        consumerProps.put(ConsumerConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "15000");
        consumerProps.put(ConsumerConfig.REQUEST_TIMEOUT_MS_CONFIG, "10000");
        consumerProps.put(ConsumerConfig.RECONNECT_BACKOFF_MAX_MS_CONFIG, "500");
        consumerProps.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        consumerProps.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());

        int txns = 0, commits = 0, plannedAborts = 0;
        try (KafkaConsumer<String, String> c = new KafkaConsumer<>(consumerProps)) {
            List<TopicPartition> all = new ArrayList<>();
            for (PartitionInfo pi : c.partitionsFor(in)) {
                all.add(new TopicPartition(in, pi.partition()));
            }
            Map<TopicPartition, Long> end = c.endOffsets(all);
            Map<String, Object> started = event("started");
            started.put("end", byPartition(end));
            JsonLines.print(started);
            c.subscribe(List.of(in));
            KafkaProducer<String, String> p = newProducer();
            Map<TopicPartition, Long> committed = new HashMap<>();
            try {
                while (!finished(committed, end)) {
                    checkDeadline();
                    ConsumerRecords<String, String> records;
                    try {
                        records = c.poll(Duration.ofMillis(200));
                    } catch (KafkaException e) {
                        failure("poll", e);
                        committed = rewind(c, all);
                        continue;
                    }
                    if (records.isEmpty()) {
                        continue;
                    }
                    txns++;
                    boolean abort = txns % abortEvery == 0;
                    Map<TopicPartition, OffsetAndMetadata> next = new HashMap<>();
                    String stage = "beginTransaction";
                    try {
                        p.beginTransaction();
                        stage = "send";
                        for (ConsumerRecord<String, String> r : records) {
                            p.send(new ProducerRecord<>(out, r.partition(), r.key(), "out-" + r.value() + "@" + txns));
                            next.put(new TopicPartition(r.topic(), r.partition()), new OffsetAndMetadata(r.offset() + 1));
                        }
                        stage = "sendOffsetsToTransaction";
                        p.sendOffsetsToTransaction(next, c.groupMetadata());
                        if (abort) {
                            stage = "abortTransaction";
                            p.abortTransaction();
                            plannedAborts++;
                            committed = rewind(c, all);
                        } else {
                            stage = "commitTransaction";
                            p.commitTransaction();
                            commits++;
                            for (Map.Entry<TopicPartition, OffsetAndMetadata> e : next.entrySet()) {
                                committed.put(e.getKey(), e.getValue().offset());
                            }
                            long total = 0;
                            for (long o : committed.values()) {
                                total += o;
                            }
                            Map<String, Object> progress = event("progress");
                            progress.put("txn", txns);
                            progress.put("committed", total);
                            JsonLines.print(progress);
                        }
                    } catch (KafkaException | IllegalStateException e) {
                        failure(stage, e);
                        p = recover(p, e);
                        committed = rewind(c, all);
                    }
                }
            } finally {
                p.close(Duration.ofSeconds(5));
            }
            Map<String, Object> done = event("done");
            done.put("committedOffsets", byPartition(rewind(c, all)));
            done.put("end", byPartition(end));
            done.put("transactions", txns);
            done.put("commits", commits);
            done.put("plannedAborts", plannedAborts);
            done.put("failures", failures);
            done.put("producers", producers);
            JsonLines.print(done);
        } catch (Exception e) {
            Map<String, Object> fatal = event("fatal");
            fatal.put("error", e.getClass().getName());
            fatal.put("message", String.valueOf(e.getMessage()));
            JsonLines.print(fatal);
            System.exit(1);
        }
        System.exit(0);
    }
}
