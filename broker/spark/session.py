"""A SparkSession with the pykbroker source registered and, when given, Spark's own Kafka connector
(``format("kafka")``) on its classpath."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from pathlib import Path

from pyspark.sql import SparkSession

#: JVM flags that make a short local session start in ~5 s instead of 11-14 s.
FAST_JVM = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
#: log4j2 settings for a quiet console: errors only
QUIET_LOG4J = Path(__file__).with_name("log4j2-quiet.properties")
#: comma-separated jar paths of spark-sql-kafka-0-10 and its dependencies (overrides the default)
JARS_ENV = "PYKBROKER_SPARK_KAFKA_JARS"
#: where scripts/spark-kafka.sh leaves the connector's classpath in a source checkout
_CHECKOUT_CLASSPATH = Path(__file__).resolve().parents[2] / ".reference" / "spark-kafka" / "classpath"


class ConnectorMissing(RuntimeError):
    """Spark's Kafka connector jars were asked for but are not to be found."""


def kafka_connector_jars(classpath_file: str | Path | None = None) -> list[str]:
    """The jars of Spark's Kafka connector: from ``$PYKBROKER_SPARK_KAFKA_JARS`` (comma-separated),
    else from the classpath file written by ``scripts/spark-kafka.sh`` (``classpath_file``, default
    ``.reference/spark-kafka/classpath`` of this checkout; paths in it are relative to its folder). Raises :class:`ConnectorMissing` when
    neither names existing jars."""
    env = os.environ.get(JARS_ENV)
    if env:
        jars = [j for j in env.split(",") if j]
        source = f"${JARS_ENV}"
    else:
        path = Path(classpath_file) if classpath_file else _CHECKOUT_CLASSPATH
        if not path.is_file():
            raise ConnectorMissing(
                f"Spark's Kafka connector is not fetched: no {path}. Run scripts/spark-kafka.sh "
                f"(Maven), or set {JARS_ENV} to the spark-sql-kafka-0-10 jars and their dependencies"
            )
        jars = [str(path.parent / j) for j in path.read_text().strip().split(",") if j]
        source = str(path)
    missing = [j for j in jars if not Path(j).is_file()]
    if not jars or missing:
        raise ConnectorMissing(f"{source} names no jars or missing ones: {missing or jars}")
    return jars


def register(spark: SparkSession) -> SparkSession:
    """Register the ``pykbroker`` (data directory) source."""
    from .source import BrokerLogDataSource

    spark.dataSource.register(BrokerLogDataSource)
    return spark


def local_session(
    master: str = "local[2]",
    app: str = "pykbroker",
    kafka_jars: Sequence[str] | None = None,
    verbose: bool = False,
    **conf: str,
) -> SparkSession:
    """A local session for laptops and tests: UI off, 2 shuffle partitions, UTC, quick-start JVM
    flags (unless ``spark.driver.extraJavaOptions`` is given), bound to 127.0.0.1 (unless
    SPARK_LOCAL_IP is set), and Python workers running this interpreter. The environment is changed
    only while the JVM starts. Unless ``verbose``, the console gets Spark's errors only: no progress
    bars, no start-up notices (QUIET_LOG4J).

    ``kafka_jars`` (e.g. :func:`kafka_connector_jars`) go on the classpath (``spark.jars``), which
    makes ``format("kafka")`` available; they take effect only if this call starts the JVM."""
    env = {"SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable}
    added = [k for k in env if k not in os.environ]
    for k in added:
        os.environ[k] = env[k]
    java_options = FAST_JVM if verbose else f"{FAST_JVM} -Dlog4j2.configurationFile={QUIET_LOG4J}"
    try:
        builder = (
            SparkSession.builder.master(master)
            .appName(app)
            .config("spark.ui.enabled", "false")
            .config("spark.sql.shuffle.partitions", "2")
            .config("spark.sql.session.timeZone", "UTC")
            .config("spark.driver.extraJavaOptions", java_options)
            .config("spark.ui.showConsoleProgress", "true" if verbose and sys.stderr.isatty() else "false")
        )
        if kafka_jars:
            builder = builder.config("spark.jars", ",".join(kafka_jars))
        for k, v in conf.items():
            builder = builder.config(k, v)
        return register(builder.getOrCreate())
    finally:
        for k in added:
            os.environ.pop(k, None)
