import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;

import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * An idempotent producer (enable.idempotence=true, acks=all) spreading records over a window, for
 * the multi-node cluster's acceptance (tests/integration/test_cluster_acceptance.py).
 *
 * <pre>
 *   java ClusterProducerProbe BOOTSTRAP TOPIC PREFIX N PAUSE_MS [KEY=VALUE ...]
 * </pre>
 *
 * Sends record i (key and value PREFIX-i, no partition: the default partitioner spreads them) for
 * i in 0..N-1 without waiting for acknowledgements, PAUSE_MS after each, then flushes and closes.
 * KEY=VALUE are producer properties on top of the above, except {@code probe.warmup.partitions=P}:
 * first one record (key and value warm-PREFIX-p) into each partition p in 0..P-1, each waited for,
 * so that the producer has its id and has written to every partition before the window opens.
 * Output, one JSON object a line: {@code started} (once the producer exists and has warmed up), then {@code done} with {@code acked} (the keys
 * acknowledged, in acknowledgement order) and {@code failed} ([key, exception class, message] of
 * every record whose send failed). A failure of the probe itself prints {@code error}, exits 1.
 */
public class ClusterProducerProbe {
    public static void main(String[] args) throws Exception {
        if (args.length < 5) {
            System.err.println("usage: ClusterProducerProbe BOOTSTRAP TOPIC PREFIX N PAUSE_MS [KEY=VALUE ...]");
            System.exit(2);
        }
        String topic = args[1];
        String prefix = args[2];
        int n = Integer.parseInt(args[3]);
        long pause = Long.parseLong(args[4]);
        Properties props = new Properties();
        props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        props.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
        props.put(ProducerConfig.ACKS_CONFIG, "all");
        props.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        props.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        int warmup = 0;
        for (int i = 5; i < args.length; i++) {
            String[] kv = args[i].split("=", 2);
            if (kv[0].equals("probe.warmup.partitions")) {
                warmup = Integer.parseInt(kv[1]);
            } else {
                props.put(kv[0], kv[1]);
            }
        }
        List<Object> acked = new ArrayList<>();
        List<Object> failed = new ArrayList<>();
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(props)) {
            for (int p = 0; p < warmup; p++) {
                String key = "warm-" + prefix + "-" + p;
                producer.send(new ProducerRecord<>(topic, p, key, key)).get();
            }
            JsonLines.print(event("started"));
            for (int i = 0; i < n; i++) {
                String key = prefix + "-" + i;
                producer.send(new ProducerRecord<>(topic, key, key), (metadata, exception) -> {
                    synchronized (acked) {
                        if (exception == null) {
                            acked.add(key);
                        } else {
                            failed.add(List.of(key, exception.getClass().getName(), String.valueOf(exception.getMessage())));
                        }
                    }
                });
                Thread.sleep(pause);
            }
            producer.flush();
        } catch (Exception e) {
            Map<String, Object> out = event("error");
            out.put("class", e.getClass().getName());
            out.put("message", String.valueOf(e.getMessage()));
            JsonLines.print(out);
            e.printStackTrace();
            System.exit(1);
        }
        Map<String, Object> out = event("done");
        synchronized (acked) {
            out.put("acked", acked);
            out.put("failed", failed);
        }
        JsonLines.print(out);
        System.exit(0);
    }

    private static Map<String, Object> event(String name) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("event", name);
        return m;
    }
}
