"""Fetch long polls, with real consumers and with single raw Fetch requests.

A fetch that finds fewer than ``min_bytes`` waits up to ``max_wait_ms`` and is answered when appends
bring enough bytes (Kafka's DelayedFetch). The raw tests send one Fetch v11 and produce while it
waits, so what they check is carried by that one response, not by timing.
"""

from __future__ import annotations

import threading

from broker.log.records import iter_records
from tests.support.produce_consume import (
    PARTS,
    TIMEOUT,
    N,
    assert_round_trip,
    ck_consumer,
    ck_poll,
    ck_produce,
    create,
    fetch_request,
    kp_consumer,
    kp_poll,
    produce_later,
)
from tests.support.wire import WireClient


def test_consumer_waiting_on_empty_partition_gets_late_record(broker):
    from kafka import TopicPartition

    create(broker, "late", 1)
    consumer = kp_consumer(broker.bootstrap, fetch_max_wait_ms=5000)
    try:
        consumer.assign([TopicPartition("late", 0)])
        consumer.seek(TopicPartition("late", 0), 0)
        assert consumer.poll(timeout_ms=100) == {}
        t = produce_later(broker.bootstrap, "late", b"hello")
        got = kp_poll(consumer, 1, timeout=20)
        t.join(TIMEOUT)
    finally:
        consumer.close()
    assert got == [(0, 0, b"late", b"hello")]


def test_one_fetch_long_polls_until_an_append(broker):
    """A single Fetch (min_bytes=1, max_wait 20 s) on an empty partition is answered with the
    record appended 0.3 s later: the append wakes the waiting fetch."""
    create(broker, "lp", 1)
    req = fetch_request("lp", min_bytes=1)
    with WireClient(broker.port, timeout=60) as c:
        c.send(1, 11, req)
        t = produce_later(broker.bootstrap, "lp", b"woken")
        _, resp = c.recv(1, 11)
        t.join(TIMEOUT)
    [part] = resp.responses[0].partitions
    assert part.error_code == 0
    assert part.high_watermark == 1
    assert [(off, k, v) for off, _, k, v, _, _ in iter_records(part.records)] == [(0, b"late", b"woken")]


def test_fetch_waits_for_min_bytes(broker):
    """min_bytes larger than the first late record: the fetch keeps waiting for more, and answers
    once a second, larger append brings enough bytes (both records in one response), as Kafka's
    DelayedFetch does (it completes only when the accumulated bytes reach fetch.min.bytes)."""
    create(broker, "mb", 1)
    req = fetch_request("mb", min_bytes=4000)
    big = b"B" * 8000
    with WireClient(broker.port, timeout=60) as c:
        c.send(1, 11, req)
        small_t = produce_later(broker.bootstrap, "mb", b"small", delay=0.3)
        small_t.join(TIMEOUT)
        big_t = produce_later(broker.bootstrap, "mb", big, delay=0.5)
        _, resp = c.recv(1, 11)
        big_t.join(TIMEOUT)
    [part] = resp.responses[0].partitions
    assert part.error_code == 0
    got = [(off, v[:5], len(v)) for off, _, _, v, _, _ in iter_records(part.records)]
    assert got == [(0, b"small", 5), (1, b"BBBBB", len(big))], "answered before min_bytes were available"


def test_fetch_with_less_than_min_bytes_available_waits(broker):
    """Some bytes already there, but fewer than min_bytes: the fetch waits (up to max_wait_ms) for
    more instead of answering at once."""
    create(broker, "mb2", 1)
    produce_later(broker.bootstrap, "mb2", b"small", delay=0).join(TIMEOUT)
    big = b"B" * 8000
    with WireClient(broker.port, timeout=60) as c:
        c.send(1, 11, fetch_request("mb2", min_bytes=4000))
        big_t = produce_later(broker.bootstrap, "mb2", big, delay=0.3)
        _, resp = c.recv(1, 11)
        big_t.join(TIMEOUT)
    [part] = resp.responses[0].partitions
    assert part.error_code == 0
    got = [(off, v[:5], len(v)) for off, _, _, v, _, _ in iter_records(part.records)]
    assert got == [(0, b"small", 5), (1, b"BBBBB", len(big))], "answered before min_bytes were available"


def test_consumer_follows_a_running_producer(broker):
    """A consumer tailing an empty topic while 10,000 records are produced gets exactly all of them,
    in order: every append wakes or feeds the consumer's waiting fetches."""
    from confluent_kafka import TopicPartition

    create(broker, "tail")
    consumer = ck_consumer(broker.bootstrap, **{"fetch.wait.max.ms": 1000})
    acks: dict[int, tuple[int, int]] = {}
    try:
        consumer.assign([TopicPartition("tail", p, 0) for p in range(PARTS)])
        assert consumer.consume(num_messages=10, timeout=0.5) == []

        def run():
            acks.update(ck_produce(broker.bootstrap, "tail", N, **{"linger.ms": 1, "batch.num.messages": 50}))

        t = threading.Thread(target=run, daemon=True)
        t.start()
        consumed = ck_poll(consumer, N)
        t.join(TIMEOUT)
    finally:
        consumer.close()
    assert_round_trip(acks, consumed)
