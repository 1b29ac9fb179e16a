"""Spark's own Kafka connector (``format("kafka")``, spark-sql-kafka-0-10 with the Java kafka-clients
consumer and producer) against this broker, its rows compared with what real clients wrote and read:
batch reads by offsets and by timestamps, headers, Structured Streaming with a checkpoint and
Trigger.AvailableNow, and the Kafka sink."""

from __future__ import annotations

import json

import pytest
from pyspark.sql import functions as F

from broker.testing import running_broker
from tests.spark import connector_data as cd
from tests.spark.connector_data import APPEND, CODECS_TOPIC, KC, PER_PARTITION
from tests.support.spark import available_now

CONFIG = {"group.initial.rebalance.delay.ms": 0}
TOPICS = {KC: 3, CODECS_TOPIC: 1, APPEND: 1}


@pytest.fixture(scope="module")
def wire(tmp_path_factory):
    """This broker with the connector_data topics, and what confluent-kafka reads back from it."""
    with running_broker(tmp_path_factory.mktemp("connector") / "data", CONFIG) as b:
        cd.populate(b.bootstrap)
        yield b, cd.consume(b.bootstrap, TOPICS)


def _read(spark, fmt: str, bootstrap: str, **options: str):
    r = spark.read.format(fmt).option("kafka.bootstrap.servers", bootstrap)
    for k, v in options.items():
        r = r.option(k, v)
    return r.load()


def test_batch_read_has_every_record_as_real_clients_wrote_and_read_it(spark, kafka_format, wire):
    b, reference = wire
    df = _read(spark, kafka_format, b.bootstrap, subscribe=",".join(TOPICS), includeHeaders="true")
    got = cd.spark_rows(df)
    assert got == reference
    # and the reference is what the producers sent
    kc = [r for r in got if r[0] == KC]
    assert len(kc) == 3 * PER_PARTITION
    for _topic, part, off, key, value, headers, ms, ts_type in kc:
        assert key == (None if off == 3 else f"k{part}-{off}".encode())
        assert value == (None if off == 4 else f"v{part}-{off}-{'x' * (off % 7)}".encode())
        assert headers == ((("h", str(off).encode()), ("empty", b""))[: off % 3])
        assert (ms, ts_type) == (cd.ts(part, off), 0)
    codecs = [r for r in got if r[0] == CODECS_TOPIC]
    assert [r[3] for r in codecs] == [f"{c}-{i}".encode() for c in cd.CODECS for i in range(10)]
    assert all(r[5] == (("codec", r[3].split(b"-")[0]),) for r in codecs)
    appended = [r for r in got if r[0] == APPEND]
    assert [r[7] for r in appended] == [1] * 5 and all(r[6] > 1_000_000 for r in appended)
    # without includeHeaders, the connector's schema has no headers column
    assert "headers" not in _read(spark, kafka_format, b.bootstrap, subscribe=KC).columns


def test_batch_read_by_offsets_per_partition(spark, kafka_format, wire):
    b, _ = wire
    starting = json.dumps({KC: {"0": 3, "1": -2, "2": 15}})
    ending = json.dumps({KC: {"0": 11, "1": 6, "2": -1}})
    df = _read(spark, kafka_format, b.bootstrap, subscribe=KC, startingOffsets=starting, endingOffsets=ending)
    got = sorted((r.partition, r.offset) for r in df.select("partition", "offset").collect())
    assert got == cd.offsets_of({0: (3, 11), 1: (0, 6), 2: (15, PER_PARTITION)})
    # assign (rather than subscribe) to two of the partitions
    df = _read(spark, kafka_format, b.bootstrap, assign=json.dumps({KC: [0, 2]}), startingOffsets="earliest",
               endingOffsets=json.dumps({KC: {"0": 2, "2": 1}}))  # fmt: skip
    assert sorted((r.partition, r.offset) for r in df.collect()) == [(0, 0), (0, 1), (2, 0)]


def test_batch_read_by_timestamps(spark, kafka_format, wire):
    """ListOffsets by timestamp: the first offset whose timestamp is at or after the one asked."""
    b, _ = wire
    starting = {KC: {"0": cd.ts(0, 5), "1": cd.ts(1, 5) + 1, "2": cd.ts(2, 0) - 10_000}}
    ending = {KC: {"0": cd.ts(0, 9), "1": cd.ts(1, 12) - 500, "2": cd.ts(2, 2)}}
    df = _read(spark, kafka_format, b.bootstrap, subscribe=KC,
               startingOffsetsByTimestamp=json.dumps(starting), endingOffsetsByTimestamp=json.dumps(ending))  # fmt: skip
    got = sorted((r.partition, r.offset) for r in df.select("partition", "offset").collect())
    assert got == cd.offsets_of({0: (5, 9), 1: (6, 12), 2: (0, 2)})
    # one timestamp for all partitions; past the last record the end is "latest"
    df = _read(spark, kafka_format, b.bootstrap, subscribe=KC,
               startingTimestamp=str(cd.ts(0, PER_PARTITION - 2) + 5),
               startingOffsetsByTimestampStrategy="latest")  # fmt: skip
    got = sorted((r.partition, r.offset) for r in df.select("partition", "offset").collect())
    assert got == [(p, PER_PARTITION - 1) for p in range(3)]


def _stream_once(spark, fmt: str, bootstrap: str, topic: str, sink, ckpt, **options: str) -> list[int]:
    reader = (
        spark.readStream.format(fmt)
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("includeHeaders", "true")
    )
    return available_now(reader, sink, ckpt, **options)


def test_streaming_available_now_resumes_from_its_checkpoint(spark, kafka_format, wire, tmp_path):
    b, _ = wire
    topic = "kc-stream"
    cd.create_topics(b.bootstrap, (topic, 3))
    cd.produce_kc(b.bootstrap, topic=topic, count=10)
    sink, ckpt = tmp_path / "sink", tmp_path / "ckpt"
    batches = _stream_once(spark, kafka_format, b.bootstrap, topic, sink, ckpt, maxOffsetsPerTrigger="12")
    assert sum(batches) == 30 and max(batches) <= 12 and len([n for n in batches if n]) >= 3
    assert _stream_once(spark, kafka_format, b.bootstrap, topic, sink, ckpt) in ([], [0])
    cd.produce_kc(b.bootstrap, topic=topic, start=10, count=4)  # 12 new records
    assert sum(_stream_once(spark, kafka_format, b.bootstrap, topic, sink, ckpt)) == 12
    written = cd.spark_rows(spark.read.parquet(str(sink)))
    assert [(r[1], r[2]) for r in written] == cd.offsets_of({p: (0, 14) for p in range(3)})
    reference = cd.consume(b.bootstrap, {topic: 3})
    assert written == reference


def test_kafka_sink_writes_records_that_real_clients_read(spark, kafka_format, wire):
    b, _ = wire
    topic = "kc-sink"
    cd.create_topics(b.bootstrap, (topic, 2))
    rows = [
        (f"key-{i}".encode() if i != 2 else None, f"value-{i}".encode() if i != 3 else None, i % 2,
         [(f"n{i}", str(i).encode())] if i % 3 else [])
        for i in range(12)
    ]  # fmt: skip
    df = spark.createDataFrame(
        rows, "key binary, value binary, partition int, headers array<struct<key:string,value:binary>>"
    )
    (
        df.withColumn("topic", F.lit(topic))
        .write.format(kafka_format)
        .option("kafka.bootstrap.servers", b.bootstrap)
        .option("kafka.compression.type", "zstd")
        .save()
    )
    got = cd.consume(b.bootstrap, {topic: 2})
    assert len(got) == len(rows)
    by_key = {(r[1], r[4]): r for r in got}  # (partition, value) is unique here
    for key, value, part, headers in rows:
        r = by_key[(part, value)]
        assert r[3] == key and r[5] == tuple(headers) and r[7] == 0
    for part in range(2):
        assert sorted(r[2] for r in got if r[1] == part) == list(range(6))
    # and the connector reads back what it wrote, as confluent-kafka did
    spark_view = cd.spark_rows(
        _read(spark, kafka_format, b.bootstrap, subscribe=topic, includeHeaders="true")
    )
    assert spark_view == got
