import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.ProducerState;
import org.apache.kafka.clients.admin.TransactionDescription;
import org.apache.kafka.clients.admin.TransactionListing;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * The Java client's transactions against a broker; one JSON object per command on stdout.
 *
 * <pre>
 *   java TxnProbe BOOTSTRAP COMMAND...
 *
 *   txn TOPIC TID N EVERY    a transactional producer runs N transactions of 5 records
 *                            ("t{k}-{i}", partition i % partitions), aborting every EVERY-th
 *                            (k % EVERY == EVERY - 1); prints "committed" and "aborted" values
 *   read TOPIC ISOLATION     a consumer (isolation.level=ISOLATION) reads every partition from the
 *                            beginning to endOffsets; prints "values" and "end" per partition
 *   ctp IN OUT GROUP TID N   consume-transform-produce: a read_committed consumer in GROUP reads
 *                            IN, a transactional producer writes each value upper-cased to OUT
 *                            and sendOffsetsToTransaction(consumer.groupMetadata()); every 3rd
 *                            transaction is aborted (the consumer seeks back to the committed
 *                            offsets); polls at most 10 records at a time; stops after N input
 *                            records are committed; prints
 *                            "committedOffsets" per partition
 *   fence TOPIC TID          two producers with one transactional id: the second's
 *                            initTransactions fences the first; prints the exception class the
 *                            first producer gets
 *   admin TID TOPIC          Admin listTransactions, describeTransactions(TID) and
 *                            describeProducers(TOPIC partition 0)
 * </pre>
 */
public class TxnProbe {
    static Properties base(String bootstrap) {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        return p;
    }

    static KafkaProducer<String, String> producer(String bootstrap, String tid) {
        Properties p = base(bootstrap);
        p.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, tid);
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        KafkaProducer<String, String> producer = new KafkaProducer<>(p);
        producer.initTransactions();
        return producer;
    }

    static KafkaConsumer<String, String> consumer(String bootstrap, String group, String isolation) {
        return consumer(bootstrap, group, isolation, 500);
    }

    static KafkaConsumer<String, String> consumer(String bootstrap, String group, String isolation, int maxPoll) {
        Properties p = base(bootstrap);
        p.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, String.valueOf(maxPoll));
        if (group != null) {
            p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        }
        p.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, isolation);
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        return new KafkaConsumer<>(p);
    }

    public static void main(String[] args) {
        boolean failed = false;
        for (int i = 1; i < args.length; i++) {
            String[] w = args[i].trim().split("\\s+");
            Map<String, Object> out = new LinkedHashMap<>();
            out.put("cmd", w[0]);
            try {
                switch (w[0]) {
                    case "txn": txn(out, args[0], w[1], w[2], Integer.parseInt(w[3]), Integer.parseInt(w[4])); break;
                    case "read": read(out, args[0], w[1], w[2]); break;
                    case "ctp": ctp(out, args[0], w[1], w[2], w[3], w[4], Integer.parseInt(w[5])); break;
                    case "fence": fence(out, args[0], w[1], w[2]); break;
                    case "admin": admin(out, args[0], w[1], w[2]); break;
                    default: throw new IllegalArgumentException("unknown command " + w[0]);
                }
            } catch (Exception e) {
                out.put("error", e.getClass().getName());
                out.put("message", String.valueOf(e.getMessage()));
                failed = true;
            }
            JsonLines.print(out);
        }
        System.exit(failed ? 1 : 0);
    }

    static void txn(Map<String, Object> out, String bootstrap, String topic, String tid, int n, int every) {
        List<String> committed = new ArrayList<>(), aborted = new ArrayList<>();
        try (KafkaProducer<String, String> p = producer(bootstrap, tid)) {
            int parts = p.partitionsFor(topic).size();
            for (int k = 0; k < n; k++) {
                p.beginTransaction();
                List<String> values = new ArrayList<>();
                for (int i = 0; i < 5; i++) {
                    String v = "t" + k + "-" + i;
                    p.send(new ProducerRecord<>(topic, i % parts, null, v));
                    values.add(v);
                }
                if (k % every == every - 1) {
                    p.flush();
                    p.abortTransaction();
                    aborted.addAll(values);
                } else {
                    p.commitTransaction();
                    committed.addAll(values);
                }
            }
        }
        out.put("committed", committed);
        out.put("aborted", aborted);
    }

    static List<TopicPartition> partitions(KafkaConsumer<?, ?> c, String topic) {
        List<TopicPartition> tps = new ArrayList<>();
        for (PartitionInfo pi : c.partitionsFor(topic)) {
            tps.add(new TopicPartition(topic, pi.partition()));
        }
        return tps;
    }

    static void read(Map<String, Object> out, String bootstrap, String topic, String isolation) {
        List<String> values = new ArrayList<>();
        Map<String, Long> ends = new TreeMap<>();
        try (KafkaConsumer<String, String> c = consumer(bootstrap, null, isolation)) {
            List<TopicPartition> tps = partitions(c, topic);
            c.assign(tps);
            c.seekToBeginning(tps);
            Map<TopicPartition, Long> end = c.endOffsets(tps);
            long deadline = System.currentTimeMillis() + 60_000;
            while (System.currentTimeMillis() < deadline) {
                boolean done = true;
                for (TopicPartition tp : tps) {
                    done &= c.position(tp) >= end.get(tp);
                }
                if (done) {
                    break;
                }
                for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(200))) {
                    values.add(r.value());
                }
            }
            end.forEach((tp, off) -> ends.put(String.valueOf(tp.partition()), off));
        }
        out.put("values", values);
        out.put("end", ends);
    }

    static void ctp(Map<String, Object> out, String bootstrap, String in, String outTopic, String group, String tid, int n)
            throws Exception {
        Map<String, Long> offsets = new TreeMap<>();
        int rounds = 0, aborts = 0;
        try (KafkaConsumer<String, String> c = consumer(bootstrap, group, "read_committed", 10);
             KafkaProducer<String, String> p = producer(bootstrap, tid)) {
            c.subscribe(List.of(in));
            long deadline = System.currentTimeMillis() + 120_000;
            long committedCount = 0;
            while (committedCount < n && System.currentTimeMillis() < deadline) {
                var records = c.poll(Duration.ofMillis(200));
                if (records.isEmpty()) {
                    continue;
                }
                p.beginTransaction();
                Map<TopicPartition, OffsetAndMetadata> next = new HashMap<>();
                for (ConsumerRecord<String, String> r : records) {
                    p.send(new ProducerRecord<>(outTopic, r.partition(), null, r.value().toUpperCase()));
                    next.put(new TopicPartition(r.topic(), r.partition()), new OffsetAndMetadata(r.offset() + 1));
                }
                p.sendOffsetsToTransaction(next, c.groupMetadata());
                rounds++;
                if (rounds % 3 == 0) {
                    p.abortTransaction();
                    aborts++;
                    Map<TopicPartition, OffsetAndMetadata> committed = c.committed(c.assignment());
                    for (TopicPartition tp : c.assignment()) {
                        OffsetAndMetadata om = committed.get(tp);
                        c.seek(tp, om == null ? 0 : om.offset());
                    }
                } else {
                    p.commitTransaction();
                    committedCount += records.count();
                }
            }
            Map<TopicPartition, OffsetAndMetadata> committed = c.committed(c.assignment());
            committed.forEach((tp, om) -> offsets.put(String.valueOf(tp.partition()), om == null ? -1 : om.offset()));
        }
        out.put("committedOffsets", offsets);
        out.put("aborts", aborts);
    }

    static void fence(Map<String, Object> out, String bootstrap, String topic, String tid) {
        KafkaProducer<String, String> first = producer(bootstrap, tid);
        first.beginTransaction();
        first.send(new ProducerRecord<>(topic, 0, null, "zombie"));
        first.flush();
        try (KafkaProducer<String, String> second = producer(bootstrap, tid)) {
            second.beginTransaction();
            second.send(new ProducerRecord<>(topic, 0, null, "winner"));
            second.commitTransaction();
        }
        String fenced = null;
        try {
            first.send(new ProducerRecord<>(topic, 0, null, "late")).get();
            first.commitTransaction();
        } catch (Exception e) {
            Throwable t = e.getCause() != null && e instanceof java.util.concurrent.ExecutionException ? e.getCause() : e;
            fenced = t.getClass().getSimpleName();
        } finally {
            first.close(Duration.ofSeconds(5));
        }
        out.put("fenced", fenced);
    }

    static void admin(Map<String, Object> out, String bootstrap, String tid, String topic) throws Exception {
        Properties p = base(bootstrap);
        try (Admin admin = Admin.create(p)) {
            List<Map<String, Object>> listed = new ArrayList<>();
            for (TransactionListing l : admin.listTransactions().all().get()) {
                Map<String, Object> m = new LinkedHashMap<>();
                m.put("id", l.transactionalId());
                m.put("producerId", l.producerId());
                m.put("state", l.state().toString());
                listed.add(m);
            }
            out.put("listed", listed);
            TransactionDescription d = admin.describeTransactions(List.of(tid)).description(tid).get();
            Map<String, Object> desc = new LinkedHashMap<>();
            desc.put("state", d.state().toString());
            desc.put("producerId", d.producerId());
            desc.put("epoch", d.producerEpoch());
            desc.put("timeoutMs", d.transactionTimeoutMs());
            List<String> parts = new ArrayList<>();
            for (TopicPartition tp : d.topicPartitions()) {
                parts.add(tp.toString());
            }
            desc.put("partitions", parts);
            out.put("described", desc);
            TopicPartition tp = new TopicPartition(topic, 0);
            Collection<ProducerState> states = admin.describeProducers(List.of(tp)).partitionResult(tp).get().activeProducers();
            List<Map<String, Object>> producers = new ArrayList<>();
            for (ProducerState s : states) {
                Map<String, Object> m = new LinkedHashMap<>();
                m.put("producerId", s.producerId());
                m.put("epoch", s.producerEpoch());
                m.put("lastSequence", s.lastSequence());
                m.put("txnStartOffset", s.currentTransactionStartOffset().isPresent() ? s.currentTransactionStartOffset().getAsLong() : -1);
                producers.add(m);
            }
            out.put("producers", producers);
        }
    }
}
