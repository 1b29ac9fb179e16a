"""A clean restart of an in-process broker on the same data directory keeps everything a client can
see: the cluster id, topics with their ids, partition counts and configs, every record at its
offset with its timestamp, the log end offsets and high watermarks, and timestamp lookups. New
produces continue at the old log end.

Runs with the default segment size and with a tiny one, so that the restart also has to reopen many
closed segments and their indexes.
"""

from __future__ import annotations

import time
from collections import defaultdict

import pytest

from broker.cluster import kafka_uuid_str
from tests.support.produce_consume import TIMEOUT, value_of


def produce(bootstrap: str, topic: str, ids: range, ts0: int) -> dict[int, tuple[int, int]]:
    """kafka-python, acks=all: record i has key "i" and timestamp ts0 + i; i -> (partition, offset)."""
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5, batch_size=2048)
    try:
        futures = {
            i: producer.send(topic, key=str(i).encode(), value=value_of(i), timestamp_ms=ts0 + i) for i in ids
        }
        producer.flush(TIMEOUT)
        return {i: (f.get(TIMEOUT).partition, f.get(TIMEOUT).offset) for i, f in futures.items()}
    finally:
        producer.close(timeout=5)


def consume_all(bootstrap: str, topic: str, partitions: int, n: int) -> dict[int, list[tuple]]:
    """Every record of the topic from offset 0: partition -> [(offset, timestamp, key, value)]."""
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False)
    out: dict[int, list[tuple]] = defaultdict(list)
    try:
        consumer.assign([TopicPartition(topic, p) for p in range(partitions)])
        consumer.seek_to_beginning()
        got = 0
        deadline = time.monotonic() + TIMEOUT
        while got < n and time.monotonic() < deadline:
            for recs in consumer.poll(timeout_ms=200).values():
                for r in recs:
                    out[r.partition].append((r.offset, r.timestamp, r.key, r.value))
                    got += 1
    finally:
        consumer.close()
    return dict(out)


def client_view(bootstrap: str, topics: list[str], probe_ts: list[int]) -> dict:
    """What the wire says about the topics: ids, partitions, offsets and timestamp lookups."""
    from kafka import KafkaConsumer, TopicPartition
    from kafka.admin import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        described = {t["name"]: t for t in admin.describe_topics(topics)}
        cluster_id = admin.describe_cluster()["cluster_id"]
    finally:
        admin.close()
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False)
    try:
        view: dict = {"cluster_id": cluster_id, "topics": {}}
        for name in topics:
            d = described[name]
            assert d["error_code"] == 0, d
            tps = [TopicPartition(name, p["partition_index"]) for p in d["partitions"]]
            for_times = []
            for ts in probe_ts:
                found = consumer.offsets_for_times(dict.fromkeys(tps, ts))
                for_times.append(
                    {tp.partition: (o.offset, o.timestamp) if o else None for tp, o in found.items()}
                )
            view["topics"][name] = {
                "topic_id": d["topic_id"],
                "partitions": sorted(tp.partition for tp in tps),
                "beginning": {tp.partition: o for tp, o in consumer.beginning_offsets(tps).items()},
                "end": {tp.partition: o for tp, o in consumer.end_offsets(tps).items()},
                "for_times": for_times,
            }
        return view
    finally:
        consumer.close()


def broker_view(bt, topics: list[str]) -> dict:
    """The broker's own bookkeeping, read on its loop."""

    def read():
        out = {"cluster_id": bt.broker.cluster_id}
        for name in topics:
            t = bt.broker.topics.get(name)
            out[name] = {
                "topic_id": kafka_uuid_str(t.topic_id),
                "partitions": t.partitions,
                "configs": dict(t.configs),
                "offsets": [
                    (plog.log_start_offset, plog.high_watermark, plog.log_end_offset)
                    for plog in (bt.broker.logs.get(name, p) for p in range(t.partitions))
                ],
            }
        return out

    return bt.call(read)


@pytest.mark.parametrize("segment_bytes", [None, 4096], ids=["one-segment", "many-segments"])
def test_everything_survives_a_clean_restart(broker_factory, tmp_path, segment_bytes):
    config = {} if segment_bytes is None else {"log.segment.bytes": segment_bytes}
    data = tmp_path / "data"
    topics = ["orders", "audit", "empty"]
    n = 3000
    ts0 = int(time.time() * 1000) - 60_000

    b1 = broker_factory(config, data_dir=data)
    b1.call(b1.broker.create_topic, "orders", 3)
    b1.call(b1.broker.create_topic, "audit", 1, {"retention.ms": "86400000", "cleanup.policy": "delete"})
    b1.call(b1.broker.create_topic, "empty", 2)
    acks = produce(b1.bootstrap, "orders", range(n), ts0)
    acks_audit = produce(b1.bootstrap, "audit", range(n, n + 500), ts0)
    probe_ts = [ts0 - 1, ts0 + 1234, ts0 + n - 1, ts0 + n + 499, ts0 + n + 500]
    before_broker = broker_view(b1, topics)
    before_client = client_view(b1.bootstrap, topics, probe_ts)
    before_records = consume_all(b1.bootstrap, "orders", 3, n)
    before_audit = consume_all(b1.bootstrap, "audit", 1, 500)
    if segment_bytes is not None:
        segs = b1.call(lambda: min(len(b1.broker.logs.get(t, 0).segments) for t in ("orders", "audit")))
        assert segs > 5, f"expected many segments with log.segment.bytes={segment_bytes}, got {segs}"
    b1.stop()

    # sanity of the state we are about to compare
    per_part: dict[int, list[tuple]] = defaultdict(list)
    for i in range(n):
        p, off = acks[i]
        per_part[p].append((off, ts0 + i, str(i).encode(), value_of(i)))
    assert before_records == dict(per_part)
    assert [r[0] for r in before_audit[0]] == list(range(500))
    assert sorted(off for _, off in acks_audit.values()) == list(range(500))
    counts = {p: len(per_part[p]) for p in range(3)}
    assert before_broker["orders"]["offsets"] == [(0, counts[p], counts[p]) for p in range(3)]
    assert before_broker["empty"]["offsets"] == [(0, 0, 0), (0, 0, 0)]
    assert before_client["topics"]["orders"]["end"] == counts
    assert before_client["topics"]["orders"]["for_times"] == [
        {p: next(((off, t) for off, t, _, _ in per_part[p] if t >= ts), None) for p in range(3)}
        for ts in probe_ts
    ]
    assert before_client["topics"]["empty"]["for_times"] == [{0: None, 1: None}] * len(probe_ts)

    b2 = broker_factory(config, data_dir=data)
    assert broker_view(b2, topics) == before_broker
    assert client_view(b2.bootstrap, topics, probe_ts) == before_client
    assert consume_all(b2.bootstrap, "orders", 3, n) == before_records
    assert consume_all(b2.bootstrap, "audit", 1, 500) == before_audit

    # new records continue at the old log end of each partition
    more = produce(b2.bootstrap, "orders", range(n, n + 400), ts0)
    next_offset = dict(counts)
    for i in range(n, n + 400):
        p, off = more[i]
        assert off == next_offset[p], (i, p, off)
        next_offset[p] += 1
    after = consume_all(b2.bootstrap, "orders", 3, n + 400)
    for p in range(3):
        assert after[p][: counts[p]] == before_records[p]
        assert [r[0] for r in after[p]] == list(range(next_offset[p]))
    b2.stop()

    # and a second restart sees the appended records too
    b3 = broker_factory(config, data_dir=data)
    assert consume_all(b3.bootstrap, "orders", 3, n + 400) == after
    offsets = broker_view(b3, ["orders"])["orders"]["offsets"]
    assert offsets == [(0, next_offset[p], next_offset[p]) for p in range(3)]


def test_restart_keeps_auto_created_topics_and_producer_ids_move_on(broker_factory, tmp_path):
    """A topic auto-created by a producer's Metadata request survives, and an idempotent producer
    started after the restart gets a fresh producer id and appends after the old records."""
    from confluent_kafka import Producer

    data = tmp_path / "data"
    b1 = broker_factory({"num.partitions": 2}, data_dir=data)
    acks = produce(b1.bootstrap, "auto", range(200), int(time.time() * 1000))
    topic_id = b1.call(lambda: b1.broker.topics.get("auto").topic_id)
    pids_before = b1.call(
        lambda: set().union(*(b1.broker.logs.get("auto", p).producers.producers for p in range(2)))
    )
    b1.stop()

    b2 = broker_factory({"num.partitions": 5}, data_dir=data)
    assert b2.call(
        lambda: (b2.broker.topics.get("auto").topic_id, b2.broker.topics.get("auto").partitions)
    ) == (
        topic_id,
        2,
    )
    delivered = []
    producer = Producer({"bootstrap.servers": b2.bootstrap, "acks": "all", "enable.idempotence": True})
    for i in range(200, 300):
        producer.produce(
            "auto", key=str(i).encode(), value=value_of(i), on_delivery=lambda e, m: delivered.append((e, m))
        )
    assert producer.flush(TIMEOUT) == 0
    assert all(e is None for e, _ in delivered)
    counts = defaultdict(int)
    for p, _ in acks.values():
        counts[p] += 1
    by_part = defaultdict(list)
    for _, m in delivered:
        by_part[m.partition()].append(m.offset())
    for p, offs in by_part.items():
        assert offs == list(range(counts[p], counts[p] + len(offs))), p
    pids_after = b2.call(
        lambda: set().union(*(b2.broker.logs.get("auto", p).producers.producers for p in range(2)))
    )
    new = pids_after - pids_before
    assert len(new) == 1 and min(new) > max(pids_before, default=-1), (pids_before, pids_after)


def test_idempotent_producer_keeps_going_across_a_restart(broker_factory, tmp_path):
    """librdkafka's idempotent producer keeps its producer id and sequences while the broker restarts
    on the same port under it; requests in flight at the stop are retried. Every record ends up
    stored exactly once, each partition in produce order."""
    import threading

    from confluent_kafka import Producer

    data = tmp_path / "data"
    b1 = broker_factory(data_dir=data)
    port = b1.port
    b1.call(b1.broker.create_topic, "flow", 3)
    n = 3000
    acks: dict[int, tuple[int, int]] = {}
    errors: list = []
    producer = Producer(
        {
            "bootstrap.servers": b1.bootstrap,
            "enable.idempotence": True,
            "linger.ms": 2,
            "reconnect.backoff.ms": 20,
        }
    )

    def cb(i):
        def done(err, msg):
            if err is not None:
                errors.append((i, str(err)))
            else:
                acks[i] = (msg.partition(), msg.offset())

        return done

    def run():
        for i in range(n):
            producer.produce("flow", key=str(i).encode(), value=value_of(i), on_delivery=cb(i))
            producer.poll(0)
            if i % 20 == 0:
                time.sleep(0.01)  # about 1.5 s in all, so that the restart falls in the middle

    t = threading.Thread(target=run, daemon=True)
    t.start()

    def written() -> int:
        return sum(b1.broker.logs.get("flow", p).log_end_offset for p in range(3))

    deadline = time.monotonic() + TIMEOUT
    while b1.call(written) < 300 and time.monotonic() < deadline:
        time.sleep(0.005)
    b1.stop()
    written_before_stop = written()
    assert 0 < written_before_stop < n, "the restart should happen while the producer is still sending"
    b2 = broker_factory({"port": port}, data_dir=data)
    t.join(TIMEOUT)
    assert producer.flush(TIMEOUT) == 0
    assert not errors, errors[:5]
    assert sorted(acks) == list(range(n))

    per_part: dict[int, list[tuple]] = defaultdict(list)
    for i in range(n):
        p, off = acks[i]
        per_part[p].append((off, str(i).encode(), value_of(i)))
    for p, recs in per_part.items():
        assert [r[0] for r in recs] == list(range(len(recs))), p
    consumed = consume_all(b2.bootstrap, "flow", 3, n)
    assert {p: [(off, k, v) for off, _, k, v in recs] for p, recs in consumed.items()} == dict(per_part)
