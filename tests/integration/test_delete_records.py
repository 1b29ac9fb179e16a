"""DeleteRecords through the admin clients that expose it (confluent-kafka, kafka-python, the Java
Admin in test_java_admin.py; aiokafka's ``delete_records`` too), with a live consumer group reading
the same partition: the consumer behind the new start is reset by its ``auto.offset.reset`` and
reads on from the low watermark, and what every client then reports agrees."""

from __future__ import annotations

import time

import pytest

TOPIC = "dr"


@pytest.fixture
def fast(broker_factory):
    return broker_factory({"group.initial.rebalance.delay.ms": 0})


def produce(bootstrap: str, n: int, start: int = 0) -> None:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for i in range(start, start + n):
        p.produce(TOPIC, value=b"v%d" % i, partition=0)
        p.flush(10)  # one batch per record: offsets inside segments, not batch-aligned
    assert p.flush(10) == 0


def poll_values(
    consumer, n: int, until: int | None = None, deadline_s: float = 30.0
) -> list[tuple[int, bytes]]:
    """``n`` records, or (``until``) records up to that offset."""
    out: list[tuple[int, bytes]] = []
    end = time.monotonic() + deadline_s

    def done() -> bool:
        return bool(out) and out[-1][0] >= until if until is not None else len(out) >= n

    while not done() and time.monotonic() < end:
        m = consumer.poll(0.5)
        if m is not None and m.error() is None:
            out.append((m.offset(), m.value()))
    return out


def test_confluent_delete_records_with_a_live_consumer_group(fast):
    from confluent_kafka import Consumer, KafkaException, TopicPartition
    from confluent_kafka.admin import AdminClient

    fast.call(fast.broker.create_topic, TOPIC, 1)
    produce(fast.bootstrap, 10)
    consumer = Consumer(
        {
            "bootstrap.servers": fast.bootstrap,
            "group.id": "readers",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            # one small batch per fetch and little prefetching: the member stays behind the deletion
            "max.partition.fetch.bytes": 64,
            "queued.min.messages": 1,
        }
    )
    admin = AdminClient({"bootstrap.servers": fast.bootstrap})
    try:
        consumer.subscribe([TOPIC])
        first = poll_values(consumer, 3)
        assert [o for o, _v in first] == [0, 1, 2]
        consumer.commit(offsets=[TopicPartition(TOPIC, 0, 3)], asynchronous=False)

        futures = admin.delete_records([TopicPartition(TOPIC, 0, 6)])
        [(tp, fut)] = futures.items()
        assert (tp.topic, tp.partition, fut.result(10).low_watermark) == (TOPIC, 0, 6)

        # the live member is now below the log start: out of range, reset to earliest = 6
        rest = poll_values(consumer, 0, until=9)
        offsets = [o for o, _v in first + rest]
        assert offsets[:3] == [0, 1, 2] and 6 in offsets and offsets[-1] == 9, offsets
        # at most what librdkafka had prefetched before the deletion comes between 2 and 6
        assert offsets == sorted(set(offsets)) and set(range(6, 10)) <= set(offsets), offsets
        # what librdkafka sees of the partition afterwards
        assert consumer.get_watermark_offsets(TopicPartition(TOPIC, 0), timeout=10) == (6, 10)

        # above the high watermark: OFFSET_OUT_OF_RANGE; -1 (OFFSET_END): everything
        [bad] = admin.delete_records([TopicPartition(TOPIC, 0, 11)]).values()
        with pytest.raises(KafkaException) as e:
            bad.result(10)
        assert e.value.args[0].name() == "OFFSET_OUT_OF_RANGE"
        [everything] = admin.delete_records([TopicPartition(TOPIC, 0, -1)]).values()
        assert everything.result(10).low_watermark == 10
    finally:
        consumer.close()


def test_kafka_python_delete_records_and_offsets_agree(fast):
    from kafka import KafkaConsumer, TopicPartition
    from kafka.admin import KafkaAdminClient
    from kafka.errors import OffsetOutOfRangeError, UnknownTopicOrPartitionError

    fast.call(fast.broker.create_topic, TOPIC, 1)
    produce(fast.bootstrap, 8)
    admin = KafkaAdminClient(bootstrap_servers=fast.bootstrap, request_timeout_ms=10000)
    consumer = KafkaConsumer(bootstrap_servers=fast.bootstrap, auto_offset_reset="earliest")
    try:
        tp = TopicPartition(TOPIC, 0)
        result = admin.delete_records({tp: 5})
        assert result[tp]["low_watermark"] == 5 and result[tp]["error_code"] == 0
        assert consumer.beginning_offsets([tp]) == {tp: 5}
        assert consumer.end_offsets([tp]) == {tp: 8}
        # a consumer asked to start below the log start is reset to it
        consumer.assign([tp])
        consumer.seek(tp, 2)
        got = []
        end = time.monotonic() + 20
        while len(got) < 3 and time.monotonic() < end:
            for records in consumer.poll(500).values():
                got += [(r.offset, r.value) for r in records]
        assert got == [(5, b"v5"), (6, b"v6"), (7, b"v7")]
        with pytest.raises(OffsetOutOfRangeError):
            admin.delete_records({tp: 9})
        with pytest.raises(UnknownTopicOrPartitionError):
            admin.delete_records({TopicPartition(TOPIC, 3): 0})
    finally:
        consumer.close()
        admin.close()
