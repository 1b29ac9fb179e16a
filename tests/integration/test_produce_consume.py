"""Real producers and consumers (kafka-python, confluent-kafka, aiokafka) through the broker.

Each big test produces 10,000 keyed records to a 4-partition topic with acks=all, remembers the
(partition, offset) every produce ack reported, reads everything back with assign() and a seek, and
checks that the consumed (partition, offset, key, value) are exactly the acknowledged ones: nothing
lost, nothing duplicated, and each partition in produce order with offsets 0..n-1. Long polls are
in test_long_poll.py; helpers in tests/support/produce_consume.py.

Topics are created through the broker object (``broker.call(broker.broker.create_topic, ...)``),
so these tests do not depend on the admin APIs.
"""

from __future__ import annotations

import time
from collections import defaultdict

import pytest

from tests.support.produce_consume import (
    CODEC_IDS,
    CODECS,
    PARTS,
    TIMEOUT,
    N,
    assert_round_trip,
    ck_consumer,
    ck_poll,
    ck_produce,
    create,
    key_of,
    kp_consumer,
    kp_poll,
    kp_produce,
    stored_codecs,
    value_of,
)

# ---------------------------------------------------------------- the 10,000-record round trips


def test_kafka_python_round_trip(broker):
    from kafka import TopicPartition

    create(broker, "kp")
    acks = kp_produce(broker.bootstrap, "kp")
    consumer = kp_consumer(broker.bootstrap)
    try:
        consumer.assign([TopicPartition("kp", p) for p in range(PARTS)])
        consumer.seek_to_beginning()
        consumed = kp_poll(consumer, N)
    finally:
        consumer.close()
    assert_round_trip(acks, consumed)


def test_confluent_round_trip_from_beginning(broker):
    from confluent_kafka import OFFSET_BEGINNING, TopicPartition

    create(broker, "ck")
    acks = ck_produce(broker.bootstrap, "ck")
    consumer = ck_consumer(broker.bootstrap)
    try:
        consumer.assign([TopicPartition("ck", p, OFFSET_BEGINNING) for p in range(PARTS)])
        consumed = ck_poll(consumer, N)
    finally:
        consumer.close()
    assert_round_trip(acks, consumed)


def test_confluent_idempotent_round_trip_reset_from_out_of_range(broker):
    """An idempotent librdkafka producer (InitProducerId + sequences); the consumer starts beyond the
    log end, gets OFFSET_OUT_OF_RANGE and resets to the earliest offset through ListOffsets."""
    from confluent_kafka import TopicPartition

    create(broker, "ck-idem")
    acks = ck_produce(broker.bootstrap, "ck-idem", **{"enable.idempotence": True})
    pids = broker.call(
        lambda: {p: set(broker.broker.logs.get("ck-idem", p).producers.producers) for p in range(PARTS)}
    )
    assert len(set().union(*pids.values())) == 1 and all(pids.values()), pids
    consumer = ck_consumer(broker.bootstrap)
    try:
        consumer.assign([TopicPartition("ck-idem", p, 10 * N) for p in range(PARTS)])
        consumed = ck_poll(consumer, N)
    finally:
        consumer.close()
    assert_round_trip(acks, consumed)


_CK_ASSIGN_NO_OFFSET = """
import json, sys, time
from confluent_kafka import Consumer, TopicPartition
bootstrap, topic, parts, n, timeout = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5])
c = Consumer({"bootstrap.servers": bootstrap, "group.id": "reset-group", "enable.auto.commit": False,
              "auto.offset.reset": "earliest"})
c.assign([TopicPartition(topic, p) for p in range(parts)])
got, deadline = 0, time.monotonic() + timeout
while got < n and time.monotonic() < deadline:
    for m in c.consume(num_messages=1000, timeout=0.2):
        assert m.error() is None, m.error()
        print(json.dumps([m.partition(), m.offset(), m.key().decode(), m.value().decode()]))
        got += 1
c.close()
"""


def test_confluent_assign_without_offset_uses_auto_offset_reset(broker):
    """assign() without an offset: librdkafka asks the group coordinator for the committed offset
    (OffsetFetch), finds none and applies auto.offset.reset=earliest through ListOffsets.

    The consumer runs in a subprocess: librdkafka 2.16 crashes the whole process (SIGSEGV) when the
    coordinator does not support OffsetFetch, and that must fail this test, not kill the run."""
    import json
    import subprocess
    import sys

    n = 2000
    create(broker, "ck-reset")
    acks = ck_produce(broker.bootstrap, "ck-reset", n)
    proc = subprocess.run(
        [sys.executable, "-c", _CK_ASSIGN_NO_OFFSET, broker.bootstrap, "ck-reset", str(PARTS), str(n), "20"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, f"consumer exited with {proc.returncode}: {proc.stderr[-2000:]}"
    consumed = [tuple(json.loads(line)) for line in proc.stdout.splitlines()]
    consumed = [(p, off, k.encode(), v.encode()) for p, off, k, v in consumed]
    assert_round_trip(acks, consumed, n)


def test_kafka_python_assign_without_offset_uses_auto_offset_reset(broker):
    """No group, no seek: kafka-python resets each partition with ListOffsets(earliest)."""
    from kafka import TopicPartition

    n = 2000
    create(broker, "kp-reset")
    acks = kp_produce(broker.bootstrap, "kp-reset", n)
    consumer = kp_consumer(broker.bootstrap, auto_offset_reset="earliest")
    try:
        consumer.assign([TopicPartition("kp-reset", p) for p in range(PARTS)])
        consumed = kp_poll(consumer, n)
    finally:
        consumer.close()
    assert_round_trip(acks, consumed, n)


async def test_aiokafka_round_trip(broker):
    import asyncio

    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

    create(broker, "aio")
    producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, acks="all", linger_ms=5)
    await producer.start()
    try:
        futures = [await producer.send("aio", key=key_of(i), value=value_of(i)) for i in range(N)]
        results = await asyncio.wait_for(asyncio.gather(*futures), TIMEOUT)
    finally:
        await producer.stop()
    acks = {i: (md.partition, md.offset) for i, md in enumerate(results)}

    consumer = AIOKafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=None, enable_auto_commit=False)
    await consumer.start()
    consumed: list[tuple] = []
    try:
        consumer.assign([TopicPartition("aio", p) for p in range(PARTS)])
        await consumer.seek_to_beginning()
        deadline = time.monotonic() + TIMEOUT
        while len(consumed) < N and time.monotonic() < deadline:
            batches = await consumer.getmany(timeout_ms=200)
            for recs in batches.values():
                consumed += [(r.partition, r.offset, r.key, r.value) for r in recs]
    finally:
        await consumer.stop()
    assert_round_trip(acks, consumed)


# ---------------------------------------------------------------- compression


@pytest.mark.parametrize("codec", CODECS)
def test_confluent_compression(broker, codec):
    from confluent_kafka import OFFSET_BEGINNING, TopicPartition

    n = 2000
    topic = f"z-{codec}"
    create(broker, topic)
    acks = ck_produce(broker.bootstrap, topic, n, **{"compression.type": codec})
    # the batches really travelled (and are stored) compressed with the codec; librdkafka sends a
    # batch uncompressed when compressing would not make it smaller (a batch of one or two records
    # when the producer was fast enough to send it alone), so those may sit beside them
    for p in range(PARTS):
        codecs = stored_codecs(broker, topic, p)
        assert CODEC_IDS[codec] in codecs and codecs <= {CODEC_IDS[codec], 0}, codecs
    consumer = ck_consumer(broker.bootstrap)
    try:
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTS)])
        consumed = ck_poll(consumer, n)
    finally:
        consumer.close()
    assert_round_trip(acks, consumed, n)


def test_kafka_python_reads_what_confluent_compressed(broker):
    """One partition holding batches of every codec, written by librdkafka, read by kafka-python."""
    from confluent_kafka import Producer
    from kafka import TopicPartition

    create(broker, "mixed", 1)
    per_codec = 500
    expected = []
    for c, codec in enumerate(CODECS):
        producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all", "compression.type": codec})
        for j in range(per_codec):
            i = c * per_codec + j
            producer.produce("mixed", key=key_of(i), value=value_of(i), partition=0)
            expected.append((0, i, key_of(i), value_of(i)))
        assert producer.flush(TIMEOUT) == 0
    assert stored_codecs(broker, "mixed", 0) == set(CODEC_IDS.values())

    consumer = kp_consumer(broker.bootstrap)
    try:
        consumer.assign([TopicPartition("mixed", 0)])
        consumer.seek_to_beginning()
        consumed = kp_poll(consumer, len(expected))
    finally:
        consumer.close()
    assert consumed == expected


def test_confluent_reads_what_kafka_python_compressed(broker):
    """The other direction: kafka-python's codecs (gzip, python-snappy, lz4, zstandard), librdkafka's
    decoders."""
    from confluent_kafka import OFFSET_BEGINNING, TopicPartition

    n = 1000
    for codec in CODECS[1:]:
        topic = f"kpz-{codec}"
        create(broker, topic, 2)
        acks = kp_produce(broker.bootstrap, topic, n, compression_type=codec)
        # kafka-python sends a batch uncompressed when compressing does not make it smaller (a
        # small batch under load): at least one compressed batch, nothing but the codec or none
        stored = stored_codecs(broker, topic, 0)
        assert CODEC_IDS[codec] in stored and stored <= {0, CODEC_IDS[codec]}, stored
        consumer = ck_consumer(broker.bootstrap)
        try:
            consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(2)])
            consumed = ck_poll(consumer, n)
        finally:
            consumer.close()
        assert_round_trip(acks, consumed, n)


# ---------------------------------------------------------------- offsets


def test_watermarks_and_seek_to_the_middle(broker):
    from confluent_kafka import TopicPartition as CkTP
    from kafka import TopicPartition as KpTP

    n = 4000
    create(broker, "marks")
    acks = ck_produce(broker.bootstrap, "marks", n)
    counts = defaultdict(int)
    for p, _ in acks.values():
        counts[p] += 1
    assert sum(counts.values()) == n

    consumer = ck_consumer(broker.bootstrap)
    try:
        for p in range(PARTS):
            low, high = consumer.get_watermark_offsets(CkTP("marks", p), timeout=10, cached=False)
            assert (low, high) == (0, counts[p]), p
        # seek to an offset in the middle of a batch: the first record delivered is exactly that one
        mids = {p: counts[p] // 2 + 1 for p in range(PARTS)}
        consumer.assign([CkTP("marks", p, mids[p]) for p in range(PARTS)])
        consumed = ck_poll(consumer, sum(counts[p] - mids[p] for p in range(PARTS)))
    finally:
        consumer.close()
    by_offset = {(p, off): i for i, (p, off) in acks.items()}
    expected = {
        p: [
            (p, off, key_of(by_offset[p, off]), value_of(by_offset[p, off]))
            for off in range(mids[p], counts[p])
        ]
        for p in range(PARTS)
    }
    for p in range(PARTS):
        assert [r for r in consumed if r[0] == p] == expected[p]

    kp = kp_consumer(broker.bootstrap)
    try:
        tps = [KpTP("marks", p) for p in range(PARTS)]
        assert kp.end_offsets(tps) == {KpTP("marks", p): counts[p] for p in range(PARTS)}
        assert kp.beginning_offsets(tps) == {KpTP("marks", p): 0 for p in range(PARTS)}
        kp.assign([tps[0]])
        mid = mids[0] + 7
        kp.seek(tps[0], mid)
        got = kp_poll(kp, counts[0] - mid)
    finally:
        kp.close()
    assert got[0][1] == mid
    assert [(p, off, k, v) for p, off, k, v in got] == [r for r in expected[0] if r[1] >= mid]
