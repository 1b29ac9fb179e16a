"""Builds the data directory the Spark tests read: written by the real broker, produced and consumed
by real clients, with a known history to check the jobs against.

- ``events`` (3 partitions, segment.bytes=2048 so there are many segments): kafka-python, keys,
  values, headers, a null key and a null value;
- ``compressed`` (1 partition): confluent-kafka with gzip, snappy, lz4 and zstd batches;
- ``appended`` (1 partition, LogAppendTime): the broker's timestamps replace the producer's;
- group ``lagger``: explicit commits between known produce bursts (the lag history is known), and a
  planted backwards commit on ``events-0``;
- group ``rebalancer``: kafka-python members joining and leaving (three planted rebalances), a
  commit by the member owning the partition, and one (``events-2`` at 7) by a client outside the
  group once it is empty;
- group ``kip848``: a confluent-kafka member with ``group.protocol=consumer`` takes all of ``events``
  and commits ``events-1`` at 42.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic
from kafka.structs import OffsetAndMetadata

from broker.testing import running_broker

CONFIG = {
    "group.initial.rebalance.delay.ms": 0,
    "log.segment.bytes": 2048,
    "group.consumer.heartbeat.interval.ms": 200,
}
EVENTS, COMPRESSED, APPENDED = "events", "compressed", "appended"
LAGGER, REBALANCER, KIP848 = "lagger", "rebalancer", "kip848"
CODECS = ("gzip", "snappy", "lz4", "zstd")


@dataclass
class History:
    data_dir: Path
    produced: dict[tuple[str, int], int] = field(default_factory=dict)  # log end offsets
    #: (partition of events, committed offset, log end offset of that partition at commit time)
    commits: list[tuple[int, int, int]] = field(default_factory=list)
    backwards: tuple[int, int, int] | None = None  # (partition, from, to)
    generations: int = 0  # rebalances planted in REBALANCER


def _produce_events(bootstrap: str, hist: History, per_partition: int, burst: int) -> None:
    p = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=0, batch_size=512)
    for part in range(3):
        for _ in range(burst):
            n = hist.produced.get((EVENTS, part), 0)
            key = None if n == 5 else f"k{part}-{n}".encode()
            value = None if n == 7 else (f"v{part}-{n}-" + "x" * (n % 40)).encode()
            headers = [("h", f"{n}".encode()), ("empty", b"")] if n % 3 == 0 else []
            p.send(EVENTS, key=key, value=value, partition=part, headers=headers)
            hist.produced[(EVENTS, part)] = n + 1
    p.flush()
    p.close()
    del per_partition


def _produce_compressed(bootstrap: str, hist: History) -> None:
    from confluent_kafka import Producer

    n = 0
    for codec in CODECS:
        p = Producer({"bootstrap.servers": bootstrap, "compression.type": codec, "linger.ms": 50})
        for i in range(40):
            p.produce(
                COMPRESSED,
                key=f"{codec}-{i}".encode(),
                value=(f"{codec} payload {i} " * 8).encode(),
                partition=0,
            )
            n += 1
        p.flush(10)
    hist.produced[(COMPRESSED, 0)] = n


def _commit(bootstrap: str, group: str, offsets: dict[int, int]) -> None:
    c = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False)
    c.commit({TopicPartition(EVENTS, p): OffsetAndMetadata(o, "", -1) for p, o in offsets.items()})
    c.close()


def _poll_until(consumers: list[KafkaConsumer], done, what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout  # a hang guard, not a timing assertion
    while not done():
        if time.monotonic() > deadline:
            state = [
                (c.config["client_id"], sorted(tp.partition for tp in c.assignment())) for c in consumers
            ]
            raise TimeoutError(f"the group did not settle: {what} ({state})")
        for c in consumers:
            c.poll(timeout_ms=50)


def _rebalances(bootstrap: str) -> int:
    def member() -> KafkaConsumer:
        c = KafkaConsumer(
            bootstrap_servers=bootstrap,
            group_id=REBALANCER,
            enable_auto_commit=False,
            heartbeat_interval_ms=100,
            session_timeout_ms=6000,
            max_poll_interval_ms=10000,
            metadata_max_age_ms=1000,
        )
        # with the topic's metadata known before joining, the leader's first assignment is complete
        assert c.partitions_for_topic(EVENTS) == {0, 1, 2}
        c.subscribe([EVENTS])
        return c

    a = member()
    _poll_until([a], lambda: len(a.assignment()) == 3, "a alone")  # generation 1: a owns all
    b = member()
    box = {"stop": False}

    def keep_polling() -> None:
        while not box["stop"]:
            a.poll(timeout_ms=50)

    t = threading.Thread(target=keep_polling)
    t.start()
    try:
        _poll_until(
            [b], lambda: len(b.assignment()) > 0 and len(a.assignment()) + len(b.assignment()) == 3, "b joins"
        )
    finally:
        box["stop"] = True
        t.join()
    b.close()  # LeaveGroup: generation 3, a owns all again
    _poll_until([a], lambda: len(a.assignment()) == 3, "b left")
    a.commit({TopicPartition(EVENTS, 0): OffsetAndMetadata(1, "", -1)})
    a.close()
    # a client outside the (now empty) group commits: no member of the generation owns events-2
    _commit(bootstrap, REBALANCER, {2: 7})
    return 3


def _kip848(bootstrap: str) -> None:
    from confluent_kafka import Consumer
    from confluent_kafka import TopicPartition as CTP

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": KIP848, "group.protocol": "consumer",
                  "enable.auto.commit": False})  # fmt: skip
    c.subscribe([EVENTS])
    deadline = time.monotonic() + 60  # hang guard
    while len(c.assignment()) < 3:
        if time.monotonic() > deadline:
            raise TimeoutError(f"the KIP-848 member got {c.assignment()}")
        c.poll(0.1)
    c.commit(offsets=[CTP(EVENTS, 1, 42)], asynchronous=False)
    c.close()


def build(data_dir: Path) -> History:
    hist = History(data_dir)
    with running_broker(data_dir, CONFIG) as b:
        admin = KafkaAdminClient(bootstrap_servers=b.bootstrap)
        appended = NewTopic(APPENDED, 1, 1, topic_configs={"message.timestamp.type": "LogAppendTime"})
        admin.create_topics([NewTopic(EVENTS, 3, 1), NewTopic(COMPRESSED, 1, 1), appended])
        admin.close()
        for step in range(4):
            _produce_events(b.bootstrap, hist, 0, 25)
            commit = {p: hist.produced[(EVENTS, p)] - 5 * (p + 1) - step for p in range(3)}
            _commit(b.bootstrap, LAGGER, commit)
            time.sleep(0.01)  # the next burst's create times come after the commit's time
            hist.commits += [(p, o, hist.produced[(EVENTS, p)]) for p, o in commit.items()]
        # the planted backwards commit on partition 0
        last = hist.commits[-3][1]
        _commit(b.bootstrap, LAGGER, {0: last - 30})
        hist.commits.append((0, last - 30, hist.produced[(EVENTS, 0)]))
        hist.backwards = (0, last, last - 30)
        _produce_compressed(b.bootstrap, hist)
        p = KafkaProducer(bootstrap_servers=b.bootstrap)
        for i in range(20):
            p.send(APPENDED, value=f"a{i}".encode(), timestamp_ms=1_000 + i)  # replaced by the broker's time
        p.flush()
        p.close()
        hist.produced[(APPENDED, 0)] = 20
        hist.generations = _rebalances(b.bootstrap)
        _kip848(b.bootstrap)
    return hist
