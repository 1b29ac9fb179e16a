"""The same Spark job, through Spark's own Kafka connector, against this broker and against a released
Apache Kafka broker (the session's ``real_kafka``): the same clients write the same records and
commits into each, and every result of the job must be equal (after removing what is each broker's
own: its clock for LogAppendTime, member ids, commit times)."""

from __future__ import annotations

import json
import time
import uuid

from kafka import KafkaConsumer, TopicPartition
from kafka.structs import OffsetAndMetadata

from broker.spark import jobs
from broker.spark.inputs import Source
from broker.testing import running_broker
from tests.spark import connector_data as cd
from tests.spark.connector_data import APPEND, CODECS_TOPIC, KC, PER_PARTITION


def _commit(bootstrap: str, group: str, topic: str, offsets: dict[int, int]) -> None:
    c = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False)
    c.commit({TopicPartition(topic, p): OffsetAndMetadata(o, "", -1) for p, o in offsets.items()})
    c.close()


def _member_joins_and_leaves(bootstrap: str, group: str, topic: str) -> None:
    c = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False,
                      heartbeat_interval_ms=100, session_timeout_ms=6000)  # fmt: skip
    assert c.partitions_for_topic(topic) == {0, 1, 2}
    c.subscribe([topic])
    deadline = time.monotonic() + 60  # hang guard
    while len(c.assignment()) < 3:
        assert time.monotonic() < deadline, f"hang guard: {c.assignment()}"
        c.poll(timeout_ms=100)
    c.commit({TopicPartition(topic, 1): OffsetAndMetadata(9, "", -1)})
    c.close()  # LeaveGroup: the group is empty


def _stream(spark, bootstrap: str, topic: str, sink, ckpt, **options: str) -> list[int]:
    reader = spark.readStream.format("kafka").option("kafka.bootstrap.servers", bootstrap)
    reader = reader.option("subscribe", topic).option("startingOffsets", "earliest")
    for k, v in options.items():
        reader = reader.option(k, v)
    q = (
        reader.option("includeHeaders", "true")
        .load()
        .writeStream.format("parquet")
        .option("path", str(sink))
        .option("checkpointLocation", str(ckpt))
        .trigger(availableNow=True)
        .start()
    )
    assert q.awaitTermination(180), "hang guard: the AvailableNow query did not finish"
    assert q.exception() is None
    return [int(p["numInputRows"]) for p in q.recentProgress if int(p["numInputRows"])]


def connector_job(spark, bootstrap: str, prefix: str, tmp) -> dict[str, object]:
    """Writes the connector_data topics, a sink topic and some groups' commits into the broker at
    ``bootstrap`` (topic and group names prefixed), runs Spark over it, and returns what Spark saw,
    with the prefix removed and each broker's own values (clock, member ids) left out."""
    cd.populate(bootstrap, prefix)
    kc, strip = prefix + KC, len(prefix)
    out: dict[str, object] = {}

    def rows(df) -> list:
        got = []
        for t, p, o, key, value, headers, ms, ts_type in cd.spark_rows(df):
            if t == prefix + APPEND:
                assert ts_type == 1 and ms > 1_000_000  # the broker's clock, not the producer's
                ms = None
            elif t == prefix + CODECS_TOPIC:
                ms = None  # confluent-kafka's clock when it produced
            got.append((t[strip:], p, o, key, value, headers, ms, ts_type))
        return got

    def read(**options: str):
        r = spark.read.format("kafka").option("kafka.bootstrap.servers", bootstrap)
        for k, v in options.items():
            r = r.option(k, v)
        return r.load()

    out["all"] = rows(read(subscribe=",".join(cd.topics(prefix)), includeHeaders="true"))
    # explicit starting and ending offsets (earliest and latest are in test_kafka_connector)
    out["by_offsets"] = sorted(
        (r.partition, r.offset)
        for r in read(subscribe=kc, startingOffsets=json.dumps({kc: {"0": 3, "1": 0, "2": 15}}),
                      endingOffsets=json.dumps({kc: {"0": 11, "1": 6, "2": -1}})).collect()
    )  # fmt: skip
    out["by_timestamps"] = sorted(
        (r.partition, r.offset)
        for r in read(subscribe=kc,
                      startingOffsetsByTimestamp=json.dumps({kc: {str(p): cd.ts(p, 4) - 1 for p in range(3)}}),
                      endingOffsetsByTimestamp=json.dumps({kc: {str(p): cd.ts(p, 9) + 1 for p in range(3)}})).collect()
    )  # fmt: skip

    stream = prefix + "stream"
    cd.create_topics(bootstrap, (stream, 3))
    cd.produce_kc(bootstrap, topic=stream, count=10)
    sink, ckpt = tmp / "sink", tmp / "ckpt"
    first = _stream(spark, bootstrap, stream, sink, ckpt, maxOffsetsPerTrigger="12")
    cd.produce_kc(bootstrap, topic=stream, start=10, count=4)
    out["stream_batches"] = (first, _stream(spark, bootstrap, stream, sink, ckpt))
    out["stream_rows"] = rows(spark.read.parquet(str(sink)))

    written = prefix + "written"
    cd.create_topics(bootstrap, (written, 2))
    df = spark.createDataFrame(
        [(f"k{i}".encode(), f"v{i}".encode(), i % 2, [("n", str(i).encode())]) for i in range(10)],
        "key binary, value binary, partition int, headers array<struct<key:string,value:binary>>",
    )
    df.write.format("kafka").option("kafka.bootstrap.servers", bootstrap).option("topic", written).save()
    # Spark's two tasks write concurrently (the order within a partition is theirs) and its producer
    # stamps the records with its clock (CreateTime)
    got = cd.consume(bootstrap, {written: 2})
    out["sink"] = sorted((t[strip:], p, k, v, h, tt) for t, p, _o, k, v, h, _ms, tt in got)
    out["sink_offsets"] = sorted((p, o) for _t, p, o, *_rest in got)

    lagger, member = prefix + "lagger", prefix + "member"
    _commit(bootstrap, lagger, kc, {0: 5, 1: 10, 2: 20})
    _commit(bootstrap, lagger, kc, {0: 2})  # backwards
    _member_joins_and_leaves(bootstrap, member, kc)
    src = Source(bootstrap=bootstrap)
    ours = f"`group` in ('{lagger}', '{member}')"
    out["lag"] = [
        (r.group[strip:], r.topic[strip:], r.partition, r.offset, r.log_end_offset, r.lag)
        for r in jobs.lag_table(spark, src).where(ours).collect()
    ]
    out["audit"] = sorted(
        (r.group[strip:], r.partition, r.offset, r.previous_offset, r.finding)
        for r in jobs.audit_table(spark, src).where(ours).collect()
    )
    gens, _summary = jobs.timeline_tables(spark, src)
    out["timeline"] = [
        (r.group[strip:], r.protocol, r.generation, r.members, len(r.member_ids or []),
         sorted(p[strip:] for p in r.partitions or []))
        for r in gens.where(ours).orderBy("group", "generation").collect()
    ]  # fmt: skip
    return out


def test_the_same_connector_job_gives_the_same_result_on_real_kafka(spark, kafka_format, real_kafka,
                                                                     tmp_path):  # fmt: skip
    prefix = f"x{uuid.uuid4().hex[:6]}-"  # the real broker lives for the whole session
    with running_broker(tmp_path / "data", {"group.initial.rebalance.delay.ms": 0}) as b:
        ours = connector_job(spark, b.bootstrap, prefix, tmp_path / "ours")
    theirs = connector_job(spark, real_kafka.bootstrap, prefix, tmp_path / "kafka")
    assert list(ours) == list(theirs)
    for key in ours:
        assert ours[key] == theirs[key], key
    # and the results are the known ones, not two equal wrong answers
    assert len(ours["all"]) == 3 * PER_PARTITION + 4 * 10 + 5
    assert {r[0] for r in ours["all"]} == {KC, CODECS_TOPIC, APPEND}
    assert ours["by_timestamps"] == cd.offsets_of({p: (4, 10) for p in range(3)})
    assert ours["stream_batches"] == ([12, 12, 6], [12])
    assert sorted((r[1], r[2]) for r in ours["stream_rows"]) == cd.offsets_of({p: (0, 14) for p in range(3)})
    assert [(r[1], r[3]) for r in ours["sink"]] == sorted((i % 2, f"v{i}".encode()) for i in range(10))
    assert ours["sink_offsets"] == cd.offsets_of({0: (0, 5), 1: (0, 5)})
    assert sorted(ours["lag"]) == [
        ("lagger", KC, 0, 2, PER_PARTITION, PER_PARTITION - 2),
        ("lagger", KC, 0, 5, PER_PARTITION, PER_PARTITION - 5),
        ("lagger", KC, 1, 10, PER_PARTITION, PER_PARTITION - 10),
        ("lagger", KC, 2, 20, PER_PARTITION, 0),
        ("member", KC, 1, 9, PER_PARTITION, PER_PARTITION - 9),
    ]
    assert ("lagger", 0, 2, 5, "backwards") in ours["audit"]
    assert [(g, m) for g, _p, _gen, m, _n, _ps in ours["timeline"]] == [("member", 1), ("member", 0)]
