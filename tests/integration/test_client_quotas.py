"""Client quotas enforced on real clients: confluent-kafka's and kafka-python's producers and
consumers under a client-id byte-rate quota (set through AlterClientQuotas over the wire) slow to about their quota,
are told so (``throttle_time_ms`` > 0, librdkafka's throttle callback), and clients with other ids
are not slowed. The broker measures over ``quota.window.num=2`` windows of one second (Kafka's
setting; the default 11 would let the first 10 seconds' worth through at once, too long for a test).

The timing assertions are deliberately loose: N bytes at Q bytes/s take at least N/Q * 0.5 s (the
first window's worth passes at once), and the unthrottled client takes less than the throttled one.

kafka-python's and confluent-kafka's admin clients have no client quota calls (the Java Admin's are
in test_java_admin.py)."""

from __future__ import annotations

import time

import pytest

from broker.protocol.generated.alter_client_quotas import (
    AlterClientQuotasRequest,
    OpData,
)
from broker.protocol.generated.alter_client_quotas import (
    AlterClientQuotasRequestEntityData as EntityData,
)
from broker.protocol.generated.alter_client_quotas import (
    AlterClientQuotasRequestEntryData as EntryData,
)
from tests.support.wire import WireClient

QUOTA = 100_000  # bytes per second
TOTAL = 500_000  # bytes of record values sent / read
VALUE = b"x" * 1000


@pytest.fixture
def qb(broker_factory):
    b = broker_factory({"quota.window.num": 2, "quota.window.size.seconds": 1})
    b.call(b.broker.create_topic, "q", 1)
    return b


def set_quota(broker, client_id: str, **values: float) -> None:
    req = AlterClientQuotasRequest(
        entries=[
            EntryData(
                entity=[EntityData("client-id", client_id)],
                ops=[OpData(k, float(v), False) for k, v in values.items()],
            )
        ],
        validate_only=False,
    )
    with WireClient(broker.port) as c:
        [entry] = c.call(49, 1, req).entries
    assert entry.error_code == 0, entry


def produce_timed(bootstrap: str, client_id: str) -> tuple[float, list[int]]:
    from confluent_kafka import Producer

    throttles: list[int] = []
    p = Producer(
        {
            "bootstrap.servers": bootstrap,
            "client.id": client_id,
            "linger.ms": 5,
            "batch.size": 16384,
            "throttle_cb": lambda event: throttles.append(event.throttle_time),
        }
    )
    start = time.monotonic()
    for _ in range(TOTAL // len(VALUE)):
        while True:
            try:
                p.produce("q", VALUE, partition=0)
                break
            except BufferError:
                p.poll(0.05)
        p.poll(0)
    assert p.flush(120) == 0
    elapsed = time.monotonic() - start
    p.poll(0)
    return elapsed, throttles


def consume_timed(bootstrap: str, client_id: str) -> tuple[float, list[int]]:
    from confluent_kafka import Consumer, TopicPartition

    throttles: list[int] = []
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "client.id": client_id,
            "group.id": "g-" + client_id,
            "enable.auto.commit": False,
            "max.partition.fetch.bytes": 16384,
            "throttle_cb": lambda event: throttles.append(event.throttle_time),
        }
    )
    c.assign([TopicPartition("q", 0, 0)])
    got = 0
    start = time.monotonic()
    deadline = start + 120
    while got < TOTAL and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and m.error() is None:
            got += len(m.value())
    elapsed = time.monotonic() - start
    c.close()
    assert got >= TOTAL
    return elapsed, throttles


def test_confluent_producer_slows_to_its_quota(qb):
    set_quota(qb, "slow-producer", producer_byte_rate=QUOTA)
    elapsed, throttles = produce_timed(qb.bootstrap, "slow-producer")
    assert elapsed >= TOTAL / QUOTA * 0.5, elapsed
    assert throttles and max(throttles) > 0
    fast, fast_throttles = produce_timed(qb.bootstrap, "fast-producer")
    assert fast < elapsed and not fast_throttles


def test_confluent_consumer_slows_to_its_quota(qb):
    produce_timed(qb.bootstrap, "filler")  # no quota for this client id
    set_quota(qb, "slow-consumer", consumer_byte_rate=QUOTA)
    elapsed, throttles = consume_timed(qb.bootstrap, "slow-consumer")
    assert elapsed >= TOTAL / QUOTA * 0.5, elapsed
    assert throttles and max(throttles) > 0
    fast, fast_throttles = consume_timed(qb.bootstrap, "fast-consumer")
    assert fast < elapsed and not fast_throttles


def test_kafka_python_producer_and_consumer_slow_to_their_quotas(qb):
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    set_quota(qb, "kp-slow", producer_byte_rate=QUOTA, consumer_byte_rate=QUOTA)
    p = KafkaProducer(bootstrap_servers=qb.bootstrap, client_id="kp-slow", linger_ms=5, batch_size=16384)
    start = time.monotonic()
    for _ in range(TOTAL // len(VALUE)):
        p.send("q", VALUE, partition=0)
    p.flush(120)
    produced = time.monotonic() - start
    p.close()
    assert produced >= TOTAL / QUOTA * 0.5, produced

    c = KafkaConsumer(
        bootstrap_servers=qb.bootstrap,
        client_id="kp-slow",
        max_partition_fetch_bytes=16384,
        enable_auto_commit=False,
    )
    c.assign([TopicPartition("q", 0)])
    c.seek(TopicPartition("q", 0), 0)
    got = 0
    start = time.monotonic()
    deadline = start + 120
    while got < TOTAL and time.monotonic() < deadline:
        for records in c.poll(timeout_ms=500).values():
            got += sum(len(r.value) for r in records)
    consumed = time.monotonic() - start
    c.close()
    assert got >= TOTAL and consumed >= TOTAL / QUOTA * 0.5, (got, consumed)
