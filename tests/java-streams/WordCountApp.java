import java.time.Duration;
import java.util.Arrays;
import java.util.Locale;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;

import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.CloseOptions;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.KeyValue;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;

/**
 * A Kafka Streams word count, run as an application against the broker:
 *
 *   WordCountApp BOOTSTRAP APPLICATION_ID INPUT OUTPUT STATE_DIR [key=value ...]
 *
 * Lines of INPUT are split into lower-case words, re-keyed by word (through the repartition topic
 * APPLICATION_ID-words-repartition), counted in the store "counts" (changelog
 * APPLICATION_ID-counts-changelog) and every updated count is written to OUTPUT (String key, Long
 * value). Extra key=value pairs are StreamsConfig overrides. Prints one JSON line per state change
 * ({"state":"RUNNING"}), {"error":...} if a stream thread dies, and {"closed":true} once closed; runs
 * until stdin closes.
 */
public final class WordCountApp {
    public static void main(String[] args) throws Exception {
        if (args.length < 5) {
            System.err.println("usage: WordCountApp BOOTSTRAP APPLICATION_ID INPUT OUTPUT STATE_DIR [key=value ...]");
            System.exit(2);
        }
        Properties props = new Properties();
        props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        props.put(StreamsConfig.APPLICATION_ID_CONFIG, args[1]);
        props.put(StreamsConfig.STATE_DIR_CONFIG, args[4]);
        props.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.AT_LEAST_ONCE);
        props.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, 200);
        props.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, 0);
        props.put(StreamsConfig.REPLICATION_FACTOR_CONFIG, 1);
        props.put(StreamsConfig.consumerPrefix("auto.offset.reset"), "earliest");
        for (String kv : Arrays.copyOfRange(args, 5, args.length)) {
            int eq = kv.indexOf('=');
            props.put(kv.substring(0, eq), kv.substring(eq + 1));
        }

        StreamsBuilder builder = new StreamsBuilder();
        builder.stream(args[2], Consumed.with(Serdes.String(), Serdes.String()))
                .flatMapValues(line -> Arrays.asList(line.toLowerCase(Locale.ROOT).split("\\W+")))
                .filter((key, word) -> !word.isEmpty())
                .map((key, word) -> KeyValue.pair(word, word))
                .groupByKey(Grouped.with("words", Serdes.String(), Serdes.String()))
                .count(Materialized.as("counts"))
                .toStream()
                .to(args[3], Produced.with(Serdes.String(), Serdes.Long()));

        KafkaStreams streams = new KafkaStreams(builder.build(), props);
        CountDownLatch dead = new CountDownLatch(1);
        streams.setStateListener((now, before) -> {
            emit("{\"state\":\"" + now + "\"}");
            if (now == KafkaStreams.State.ERROR || now == KafkaStreams.State.NOT_RUNNING) {
                dead.countDown();
            }
        });
        streams.setUncaughtExceptionHandler(e -> {
            emit("{\"error\":" + quote(e.toString()) + "}");
            return StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
        });
        streams.start();
        Thread stdin = new Thread(() -> {
            try {
                while (System.in.read() >= 0) {
                    // wait for EOF
                }
            } catch (java.io.IOException ignored) {
                // treat as EOF
            }
            dead.countDown();
        });
        stdin.setDaemon(true);
        stdin.start();
        dead.await();
        // leave the group on close (Streams stays by default, so that a restart causes no rebalance):
        // the next instance then gets every task at once instead of after the session timeout
        streams.close(CloseOptions.groupMembershipOperation(CloseOptions.GroupMembershipOperation.LEAVE_GROUP)
                .withTimeout(Duration.ofSeconds(20)));
        emit("{\"closed\":true}");
        System.exit(0);
    }

    private static synchronized void emit(String line) {
        System.out.println(line);
        System.out.flush();
    }

    private static String quote(String s) {
        StringBuilder b = new StringBuilder("\"");
        for (char c : s.toCharArray()) {
            if (c == '"' || c == '\\') {
                b.append('\\').append(c);
            } else if (c < 0x20) {
                b.append(String.format("\\u%04x", (int) c));
            } else {
                b.append(c);
            }
        }
        return b.append('"').toString();
    }
}
