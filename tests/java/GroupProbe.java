import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.LinkedBlockingQueue;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerGroupMetadata;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;

/**
 * One member of a consumer group (the classic protocol), driven over stdin, reporting on stdout.
 * The same line protocol as the Python members in tests/support/groups.py.
 *
 * <pre>
 *   java GroupProbe BOOTSTRAP GROUP TOPIC [KEY=VALUE ...]
 * </pre>
 *
 * KEY=VALUE are consumer properties (group.instance.id, session.timeout.ms,
 * partition.assignment.strategy, ...) on top of: auto.offset.reset=earliest,
 * enable.auto.commit=false, String deserializers. One more key is the probe's own:
 * {@code probe.limit=N} delivers at most N records (records polled beyond the limit are handed back
 * with seek(), then every partition is paused), so a commit covers exactly the records delivered.
 *
 * <p>The consumer is subscribed to TOPIC and polled every 100 ms on the main thread. Commands on
 * stdin, one a line: {@code commit} (commitSync of the position of every assigned partition),
 * {@code state} (print the state now), {@code close} (KafkaConsumer.close(): a dynamic member leaves
 * the group, a static one does not; then exit 0). EOF is {@code close}.
 *
 * <p>Output, one JSON object a line, each with an "event" and "ts" (System.nanoTime() / 1e9 when it
 * was printed: CLOCK_MONOTONIC on Linux, the clock of Python's time.monotonic(), so the events of
 * different processes can be ordered):
 * <pre>
 *   state      generation and memberId (from groupMetadata()) and assignment (sorted partitions of
 *              TOPIC), whenever one of them changes, and on "state"
 *   assigned / revoked / lost   partitions, from the ConsumerRebalanceListener, with generation
 *   records    [[partition, offset, key], ...] as delivered
 *   limit      count: probe.limit was reached
 *   committed  offsets {"partition": offset} as committed
 *   closed
 *   error      class and message of a failure (stack trace on stderr), then exit 1
 * </pre>
 */
public class GroupProbe {
    private final String topic;
    private final KafkaConsumer<String, String> consumer;
    private final long limit;
    private long delivered;
    private boolean limited;
    private String lastState;

    GroupProbe(String bootstrap, String group, String topic, Map<String, String> overrides) {
        this.topic = topic;
        Properties props = new Properties();
        props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        props.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        props.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        props.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        props.put(ConsumerConfig.RETRY_BACKOFF_MS_CONFIG, "50");
        long lim = -1;
        for (Map.Entry<String, String> e : overrides.entrySet()) {
            if (e.getKey().equals("probe.limit")) {
                lim = Long.parseLong(e.getValue());
            } else {
                props.put(e.getKey(), e.getValue());
            }
        }
        this.limit = lim;
        this.consumer = new KafkaConsumer<>(props);
    }

    public static void main(String[] args) {
        if (args.length < 3) {
            System.err.println("usage: GroupProbe BOOTSTRAP GROUP TOPIC [KEY=VALUE ...]");
            System.exit(2);
        }
        Map<String, String> overrides = new LinkedHashMap<>();
        for (int i = 3; i < args.length; i++) {
            String[] kv = args[i].split("=", 2);
            overrides.put(kv[0], kv[1]);
        }
        LinkedBlockingQueue<String> commands = new LinkedBlockingQueue<>();
        Thread reader = new Thread(() -> {
            try (BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8))) {
                String line;
                while ((line = in.readLine()) != null) {
                    if (!line.isBlank()) {
                        commands.add(line.trim());
                    }
                }
            } catch (Exception e) {
                // stdin gone: close below
            }
            commands.add("close");
        }, "stdin");
        reader.setDaemon(true);
        reader.start();
        try {
            new GroupProbe(args[0], args[1], args[2], overrides).run(commands);
        } catch (Throwable t) {
            Map<String, Object> out = new LinkedHashMap<>();
            out.put("class", t.getClass().getName());
            out.put("message", t.getMessage());
            emit("error", out);
            StringWriter sw = new StringWriter();
            t.printStackTrace(new PrintWriter(sw));
            System.err.println(sw);
            System.err.flush();
            System.exit(1);
        }
        System.exit(0);
    }

    void run(LinkedBlockingQueue<String> commands) {
        consumer.subscribe(List.of(topic), new ConsumerRebalanceListener() {
            @Override
            public void onPartitionsRevoked(Collection<TopicPartition> partitions) {
                emit("revoked", partitionsOf(partitions));
            }

            @Override
            public void onPartitionsAssigned(Collection<TopicPartition> partitions) {
                emit("assigned", partitionsOf(partitions));
                if (limited) {
                    consumer.pause(partitions);
                }
            }

            @Override
            public void onPartitionsLost(Collection<TopicPartition> partitions) {
                emit("lost", partitionsOf(partitions));
            }
        });
        while (true) {
            String cmd;
            while ((cmd = commands.poll()) != null) {
                switch (cmd) {
                    case "close":
                        consumer.close(Duration.ofSeconds(10));
                        emit("closed", new LinkedHashMap<>());
                        return;
                    case "commit":
                        commit();
                        break;
                    case "state":
                        reportState(true);
                        break;
                    default:
                        throw new IllegalArgumentException("unknown command " + cmd);
                }
            }
            ConsumerRecords<String, String> records = consumer.poll(Duration.ofMillis(100));
            deliver(records);
            reportState(false);
        }
    }

    private void deliver(ConsumerRecords<String, String> records) {
        List<Object> out = new ArrayList<>();
        for (TopicPartition tp : records.partitions()) {
            for (ConsumerRecord<String, String> r : records.records(tp)) {
                if (limit >= 0 && delivered >= limit) {
                    consumer.seek(tp, r.offset()); // hand the rest back: the position stays exact
                    break;
                }
                out.add(List.of(r.partition(), r.offset(), r.key()));
                delivered++;
            }
        }
        if (!out.isEmpty()) {
            Map<String, Object> m = new LinkedHashMap<>();
            m.put("records", out);
            emit("records", m);
        }
        if (limit >= 0 && delivered >= limit && !limited) {
            limited = true;
            consumer.pause(consumer.assignment());
            Map<String, Object> m = new LinkedHashMap<>();
            m.put("count", delivered);
            emit("limit", m);
        }
    }

    private void commit() {
        Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
        Map<String, Object> reported = new TreeMap<>();
        for (TopicPartition tp : consumer.assignment()) {
            long pos = consumer.position(tp);
            offsets.put(tp, new OffsetAndMetadata(pos));
            reported.put(String.valueOf(tp.partition()), pos);
        }
        consumer.commitSync(offsets);
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("offsets", reported);
        emit("committed", m);
    }

    private void reportState(boolean force) {
        ConsumerGroupMetadata md = consumer.groupMetadata();
        Set<Integer> parts = new TreeSet<>();
        for (TopicPartition tp : consumer.assignment()) {
            parts.add(tp.partition());
        }
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("generation", md.generationId());
        m.put("memberId", md.memberId());
        m.put("assignment", new ArrayList<>(parts));
        m.put("instanceId", md.groupInstanceId().orElse(null));
        String key = m.toString();
        if (force || !key.equals(lastState)) {
            lastState = key;
            emit("state", m);
        }
    }

    private Map<String, Object> partitionsOf(Collection<TopicPartition> partitions) {
        Set<Integer> parts = new TreeSet<>();
        for (TopicPartition tp : partitions) {
            parts.add(tp.partition());
        }
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("partitions", new ArrayList<>(parts));
        m.put("generation", consumer.groupMetadata().generationId());
        return m;
    }

    // ------------------------------------------------------------------------------------ output

    private static void emit(String event, Map<String, Object> fields) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("event", event);
        m.put("ts", System.nanoTime() / 1e9);
        m.putAll(fields);
        JsonLines.print(m);
    }
}
