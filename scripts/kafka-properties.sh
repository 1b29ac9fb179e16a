#!/usr/bin/env bash
# Regenerate broker/kafka_broker_properties.txt's Kafka 4.x section: the broker property names a real
# Kafka broker defines (KafkaConfig.configDef().names()), read from the Kafka broker jars that
# scripts/kafka.sh fetches for the tests (or any classpath given as KAFKA_CP). Prints the names; the
# file keeps its header and the 3.x ZooKeeper section by hand.
#
#   scripts/kafka-properties.sh > /tmp/names.txt
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cp=${KAFKA_CP:-$root/.reference/kafka-broker/*}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cat > "$tmp/Names.java" <<'JAVA'
public class Names {
    public static void main(String[] args) {
        new java.util.TreeSet<>(kafka.server.KafkaConfig.configDef().names()).forEach(System.out::println);
    }
}
JAVA
javac -cp "$cp" -d "$tmp" "$tmp/Names.java"
java -cp "$cp:$tmp" Names
