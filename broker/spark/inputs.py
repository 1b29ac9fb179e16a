"""Where a reference job reads: a broker's data directory (offline, through the ``pykbroker`` source)
or any Kafka-compatible broker (live, through Spark's own Kafka connector, ``format("kafka")``).

Both give the same DataFrames: records with the columns of Spark's Kafka source (headers included),
and the ``offsets`` and ``groups`` views of the coordinator log. Over a broker the coordinator log
``__consumer_offsets`` is read on the driver with kafka-python (assign + seek; Spark's connector
leaves internal topics out of every read) and replayed by the same code as for a data directory
(:func:`coordinator_log.replay_records`); topic names, ids and log start offsets come from Metadata
and ListOffsets (kafka-python).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import orjson
from pyspark.sql import DataFrame, SparkSession

from broker.coordinator.journal import FILE as JOURNAL

from . import coordinator_log, logdir


@dataclass(frozen=True)
class Source:
    """Exactly one of ``data_dir`` and ``bootstrap``; ``kafka_options`` (``kafka.*`` and other
    options of Spark's Kafka source, e.g. ``kafka.security.protocol``) go to every connector read."""

    data_dir: str | None = None
    bootstrap: str | None = None
    kafka_options: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if (self.data_dir is None) == (self.bootstrap is None):
            raise ValueError("a job reads either a data directory or a broker (bootstrap servers)")


def as_source(src: str | Path | Source) -> Source:
    """A path is a data directory."""
    return src if isinstance(src, Source) else Source(data_dir=str(src))


def _kafka(spark: SparkSession, src: Source, stream: bool = False):  # -> DataFrameReader / DataStreamReader
    r = (spark.readStream if stream else spark.read).format("kafka")
    r = r.option("kafka.bootstrap.servers", src.bootstrap).option("includeHeaders", "true")
    r = r.option("startingOffsets", "earliest").option("failOnDataLoss", "false")
    for k, v in src.kafka_options.items():
        r = r.option(k, v)
    return r


def topics(src: Source) -> dict[str, dict]:
    """Non-internal topics: name -> {"id": uuid, "partitions": n}."""
    if src.data_dir is not None:
        return {n: t for n, t in logdir.topics(src.data_dir).items() if not t["internal"]}
    return {n: t for n, t in _wire_topics(src.bootstrap).items() if not t["internal"]}


def records(spark: SparkSession, src: Source, names: list[str]) -> DataFrame:
    """Every available record of the topics ``names`` (batch)."""
    if src.data_dir is not None:
        return (
            spark.read.format("pykbroker")
            .option("path", src.data_dir)
            .option("subscribe", ",".join(names))
            .option("failOnDataLoss", "false")
            .load()
        )
    return _kafka(spark, src).option("subscribe", ",".join(names)).load()


def records_stream(spark: SparkSession, src: Source, names: str | None) -> DataFrame:
    """A stream of the records of ``names`` (comma-separated; default every non-internal topic) from
    the earliest offset on."""
    if src.data_dir is not None:
        reader = spark.readStream.format("pykbroker").option("path", src.data_dir)
        reader = reader.option("startingOffsets", "earliest")
        return (reader.option("subscribe", names) if names else reader).load()
    reader = _kafka(spark, src, stream=True)
    # the connector's pattern subscription leaves out internal topics, as the pykbroker source does
    return (reader.option("subscribe", names) if names else reader.option("subscribePattern", ".*")).load()


def coordinator_view(spark: SparkSession, src: Source, view: str) -> DataFrame:
    """The ``offsets`` or ``groups`` view of the coordinator log."""
    if src.data_dir is not None:
        return spark.read.format("pykbroker").option("path", src.data_dir).option("view", view).load()
    schema = coordinator_log.OFFSETS_SCHEMA if view == "offsets" else coordinator_log.GROUPS_SCHEMA
    known = _wire_topics(src.bootstrap)
    if logdir.OFFSETS_TOPIC not in known:  # no group has committed or joined yet
        return spark.createDataFrame([], schema)
    raw = _wire_coordinator_log(src.bootstrap, known[logdir.OFFSETS_TOPIC]["partitions"])
    names = {t["id"]: n for n, t in known.items()}
    offsets, groups = coordinator_log.replay_records(coordinator_log.decode_records(raw), names)
    rows = list(coordinator_log.with_datetimes(offsets if view == "offsets" else groups, view))
    return spark.createDataFrame(rows, schema)


def rebalance_starts(spark: SparkSession, src: Source) -> DataFrame:
    """(group, generation, join_started) of classic rebalances, from the broker's rebalance journal
    (broker/coordinator/journal.py) in a data directory; empty over the wire (Kafka keeps no such
    record) or when the directory has none."""
    rows: dict[tuple[str, int], int] = {}
    if src.data_dir is not None:
        for path in (Path(src.data_dir) / f"{JOURNAL}.1", Path(src.data_dir) / JOURNAL):
            if not path.is_file():
                continue
            for line in path.read_bytes().splitlines():
                try:
                    e = orjson.loads(line)
                    key, started = (str(e["group"]), int(e["generation"])), int(e["join_started_ms"])
                except (ValueError, KeyError, TypeError):
                    continue  # a torn last line (the journal is not fsynced)
                rows[key] = min(started, rows.get(key, started))
    data = [(g, gen, datetime.fromtimestamp(ms / 1000, UTC)) for (g, gen), ms in rows.items()]
    return spark.createDataFrame(data, "group string, generation int, join_started timestamp")


def log_starts(spark: SparkSession, src: Source) -> DataFrame:
    """(topic, partition, log_start_offset) of every non-internal topic."""
    known = topics(src)
    tps = [(t, p) for t in sorted(known) for p in range(known[t]["partitions"])]
    if src.data_dir is not None:
        starts = {tp: logdir.log_start_offset(src.data_dir, *tp) for tp in tps}
    else:
        starts = _wire_log_starts(src.bootstrap, tps)
    return spark.createDataFrame(
        [(t, p, starts[(t, p)]) for t, p in tps], "topic string, partition int, log_start_offset long"
    )


def _wire_topics(bootstrap: str) -> dict[str, dict]:
    from kafka import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=bootstrap.split(","))
    try:
        described = admin.describe_topics()
    finally:
        admin.close()
    return {
        t["name"]: {
            "id": uuid.UUID(str(t["topic_id"])),
            "partitions": len(t["partitions"]),
            "internal": bool(t["is_internal"]),
        }
        for t in described
        if t["error_code"] == 0
    }


def _wire_log_starts(bootstrap: str, tps: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
    from kafka import KafkaConsumer, TopicPartition

    c = KafkaConsumer(bootstrap_servers=bootstrap.split(","), enable_auto_commit=False)
    try:
        got = c.beginning_offsets([TopicPartition(t, p) for t, p in tps])
    finally:
        c.close()
    return {(tp.topic, tp.partition): o for tp, o in got.items()}


def _wire_coordinator_log(
    bootstrap: str, partitions: int, timeout_s: float = 60.0
) -> list[tuple[int, int, bytes | None, bytes | None]]:
    """(offset, timestamp ms, key, value) of every record of ``__consumer_offsets`` up to its high
    watermark when called, partition by partition (a group's records are all in one partition)."""
    import time

    from kafka import KafkaConsumer, TopicPartition

    c = KafkaConsumer(bootstrap_servers=bootstrap.split(","), enable_auto_commit=False)
    try:
        tps = [TopicPartition(logdir.OFFSETS_TOPIC, p) for p in range(partitions)]
        ends = c.end_offsets(tps)
        c.assign(tps)
        c.seek_to_beginning()
        got: dict[int, list] = {p: [] for p in range(partitions)}
        todo = {tp for tp in tps if c.position(tp) < ends[tp]}
        deadline = time.monotonic() + timeout_s
        while todo:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{bootstrap}: {sorted(str(tp) for tp in todo)} not read to their end")
            for tp, msgs in c.poll(timeout_ms=500).items():
                got[tp.partition] += [
                    (m.offset, m.timestamp, m.key, m.value) for m in msgs if m.offset < ends[tp]
                ]
                if c.position(tp) >= ends[tp]:
                    todo.discard(tp)
                    c.pause(tp)
    finally:
        c.close()
    return [r for p in range(partitions) for r in got[p]]
