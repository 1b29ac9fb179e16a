"""Shared pieces of the produce/consume integration tests: the record contents, produce and consume
helpers for kafka-python and confluent-kafka, and the round-trip check.

Record i has key ``str(i)`` and value ``value_of(i)``; the Java probe (tests/java/
ProduceConsumeProbe.java) builds the same values.
"""

from __future__ import annotations

import threading
import time
from collections import defaultdict

from broker.log.records import iter_records
from broker.protocol.generated.fetch import FetchPartition, FetchRequest, FetchTopic

N = 10_000
PARTS = 4
TIMEOUT = 30.0
PAYLOAD = b"0123456789abcdef" * 8
CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
CODEC_IDS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


def key_of(i: int) -> bytes:
    return str(i).encode()


def value_of(i: int) -> bytes:
    return f"value-{i}|".encode() + PAYLOAD[: i % 97]


def create(broker, name: str, partitions: int = PARTS) -> None:
    broker.call(broker.broker.create_topic, name, partitions)


def assert_round_trip(acks: dict[int, tuple[int, int]], consumed: list[tuple], n: int = N) -> None:
    """``acks``: record i -> (partition, offset) from its produce ack; ``consumed``: (partition,
    offset, key, value) in the order the consumer delivered them."""
    assert sorted(acks) == list(range(n)), "not every record was acknowledged"
    produced: dict[int, list[tuple[int, bytes, bytes]]] = defaultdict(list)
    for i in range(n):  # produce order
        p, off = acks[i]
        produced[p].append((off, key_of(i), value_of(i)))
    assert len(produced) > 1, "the keys should spread over several partitions"
    for p, recs in produced.items():
        offsets = [off for off, _, _ in recs]
        assert offsets == list(range(len(recs))), f"partition {p}: acked offsets are not 0..n-1 in order"
    assert len(consumed) == n, f"consumed {len(consumed)} records, expected {n}"
    assert {(k, v) for _, _, k, v in consumed} == {(key_of(i), value_of(i)) for i in range(n)}
    got: dict[int, list[tuple[int, bytes, bytes]]] = defaultdict(list)
    for p, off, k, v in consumed:
        got[p].append((off, bytes(k), bytes(v)))
    assert sorted(got) == sorted(produced)
    for p in produced:
        assert got[p] == produced[p], f"partition {p}: consumed records differ from the produced ones"


# ---------------------------------------------------------------- client helpers


def kp_produce(bootstrap: str, topic: str, n: int = N, **config) -> dict[int, tuple[int, int]]:
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5, **config)
    try:
        futures = [producer.send(topic, key=key_of(i), value=value_of(i)) for i in range(n)]
        producer.flush(TIMEOUT)
        acks = {}
        for i, f in enumerate(futures):
            md = f.get(TIMEOUT)
            acks[i] = (md.partition, md.offset)
        return acks
    finally:
        producer.close(timeout=5)


def kp_consumer(bootstrap: str, **config):
    from kafka import KafkaConsumer

    config.setdefault("auto_offset_reset", "earliest")
    return KafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=None,
        enable_auto_commit=False,
        request_timeout_ms=20000,
        **config,
    )


def kp_poll(consumer, n: int, timeout: float = TIMEOUT) -> list[tuple]:
    out: list[tuple] = []
    deadline = time.monotonic() + timeout
    while len(out) < n and time.monotonic() < deadline:
        for recs in consumer.poll(timeout_ms=200).values():
            out += [(r.partition, r.offset, r.key, r.value) for r in recs]
    return out


def ck_produce(bootstrap: str, topic: str, n: int = N, **config) -> dict[int, tuple[int, int]]:
    from confluent_kafka import Producer

    conf = {"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5}
    conf.update(config)
    producer = Producer(conf)
    acks: dict[int, tuple[int, int]] = {}
    errors: list = []

    def delivered(i: int):
        def cb(err, msg):
            if err is not None:
                errors.append((i, err))
            else:
                acks[i] = (msg.partition(), msg.offset())

        return cb

    for i in range(n):
        while True:
            try:
                producer.produce(topic, key=key_of(i), value=value_of(i), on_delivery=delivered(i))
                break
            except BufferError:
                producer.poll(0.05)
        producer.poll(0)
    assert producer.flush(TIMEOUT) == 0, "undelivered records after flush"
    assert not errors, errors[:5]
    return acks


def ck_consumer(bootstrap: str, **config):
    from confluent_kafka import Consumer

    conf = {
        "bootstrap.servers": bootstrap,
        "group.id": "ck-test",  # required by librdkafka even with assign(); no group APIs are used
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
    }
    conf.update(config)
    return Consumer(conf)


def ck_poll(consumer, n: int, timeout: float = TIMEOUT) -> list[tuple]:
    out: list[tuple] = []
    deadline = time.monotonic() + timeout
    while len(out) < n and time.monotonic() < deadline:
        for m in consumer.consume(num_messages=1000, timeout=0.2):
            assert m.error() is None, m.error()
            out.append((m.partition(), m.offset(), m.key(), m.value()))
    return out


def stored_codecs(broker, topic: str, partition: int) -> set[int]:
    """Compression codec ids of the batches the broker stored for the partition."""

    def read():
        plog = broker.broker.logs.get(topic, partition)
        return plog.read(plog.log_start_offset, 1 << 30)

    return {info.compression for *_, info in iter_records(broker.call(read))}


def produce_later(bootstrap: str, topic: str, value: bytes, delay: float = 0.3) -> threading.Thread:
    """A thread that produces one record (key b"late") to partition 0 after ``delay`` seconds."""
    from confluent_kafka import Producer

    def run():
        time.sleep(delay)
        producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
        producer.produce(topic, key=b"late", value=value, partition=0)
        producer.flush(TIMEOUT)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


def fetch_request(
    topic: str, min_bytes: int, max_wait_ms: int = 20_000, fetch_offset: int = 0
) -> FetchRequest:
    """Fetch (v4-v12 field set, topic by name) of partition 0 from ``fetch_offset``."""
    part = FetchPartition(
        partition=0, fetch_offset=fetch_offset, log_start_offset=-1, partition_max_bytes=1 << 20
    )
    return FetchRequest(
        replica_id=-1,
        max_wait_ms=max_wait_ms,
        min_bytes=min_bytes,
        max_bytes=1 << 20,
        isolation_level=0,
        session_id=0,
        session_epoch=-1,
        topics=[FetchTopic(topic=topic, partitions=[part])],
        forgotten_topics_data=[],
        rack_id="",
    )
