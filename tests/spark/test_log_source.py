"""The ``pykbroker`` source over a data directory the real broker wrote."""

from __future__ import annotations

import datetime as dt
import os

from kafka import KafkaConsumer, TopicPartition

from broker.testing import running_broker
from tests.spark import fixture_log
from tests.spark.fixture_log import COMPRESSED, EVENTS


def _consume_all(bootstrap: str, topic: str, partitions: int) -> list[tuple]:
    c = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, consumer_timeout_ms=3000)
    tps = [TopicPartition(topic, p) for p in range(partitions)]
    c.assign(tps)
    c.seek_to_beginning()
    rows = []
    for m in c:
        ts = dt.datetime.fromtimestamp(m.timestamp / 1000, dt.UTC).replace(tzinfo=None)
        headers = [(k, v) for k, v in m.headers]
        rows.append((m.key, m.value, m.topic, m.partition, m.offset, ts, m.timestamp_type, headers))
    c.close()
    return sorted(rows, key=lambda r: (r[3], r[4]))


def _spark_rows(df) -> list[tuple]:
    out = []
    for r in df.orderBy("partition", "offset").collect():
        ts = r.timestamp.replace(tzinfo=None)
        headers = [(h.key, bytes(h.value) if h.value is not None else None) for h in r.headers or []]
        key = bytes(r.key) if r.key is not None else None
        value = bytes(r.value) if r.value is not None else None
        out.append((key, value, r.topic, r.partition, r.offset, ts, r.timestampType, headers))
    return out


def test_schema_is_sparks_kafka_source(spark, history):
    df = spark.read.format("pykbroker").option("path", str(history.data_dir)).load()
    assert df.schema.simpleString() == (
        "struct<key:binary,value:binary,topic:string,partition:int,offset:bigint,timestamp:timestamp,"
        "timestampType:int,headers:array<struct<key:string,value:binary>>>"
    )


def test_records_equal_a_kafka_python_consumer(spark, history, tmp_path):
    d = str(history.data_dir)
    for topic, parts in ((EVENTS, 3), (COMPRESSED, 1), (fixture_log.APPENDED, 1)):
        df = spark.read.format("pykbroker").option("path", d).option("subscribe", topic).load()
        # the fixture's small segment.bytes gives many segments, packed into one input partition a CPU
        if topic == EVENTS:
            assert df.rdd.getNumPartitions() == (os.cpu_count() or 1)
        got = _spark_rows(df)
        with running_broker(history.data_dir, fixture_log.CONFIG) as b:
            want = _consume_all(b.bootstrap, topic, parts)
        assert len(want) == sum(n for (t, _p), n in history.produced.items() if t == topic)
        assert got == want
        if topic == fixture_log.APPENDED:
            assert {r[6] for r in got} == {1} and min(r[5] for r in got).year > 2000


def test_compressed_batches_decode(spark, history):
    df = (
        spark.read.format("pykbroker")
        .option("path", str(history.data_dir))
        .option("subscribe", COMPRESSED)
        .load()
    )
    keys = {bytes(r.key).decode().split("-")[0] for r in df.select("key").collect()}
    assert keys == set(fixture_log.CODECS)


def test_input_partitions_by_min_partitions_and_max_records(spark, history):
    def read(**options: str):
        opts = {"path": str(history.data_dir), "subscribe": EVENTS, **options}
        return spark.read.format("pykbroker").options(**opts).load()

    produced = sum(history.produced[EVENTS, p] for p in range(3))
    whole = read(minPartitions="1")
    assert whole.rdd.getNumPartitions() == 1
    divided = read(minPartitions="7")
    assert divided.rdd.getNumPartitions() == 7
    assert _spark_rows(divided) == _spark_rows(whole)
    # partitions in order, each partition's offsets in order
    assert [(r.partition, r.offset) for r in divided.select("partition", "offset").collect()] == [
        (p, o) for p in range(3) for o in range(history.produced[EVENTS, p])
    ]
    cap = produced // 5
    capped = read(minPartitions="1", maxRecordsPerPartition=str(cap))
    assert capped.rdd.getNumPartitions() == -(-produced // cap)
    assert _spark_rows(capped) == _spark_rows(whole)
    try:
        read(minPartitions="0").collect()
    except Exception as e:
        assert "must be at least 1" in str(e)
    else:
        raise AssertionError("minPartitions 0 must fail")


def test_offset_ranges_and_unknown_topic(spark, history):
    d = str(history.data_dir)
    df = (
        spark.read.format("pykbroker")
        .option("path", d)
        .option("subscribe", EVENTS)
        .option("startingOffsets", '{"events":{"0":10,"1":-2,"2":-1}}')
        .option("endingOffsets", '{"events":{"0":20,"1":3,"2":-1}}')
        .load()
    )
    got = sorted((r.partition, r.offset) for r in df.select("partition", "offset").collect())
    assert got == [(0, o) for o in range(10, 20)] + [(1, o) for o in range(3)]
    bad = spark.read.format("pykbroker").option("path", d).option("subscribe", "nope").load()
    try:
        bad.collect()
    except Exception as e:
        assert "unknown topic" in str(e)
    else:
        raise AssertionError("an unknown topic must fail")


def test_offsets_view(spark, history):
    df = spark.read.format("pykbroker").option("path", str(history.data_dir)).option("view", "offsets").load()
    lagger = [(r.partition, r.offset) for r in df.where("`group` = 'lagger'").orderBy("log_offset").collect()]
    assert lagger == [(p, o) for p, o, _leo in history.commits]
    reb = df.where("`group` = 'rebalancer'").orderBy("log_offset").collect()
    assert [(r.partition, r.offset, r.protocol, r.owned) for r in reb] == [
        (0, 1, "classic", True),
        (2, 7, "classic", False),
    ]
    assert reb[0].generation >= 3 and reb[1].generation == reb[0].generation + 1


def test_groups_view(spark, history):
    df = spark.read.format("pykbroker").option("path", str(history.data_dir)).option("view", "groups").load()
    rows = df.where("`group` = 'rebalancer'").orderBy("log_offset").collect()
    joins = [r for r in rows if r.event == "join"]
    leaves = [r for r in rows if r.event == "leave"]
    assert len({r.member_id for r in joins}) == 2 and len(leaves) == 2
    # every generation with members hands out all three partitions, each to exactly one member
    by_gen: dict[int, list] = {}
    for r in rows:
        if r.event in ("join", "stay") and r.assignment:
            by_gen.setdefault(r.generation, []).extend((a.topic, a.partition) for a in r.assignment)
    assert by_gen and all(sorted(v) == [(EVENTS, p) for p in range(3)] for v in by_gen.values())
    assert max(r.members for r in rows) == 2


def test_kip848_group_records(spark, history):
    d = str(history.data_dir)
    groups = spark.read.format("pykbroker").option("path", d).option("view", "groups").load()
    rows = groups.where(f"`group` = '{fixture_log.KIP848}'").orderBy("log_offset").collect()
    assert {r.protocol for r in rows} == {"consumer"}
    assert [r.event for r in rows if r.event != "update"] == ["join", "epoch", "assignment", "leave", "epoch"]
    member = next(r.member_id for r in rows if r.event == "join")
    assigned = next(r for r in rows if r.event == "assignment")
    assert assigned.member_id == member and assigned.member_epoch == 1 and assigned.client_id == "rdkafka"
    assert sorted((a.topic, a.partition) for a in assigned.assignment) == [(EVENTS, p) for p in range(3)]
    offsets = spark.read.format("pykbroker").option("path", d).option("view", "offsets").load()
    commits = offsets.where(f"`group` = '{fixture_log.KIP848}'").collect()
    assert [(r.partition, r.offset, r.generation, r.protocol, r.owned) for r in commits] == [
        (1, 42, 1, "consumer", True)
    ]
