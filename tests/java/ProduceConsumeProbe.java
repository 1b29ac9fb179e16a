import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import java.util.concurrent.Future;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndTimestamp;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * The Java producer and consumer against a broker; one JSON object per command on stdout.
 *
 * <pre>
 *   java ProduceConsumeProbe BOOTSTRAP COMMAND...
 * </pre>
 *
 * Commands (a command with arguments is one command-line argument, words separated by spaces):
 *
 * <pre>
 *   produce TOPIC N BASE_TS [K=V,...]
 *                             KafkaProducer with default settings (so idempotent, acks=all) plus
 *                             the given properties sends record i = (key "i", value valueOf(i),
 *                             timestamp BASE_TS + i) for i in 0..N-1; prints the effective
 *                             idempotence/acks settings and "acks": [[partition, offset], ...]
 *                             indexed by i
 *   paced TOPIC N PAUSE_MS    one KafkaProducer sends record i (as produce, timestamp now) one at a
 *                             time, waiting for its ack, then PAUSE_MS before the next; prints
 *                             "acks" (a long-lived client: e.g. across SASL re-authentications)
 *   consume TOPIC N           KafkaConsumer without a group: assign() every partition,
 *                             seekToBeginning, poll until N records (30 s at most); prints
 *                             "records": [[partition, offset, timestamp, key, value], ...]
 *   drain TOPIC               KafkaConsumer without a group: assign() every partition,
 *                             seekToBeginning, poll until the position of every partition reaches
 *                             its endOffsets (60 s at most); prints "records" as consume does
 *                             (null keys/values as null) and "positions" per partition
 *   offsets TOPIC TS,TS,...   beginningOffsets, endOffsets, and offsetsForTimes for each TS on
 *                             every partition ([offset, timestamp] or null per partition)
 * </pre>
 *
 * The environment variable PROBE_CLIENT_PROPERTIES may name a properties file whose settings every
 * client gets (e.g. security.protocol, sasl.mechanism, sasl.jaas.config, ssl.truststore.*).
 *
 * valueOf(i) is "value-i|" followed by the first i % 97 characters of (0123456789abcdef)*8, the same
 * as the Python tests. A failed command prints {"cmd":..., "error":..., "message":...} and exits 1.
 */
public class ProduceConsumeProbe {
    private static final String PAYLOAD = "0123456789abcdef".repeat(8);

    static String valueOf(int i) {
        return "value-" + i + "|" + PAYLOAD.substring(0, i % 97);
    }

    public static void main(String[] args) {
        if (args.length < 2) {
            System.err.println("usage: ProduceConsumeProbe BOOTSTRAP COMMAND...");
            System.exit(2);
        }
        boolean failed = false;
        for (int i = 1; i < args.length; i++) {
            String[] words = args[i].trim().split("\\s+");
            Map<String, Object> out = new LinkedHashMap<>();
            out.put("cmd", words[0]);
            try {
                switch (words[0]) {
                    case "produce":
                        produce(out, args[0], words[1], Integer.parseInt(words[2]), Long.parseLong(words[3]),
                                words.length > 4 ? words[4] : "");
                        break;
                    case "paced":
                        paced(out, args[0], words[1], Integer.parseInt(words[2]), Long.parseLong(words[3]));
                        break;
                    case "consume":
                        consume(out, args[0], words[1], Integer.parseInt(words[2]));
                        break;
                    case "drain":
                        drain(out, args[0], words[1]);
                        break;
                    case "offsets":
                        offsets(out, args[0], words[1], words[2]);
                        break;
                    default:
                        throw new IllegalArgumentException("unknown command " + words[0]);
                }
            } catch (Throwable t) {
                Throwable cause = t.getCause() != null ? t.getCause() : t;
                out.put("error", cause.getClass().getName());
                out.put("message", cause.getMessage());
                t.printStackTrace();
                failed = true;
            }
            emit(out);
        }
        System.exit(failed ? 1 : 0);
    }

    private static void produce(Map<String, Object> out, String bootstrap, String topic, int n, long baseTs,
            String extra) throws Exception {
        Properties props = new Properties();
        props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ProducerConfig.CLIENT_ID_CONFIG, "produce-probe");
        props.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        props.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        // everything else default: enable.idempotence=true, acks=all, max.in.flight=5
        addClientProperties(props);
        for (String kv : extra.split(",")) {
            if (!kv.isEmpty()) {
                String[] pair = kv.split("=", 2);
                props.put(pair[0], pair[1]);
            }
        }
        List<Future<RecordMetadata>> futures = new ArrayList<>(n);
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(props)) {
            for (int i = 0; i < n; i++) {
                futures.add(producer.send(new ProducerRecord<>(topic, null, baseTs + i, Integer.toString(i), valueOf(i))));
            }
            producer.flush();
            List<Object> acks = new ArrayList<>(n);
            for (Future<RecordMetadata> f : futures) {
                RecordMetadata md = f.get();
                acks.add(List.of(md.partition(), md.offset()));
            }
            out.put("acks", acks);
        }
        ProducerConfig effective = new ProducerConfig(props);
        out.put("idempotence", effective.getBoolean(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG));
        out.put("acksConfig", effective.getString(ProducerConfig.ACKS_CONFIG));
    }

    private static void paced(Map<String, Object> out, String bootstrap, String topic, int n, long pauseMs)
            throws Exception {
        Properties props = new Properties();
        props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ProducerConfig.CLIENT_ID_CONFIG, "paced-probe");
        props.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        props.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        addClientProperties(props);
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(props)) {
            List<Object> acks = new ArrayList<>(n);
            for (int i = 0; i < n; i++) {
                RecordMetadata md = producer.send(new ProducerRecord<>(topic, Integer.toString(i), valueOf(i))).get();
                acks.add(List.of(md.partition(), md.offset()));
                if (i + 1 < n) {
                    Thread.sleep(pauseMs);
                }
            }
            out.put("acks", acks);
        }
    }

    /** The settings of the file named by PROBE_CLIENT_PROPERTIES, when set. */
    private static void addClientProperties(Properties props) {
        String path = System.getenv("PROBE_CLIENT_PROPERTIES");
        if (path == null || path.isEmpty()) {
            return;
        }
        try (java.io.Reader r = java.nio.file.Files.newBufferedReader(java.nio.file.Path.of(path))) {
            Properties extra = new Properties();
            extra.load(r);
            props.putAll(extra);
        } catch (java.io.IOException e) {
            throw new java.io.UncheckedIOException(e);
        }
    }

    private static KafkaConsumer<String, String> consumer(String bootstrap) {
        Properties props = new Properties();
        props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ConsumerConfig.CLIENT_ID_CONFIG, "consume-probe");
        props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        props.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        props.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        props.put(ConsumerConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "20000");
        addClientProperties(props);
        return new KafkaConsumer<>(props);
    }

    private static List<TopicPartition> partitions(KafkaConsumer<?, ?> c, String topic) {
        List<TopicPartition> tps = new ArrayList<>();
        for (PartitionInfo p : c.partitionsFor(topic, Duration.ofSeconds(20))) {
            tps.add(new TopicPartition(topic, p.partition()));
        }
        tps.sort((a, b) -> Integer.compare(a.partition(), b.partition()));
        return tps;
    }

    private static void consume(Map<String, Object> out, String bootstrap, String topic, int n) {
        try (KafkaConsumer<String, String> c = consumer(bootstrap)) {
            c.assign(partitions(c, topic));
            c.seekToBeginning(c.assignment());
            List<Object> records = new ArrayList<>(n);
            long deadline = System.nanoTime() + Duration.ofSeconds(30).toNanos();
            while (records.size() < n && System.nanoTime() < deadline) {
                ConsumerRecords<String, String> polled = c.poll(Duration.ofMillis(200));
                for (ConsumerRecord<String, String> r : polled) {
                    records.add(List.of(r.partition(), r.offset(), r.timestamp(), r.key(), r.value()));
                }
            }
            out.put("records", records);
        }
    }

    private static void drain(Map<String, Object> out, String bootstrap, String topic) {
        try (KafkaConsumer<String, String> c = consumer(bootstrap)) {
            List<TopicPartition> tps = partitions(c, topic);
            c.assign(tps);
            c.seekToBeginning(tps);
            Map<TopicPartition, Long> end = c.endOffsets(tps);
            List<Object> records = new ArrayList<>();
            long deadline = System.nanoTime() + Duration.ofSeconds(60).toNanos();
            while (System.nanoTime() < deadline && tps.stream().anyMatch(tp -> c.position(tp) < end.get(tp))) {
                for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(200))) {
                    records.add(java.util.Arrays.asList(r.partition(), r.offset(), r.timestamp(), r.key(), r.value()));
                }
            }
            Map<String, Object> positions = new LinkedHashMap<>();
            for (TopicPartition tp : tps) positions.put(String.valueOf(tp.partition()), c.position(tp));
            out.put("records", records);
            out.put("positions", positions);
        }
    }

    private static void offsets(Map<String, Object> out, String bootstrap, String topic, String stamps) {
        try (KafkaConsumer<String, String> c = consumer(bootstrap)) {
            List<TopicPartition> tps = partitions(c, topic);
            out.put("beginning", byPartition(c.beginningOffsets(tps)));
            out.put("end", byPartition(c.endOffsets(tps)));
            List<Object> forTimes = new ArrayList<>();
            for (String s : stamps.split(",")) {
                Map<TopicPartition, Long> query = new HashMap<>();
                for (TopicPartition tp : tps) {
                    query.put(tp, Long.parseLong(s));
                }
                Map<String, Object> found = new TreeMap<>();
                for (Map.Entry<TopicPartition, OffsetAndTimestamp> e : c.offsetsForTimes(query).entrySet()) {
                    OffsetAndTimestamp ot = e.getValue();
                    found.put(Integer.toString(e.getKey().partition()),
                            ot == null ? null : List.of(ot.offset(), ot.timestamp()));
                }
                Map<String, Object> one = new LinkedHashMap<>();
                one.put("ts", Long.parseLong(s));
                one.put("found", found);
                forTimes.add(one);
            }
            out.put("forTimes", forTimes);
        }
    }

    private static Map<String, Object> byPartition(Map<TopicPartition, Long> offsets) {
        Map<String, Object> m = new TreeMap<>();
        for (Map.Entry<TopicPartition, Long> e : offsets.entrySet()) {
            m.put(Integer.toString(e.getKey().partition()), e.getValue());
        }
        return m;
    }

    // ------------------------------------------------------------------------------------ output

    private static void emit(Map<String, Object> m) {
        JsonLines.print(m);
    }
}
