"""The ``kafka-wire`` source: Spark as one more Kafka client of a live broker."""

from __future__ import annotations

import shutil
import socket
import time

import pytest

from broker.testing import running_broker
from tests.spark import fixture_log
from tests.spark.fixture_log import COMPRESSED, EVENTS


def test_reads_exact_offset_ranges_from_a_live_broker(spark, history, tmp_path):
    d = tmp_path / "data"
    shutil.copytree(history.data_dir, d)
    ranges = '{"events":{"0":10,"1":-2,"2":95}}'
    ends = '{"events":{"0":37,"1":5,"2":-1}}'
    local = (
        spark.read.format("pykbroker")
        .option("path", str(d))
        .option("subscribe", EVENTS)
        .option("startingOffsets", ranges)
        .option("endingOffsets", ends)
        .load()
        .orderBy("partition", "offset")
        .collect()
    )
    with running_broker(d, fixture_log.CONFIG) as b:
        df = (
            spark.read.format("kafka-wire")
            .option("kafka.bootstrap.servers", b.bootstrap)
            .option("subscribe", EVENTS)
            .option("startingOffsets", ranges)
            .option("endingOffsets", ends)
            .load()
        )
        assert df.rdd.getNumPartitions() == 3
        wire = df.orderBy("partition", "offset").collect()
        compressed = (
            spark.read.format("kafka-wire")
            .option("kafka.bootstrap.servers", b.bootstrap)
            .option("subscribe", COMPRESSED)
            .load()
        )
        assert compressed.count() == 160
    assert [(r.partition, r.offset) for r in wire] == [(0, o) for o in range(10, 37)] + [
        (1, o) for o in range(5)
    ] + [(2, o) for o in range(95, 100)]
    assert wire == local


def test_fails_clearly_when_the_broker_is_down(spark):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there now
    started = time.monotonic()
    with pytest.raises(Exception, match="no Kafka broker answers"):
        (
            spark.read.format("kafka-wire")
            .option("kafka.bootstrap.servers", f"127.0.0.1:{port}")
            .option("subscribe", EVENTS)
            .load()
            .collect()
        )
    assert time.monotonic() - started < 60  # hang guard


def test_streams_from_a_live_broker_with_a_limit_per_trigger(spark, history, tmp_path):
    d = tmp_path / "data"
    shutil.copytree(history.data_dir, d)
    with running_broker(d, fixture_log.CONFIG) as b:
        q = (
            spark.readStream.format("kafka-wire")
            .option("kafka.bootstrap.servers", b.bootstrap)
            .option("subscribe", COMPRESSED)
            .option("startingOffsets", "earliest")
            .option("maxOffsetsPerTrigger", "50")
            .load()
            .writeStream.format("parquet")
            .option("path", str(tmp_path / "sink"))
            .option("checkpointLocation", str(tmp_path / "ckpt"))
            .trigger(availableNow=True)
            .start()
        )
        q.awaitTermination(120)  # hang guard
        assert q.exception() is None
        rows = [int(p["numInputRows"]) for p in q.recentProgress]
    assert [n for n in rows if n] == [50, 50, 50, 10]
    out = spark.read.parquet(str(tmp_path / "sink"))
    assert sorted(r.offset for r in out.select("offset").collect()) == list(range(160))
