#!/usr/bin/env bash
# Fetch the newer clients the integration suite drives, into the git-ignored cache. Idempotent (stamp
# files), quiet; each part is fetched through its ordinary tool with its default repository settings.
#
#   scripts/clients.sh [DIR]      (default: .reference in the repository root)
#
# DIR/jars-4      kafka-clients 4.x (scripts/clients/clients-4.xml) and its runtime dependencies (Maven)
# DIR/persona-jars  kafka-clients 4.0, 4.1, 4.2 (the Kafka version personas' request schemas)
# DIR/streams-4   kafka-streams (scripts/clients/streams-4.xml), its kafka-clients and dependencies (Maven)
# tests/go        franz-go's modules (kgo, kadm), pinned by tests/go/go.sum, into Go's module cache
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dir=${1:-$root/.reference}
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)

fetch_jars() {  # fetch_jars POM OUT: the POM's runtime dependencies into OUT, once per POM content
  local pom=$1 out=$2 stamp
  stamp=".done-$(sha1sum "$pom" | cut -c1-12)"
  [ -f "$out/$stamp" ] && return 0
  command -v mvn >/dev/null 2>&1 || { echo "clients: mvn is required to fetch $(basename "$out")" >&2; exit 1; }
  local tmp
  tmp=$(mktemp -d "$dir/.fetch.XXXXXX")
  if ! mvn -q -B -f "$pom" dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory="$tmp" \
      >"$tmp.log" 2>&1; then
    cat "$tmp.log" >&2
    rm -rf "$tmp" "$tmp.log"
    exit 1
  fi
  rm -rf "$out" "$tmp.log"
  touch "$tmp/$stamp"
  mv "$tmp" "$out"
}

# the kafka-clients jars of the releases broker/personas.py describes (python -m codegen personas reads
# their request schemas; 3.9's and 4.3's come with scripts/reference.sh and scripts/kafka.sh)
mkdir -p "$dir/persona-jars"
for v in 4.0.1 4.1.1 4.2.1; do
  if [ ! -f "$dir/persona-jars/kafka-clients-$v.jar" ]; then
    command -v mvn >/dev/null 2>&1 || { echo "clients: mvn is required to fetch kafka-clients $v" >&2; exit 1; }
    mvn -q -B dependency:copy -Dartifact="org.apache.kafka:kafka-clients:$v" -Dtransitive=false \
      -DoutputDirectory="$dir/persona-jars" >"$dir/persona-jars/.log" 2>&1 || { cat "$dir/persona-jars/.log" >&2; exit 1; }
  fi
done

fetch_jars "$root/scripts/clients/clients-4.xml" "$dir/jars-4"
fetch_jars "$root/scripts/clients/streams-4.xml" "$dir/streams-4"

if command -v go >/dev/null 2>&1; then
  (cd "$root/tests/go" && go mod download)
else
  echo "clients: go is not installed; the franz-go tests will fail" >&2
fi
