"""Consumers that use incremental fetch sessions (KIP-227: kafka-python here, the Java client in
test_java_produce_consume.py) read every record once and in order while the broker leaves unchanged
partitions out of its answers, through waves of records into some partitions, a partition removed
from the assignment (forgotten) and added back."""

from __future__ import annotations

import time

from tests.support.produce_consume import create, kp_consumer

PARTS = 30
TIMEOUT = 120  # a hang guard on a loaded machine, not a timing check


def _produce(bootstrap: str, topic: str, partitions: list[int], per_partition: int, tag: str) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    errors: list = []
    for i in range(per_partition):
        for p in partitions:
            producer.produce(
                topic,
                f"{tag}-{p}-{i}".encode(),
                partition=p,
                on_delivery=lambda e, _m: e and errors.append(e),
            )
    assert producer.flush(TIMEOUT) == 0 and not errors


def _poll_until(consumer, want: int) -> dict[int, list[tuple[int, bytes]]]:
    got: dict[int, list[tuple[int, bytes]]] = {}
    n = 0
    deadline = time.monotonic() + TIMEOUT
    while n < want and time.monotonic() < deadline:
        for tp, recs in consumer.poll(timeout_ms=200).items():
            got.setdefault(tp.partition, []).extend((r.offset, r.value) for r in recs)
            n += len(recs)
    return got


def _sessions(broker) -> list:
    return list(broker.broker.services.fetch_sessions.sessions.values())


def _settle(broker, consumer, partitions: set[int]) -> None:
    """Polls (nothing may arrive) until the broker holds one session and it holds `partitions`."""
    deadline = time.monotonic() + TIMEOUT
    while [{key[1] for key in s.partitions} for s in _sessions(broker)] != [partitions]:
        assert time.monotonic() < deadline, f"the session never held exactly {sorted(partitions)}"
        assert not consumer.poll(timeout_ms=100)  # nothing arrives meanwhile


def test_kafka_python_reads_through_incremental_fetch_sessions(broker):
    from kafka import TopicPartition

    create(broker, "fs", PARTS)
    consumer = kp_consumer(broker.bootstrap, fetch_max_wait_ms=100)
    everything = [TopicPartition("fs", p) for p in range(PARTS)]
    offsets = dict.fromkeys(range(PARTS), 0)

    def wave(partitions: list[int], per_partition: int, tag: str, expect: list[int] | None = None) -> None:
        _produce(broker.bootstrap, "fs", partitions, per_partition, tag)
        readers = partitions if expect is None else expect
        got = _poll_until(consumer, per_partition * len(readers))
        assert sorted(got) == sorted(readers)
        for p, recs in got.items():
            # every record once, in order, from where the partition was left
            assert [o for o, _ in recs] == list(range(offsets[p], offsets[p] + per_partition))
            assert [v for _, v in recs] == [f"{tag}-{p}-{i}".encode() for i in range(per_partition)]
            offsets[p] += per_partition

    try:
        consumer.assign(everything)
        consumer.seek_to_beginning()
        wave(list(range(PARTS)), 20, "all")
        # caught up: the client's fetches go on incrementally in one session
        wave([3, 17, 29], 50, "few")
        # (a fetch sent while records of 3, 17 or 29 wait unpolled in the client leaves them out,
        # which forgets them until the next fetch adds them back: CI saw 27 of 30 once)
        _settle(broker, consumer, set(range(PARTS)))
        [session] = _sessions(broker)
        assert session.epoch > 1
        # a partition leaves the assignment: the client forgets it in the session
        consumer.assign([tp for tp in everything if tp.partition != 5])
        wave([5, 6], 10, "unassigned", expect=[6])
        # (the answer with partition 6 may come from a fetch sent before the assignment changed:
        # the next one forgets partition 5; and a fetch sent while a partition's records wait
        # unpolled in the client leaves that partition out, which forgets it too until the next
        # fetch adds it back, as the Java client does)
        _settle(broker, consumer, set(range(PARTS)) - {5})
        consumer.assign(everything)
        consumer.seek(TopicPartition("fs", 5), offsets[5])
        got = _poll_until(consumer, 10)
        assert list(got) == [5] and [o for o, _ in got[5]] == list(range(offsets[5], offsets[5] + 10))
        offsets[5] += 10
        wave([0, 5], 5, "back")
    finally:
        consumer.close()
