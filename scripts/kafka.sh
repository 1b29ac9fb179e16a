#!/usr/bin/env bash
# Fetch a released Apache Kafka broker (kafka_2.13 and its runtime dependencies, the version named in
# scripts/kafka-broker/pom.xml) through Maven into a cache, for the differential tests that use a real
# Kafka as the reference (tests/support/real_kafka.py). Idempotent (a stamp file), quiet.
#
#   scripts/kafka.sh [DIR]      (default: .reference/kafka-broker in the repository root; git-ignored)
#
# DIR/*.jar     the broker's classpath: java -cp 'DIR/*' kafka.Kafka server.properties
# DIR/VERSION   the Kafka version
# DIR/.done-*   the stamp (Kafka version + hash of the pom)
#
# Only Maven's default repository is contacted, through mvn. Nothing fetched is copied into the repo.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dir=${1:-$root/.reference/kafka-broker}
pom=$root/scripts/kafka-broker/pom.xml
version=$(sed -n 's:.*<kafka.version>\(.*\)</kafka.version>.*:\1:p' "$pom")
stamp=.done-$version-$(sha1sum "$pom" | cut -c1-12)
if [ -f "$dir/$stamp" ]; then
  exit 0
fi
command -v mvn >/dev/null 2>&1 || { echo "kafka.sh: mvn (Maven) is required" >&2; exit 1; }
parent=$(dirname "$dir")
mkdir -p "$parent"
tmp=$(mktemp -d "$parent/.kafka-broker.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
if ! mvn -q -B -f "$pom" dependency:copy-dependencies -DincludeScope=runtime \
    -DoutputDirectory="$tmp" >"$tmp.log" 2>&1; then
  cat "$tmp.log" >&2
  rm -f "$tmp.log"
  exit 1
fi
rm -f "$tmp.log"
ls "$tmp"/kafka_2.13-"$version".jar >/dev/null
echo "$version" >"$tmp/VERSION"
touch "$tmp/$stamp"
# Replace the cache in one rename so that a concurrent reader never sees half a classpath.
old=$(mktemp -d "$parent/.kafka-broker-old.XXXXXX")
if [ -e "$dir" ]; then mv "$dir" "$old/"; fi
mv "$tmp" "$dir"
rm -rf "$old"
trap - EXIT
echo "kafka broker $version: $(ls "$dir"/*.jar | wc -l) jars in $dir"
