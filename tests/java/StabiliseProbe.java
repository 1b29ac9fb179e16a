import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicReference;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

/**
 * Group stabilisation for bench/group_stabilise_bench.py: the Java side of its Python scenarios.
 * One command a line on stdin, one JSON line a result on stdout:
 *
 * <pre>
 *   run BOOTSTRAP GROUP TOPIC MEMBERS PARTITIONS PROTOCOL TIMEOUT_S
 * </pre>
 *
 * creates MEMBERS consumers with default settings (group.protocol=PROTOCOL: classic or consumer;
 * auto.offset.reset=earliest), then all subscribe to TOPIC at once (t = 0), each polling every 50 ms
 * on its own thread. The group is stable when every member owns at least one partition, no partition
 * is owned twice and all PARTITIONS are owned; the answer is {"seconds": time from t = 0 to then}
 * ({"seconds": null} when not stable within TIMEOUT_S), after every consumer is closed.
 */
public class StabiliseProbe {
    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            String[] a = line.trim().split(" ");
            if (a.length != 8 || !a[0].equals("run")) {
                System.out.println("{\"error\": \"usage: run BOOTSTRAP GROUP TOPIC MEMBERS PARTITIONS PROTOCOL TIMEOUT_S\"}");
                continue;
            }
            Double s = run(a[1], a[2], a[3], Integer.parseInt(a[4]), Integer.parseInt(a[5]), a[6], Double.parseDouble(a[7]));
            System.out.println("{\"seconds\": " + (s == null ? "null" : s.toString()) + "}");
            System.out.flush();
        }
    }

    static Double run(String bootstrap, String group, String topic, int members, int partitions, String protocol,
                      double timeoutS) throws Exception {
        List<KafkaConsumer<byte[], byte[]>> consumers = new ArrayList<>();
        for (int i = 0; i < members; i++) {
            Properties p = new Properties();
            p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
            p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
            p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
            p.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, protocol);
            p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
            p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
            consumers.add(new KafkaConsumer<>(p));
        }
        List<AtomicReference<Set<Integer>>> owned = new ArrayList<>();
        AtomicBoolean stop = new AtomicBoolean();
        CountDownLatch start = new CountDownLatch(1);
        List<Thread> threads = new ArrayList<>();
        for (int i = 0; i < members; i++) {
            KafkaConsumer<byte[], byte[]> c = consumers.get(i);
            AtomicReference<Set<Integer>> mine = new AtomicReference<>(Set.of());
            owned.add(mine);
            Thread t = new Thread(() -> {
                try {
                    start.await();
                    c.subscribe(List.of(topic));
                    while (!stop.get()) {
                        c.poll(Duration.ofMillis(50));
                        Set<Integer> now = new HashSet<>();
                        for (TopicPartition tp : c.assignment()) {
                            now.add(tp.partition());
                        }
                        mine.set(now);
                    }
                } catch (Exception e) {
                    e.printStackTrace();
                } finally {
                    c.close(Duration.ofSeconds(5));
                }
            }, "member-" + i);
            t.start();
            threads.add(t);
        }
        long t0 = System.nanoTime();
        start.countDown();
        Double elapsed = null;
        while ((System.nanoTime() - t0) / 1e9 < timeoutS) {
            Set<Integer> union = new HashSet<>();
            int total = 0;
            boolean everyone = true;
            for (AtomicReference<Set<Integer>> r : owned) {
                Set<Integer> s = r.get();
                everyone &= !s.isEmpty();
                total += s.size();
                union.addAll(s);
            }
            if (everyone && total == partitions && union.size() == partitions) {
                elapsed = (System.nanoTime() - t0) / 1e9;
                break;
            }
            Thread.sleep(5);
        }
        stop.set(true);
        for (Thread t : threads) {
            t.join(15000);
        }
        return elapsed;
    }
}
