#!/usr/bin/env bash
# Fetch Spark's own Kafka connector (spark-sql-kafka-0-10) and the jars it needs beside PySpark's,
# for the Spark tests and `pykbroker spark ... --bootstrap-server`.
#
#   scripts/spark-kafka.sh [DIR]      (default: .reference/spark-kafka; git-ignored)
#
# The connector's version is the installed PySpark's when Maven serves it for that version, else the
# newest release line known to be served (FALLBACK below; the connector talks to PySpark's JVM
# through public DataSource V2 APIs, and the tests check it against the installed version).
# SPARK_KAFKA_VERSION overrides. Maven resolves the connector's compile and runtime dependencies;
# jars PySpark already ships (by artifact name, any version) are dropped, so the classpath holds one
# copy of each library. DIR/classpath lists the jars, comma-separated, relative to DIR (see broker.spark.session).
#
# Only Maven's default repository is contacted, through mvn. Idempotent: a stamp per version.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dir=${1:-$root/.reference/spark-kafka}
py=${PYTHON:-python3}
FALLBACK=4.2.0

pyspark_jars=$("$py" -c 'import os, pyspark; print(os.path.join(os.path.dirname(pyspark.__file__), "jars"))')
installed=$("$py" -c 'import pyspark; print(pyspark.__version__)')
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)

# the version picked for this PySpark is remembered, so later runs ask Maven nothing
picked="$dir/.version-for-$installed"
if [ -n "${SPARK_KAFKA_VERSION:-}" ]; then
  version=$SPARK_KAFKA_VERSION
elif [ -f "$picked" ]; then
  version=$(cat "$picked")
else
  version=$installed
  if ! mvn -q -B dependency:get -Dtransitive=false \
      -Dartifact="org.apache.spark:spark-sql-kafka-0-10_2.13:$version:pom" >/dev/null 2>&1; then
    version=$FALLBACK
  fi
  echo "$version" >"$picked"
fi

stamp="$dir/.done-$version"
if [ ! -f "$stamp" ]; then
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  cat >"$tmp/pom.xml" <<POM
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>pykbroker</groupId>
  <artifactId>spark-kafka-fetch</artifactId>
  <version>0</version>
  <dependencies>
    <dependency>
      <groupId>org.apache.spark</groupId>
      <artifactId>spark-sql-kafka-0-10_2.13</artifactId>
      <version>$version</version>
    </dependency>
  </dependencies>
</project>
POM
  mvn -q -B -f "$tmp/pom.xml" org.apache.maven.plugins:maven-dependency-plugin:3.6.1:copy-dependencies \
    -DincludeScope=runtime -Dmdep.stripVersion=true -DoutputDirectory="$tmp/jars" >"$tmp/log" 2>&1 || {
    cat "$tmp/log" >&2
    echo "spark-kafka: Maven could not resolve spark-sql-kafka-0-10_2.13:$version" >&2
    exit 1
  }
  # PySpark's own libraries (same artifact, any version) stay PySpark's
  rm -rf "$dir/$version"
  mkdir -p "$dir/$version"
  for jar in "$tmp"/jars/*.jar; do
    name=$(basename "$jar" .jar)
    if ! compgen -G "$pyspark_jars/$name-[0-9]*.jar" >/dev/null; then
      cp "$jar" "$dir/$version/"
    fi
  done
  (cd "$dir" && ls "$version"/*.jar | paste -sd, >"$version/classpath")
  touch "$stamp"
fi
cp "$dir/$version/classpath" "$dir/classpath"
