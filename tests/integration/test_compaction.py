"""Compacted user topics with real clients: confluent-kafka writes 200,000 updates over 1,000 keys and
100 tombstones to a ``cleanup.policy=compact`` topic; once the cleaner has compacted it, kafka-python
and the Java consumer reading from the beginning see exactly the latest value of each live key (offset
gaps, batches left empty), and the tombstones are gone after ``delete.retention.ms``. Records without
a key are refused with INVALID_RECORD, as Kafka refuses them in a compacted topic.

Small segments (segment.bytes, segment.ms) and a short log.cleaner.backoff.ms; max.compaction.lag.ms
makes the cleaner take the small dirty tails too. The test waits for conditions (a hang guard only).
"""

from __future__ import annotations

import os
import time

import pytest

from broker.log import cleaner
from tests.support.java import json_lines, require_java

UPDATES = 200_000
KEYS = 1_000
TOMBSTONES = 100
TOPIC = "table"
HANG_GUARD = 240.0
CONFIGS = {
    "cleanup.policy": "compact",
    "segment.bytes": "262144",
    "segment.ms": "1000",
    "max.compaction.lag.ms": "1000",
    "delete.retention.ms": "2000",
}


def key(i: int) -> bytes:
    return f"key-{i:04d}".encode()


def wait_for(condition, what: str) -> None:
    deadline = time.monotonic() + HANG_GUARD
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


def stored(plog, below: int) -> list[tuple[int, bytes | None, bool]]:
    """(offset, key, tombstone?) of every record in the segments below offset ``below``, read through
    the segments' open descriptors (a cleaner swap may be unlinking their files meanwhile); on the
    event loop."""
    out = []
    for seg, info in plog._iter_batches(plog.log_start_offset):
        if seg.base_offset >= below:
            break
        buf = os.pread(seg.fd, info.size, info.position)
        out += [(o, k, t) for o, _ts, k, t, _r in cleaner._records(buf, 0, False)]
    return out


def log_state(b) -> tuple[int, int, int, bool]:
    """(first offset not cleaned, active segment base, high watermark, any tombstone left below it)."""

    def read():
        plog = b.broker.logs.get(TOPIC, 0)
        tombstones = any(t for _o, _k, t in stored(plog, plog.active.base_offset))
        return cleaner.read_checkpoint(plog.dir), plog.active.base_offset, plog.high_watermark, tombstones

    return b.call(read)


def roll(producer, latest: dict[bytes, bytes], n: int) -> None:
    """Write a new key once segment.ms has passed: the append rolls the active segment (Kafka checks
    segment.ms on append), so everything before it becomes cleanable."""
    time.sleep(1.1)
    latest[f"roll-{n}".encode()] = b"x"
    producer.produce(TOPIC, key=f"roll-{n}".encode(), value=b"x", partition=0)
    assert producer.flush(30) == 0


def kafka_python_read(bootstrap: str) -> list[tuple[int, bytes, bytes | None]]:
    from kafka import KafkaConsumer, TopicPartition

    tp = TopicPartition(TOPIC, 0)
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, group_id=None)
    try:
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        end = consumer.end_offsets([tp])[tp]
        out = []
        deadline = time.monotonic() + HANG_GUARD
        while consumer.position(tp) < end and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500).values():
                out.extend((r.offset, r.key, r.value) for r in records)
        assert consumer.position(tp) == end
        return out
    finally:
        consumer.close()


def test_confluent_written_compacted_topic_read_by_kafka_python_and_java(broker_factory):
    from confluent_kafka import KafkaError, Producer

    b = broker_factory({"log.cleaner.backoff.ms": "50", "log.flush": "never"})
    b.call(b.broker.create_topic, TOPIC, 1, CONFIGS)
    # an idempotent producer's only batch, superseded by the updates below: the cleaner keeps it as an
    # empty batch (its producer's last sequence), which every reader below must read past
    early = Producer({"bootstrap.servers": b.bootstrap, "enable.idempotence": True})
    for i in range(10):
        early.produce(TOPIC, key=key(i), value=b"early", partition=0)
    assert early.flush(30) == 0
    producer = Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 20, "acks": "all"})
    latest: dict[bytes, bytes | None] = {}
    for i in range(UPDATES):
        k = key(i % KEYS)
        latest[k] = f"{k.decode()}={i}".encode()
        while True:
            try:
                producer.produce(TOPIC, key=k, value=latest[k], partition=0)
                break
            except BufferError:
                producer.poll(0.05)
    assert producer.flush(60) == 0
    for i in range(TOMBSTONES):
        latest[key(i * 7)] = None
        producer.produce(TOPIC, key=key(i * 7), value=None, partition=0)
    assert producer.flush(60) == 0

    # a record without a key: INVALID_RECORD, as Kafka answers for a compacted topic
    errors = []
    producer.produce(TOPIC, value=b"no key", partition=0, on_delivery=lambda err, _m: errors.append(err))
    producer.flush(30)
    assert [e.code() for e in errors] == [KafkaError.INVALID_RECORD]

    roll(producer, latest, 0)
    live = {k: v for k, v in latest.items() if v is not None}
    assert len(live) == KEYS - TOMBSTONES + 1

    # the cleaner has compacted everything below the active segment
    wait_for(lambda: (s := log_state(b))[0] == s[1], "the cleaner to reach the active segment")
    empty = b.call(
        lambda: [
            (i.base_offset, i.last_offset, i.producer_id)
            for i in b.broker.logs.get(TOPIC, 0).iter_headers(0)
            if i.records_count == 0
        ]
    )
    assert any(last == 9 and pid >= 0 for _base, last, pid in empty), empty  # early's last batch
    records = kafka_python_read(b.bootstrap)
    values = {k: v for _o, k, v in records}
    assert len(values) == len(records), "a key appears more than once after compaction"
    assert {k: v for k, v in values.items() if v is not None} == live
    assert {k for k, v in values.items() if v is None} <= {k for k, v in latest.items() if v is None}
    offsets = [o for o, _k, _v in records]
    assert offsets == sorted(offsets) and offsets[-1] == 10 + UPDATES + TOMBSTONES  # gaps, same offsets

    # past delete.retention.ms a later pass drops the tombstones (each roll makes a new dirty tail
    # that max.compaction.lag.ms makes due)
    n = 1
    while log_state(b)[3]:
        roll(producer, latest, n)
        n += 1
        assert n < HANG_GUARD, "tombstones were never removed"
    live = {k: v for k, v in latest.items() if v is not None}
    wait_for(lambda: (s := log_state(b))[0] == s[1], "the cleaner to reach the active segment")
    records = kafka_python_read(b.bootstrap)
    assert len(records) == len(live) and dict((k, v) for _o, k, v in records) == live

    java = require_java()
    result = java.run("ProduceConsumeProbe", [b.bootstrap, f"drain {TOPIC}"], timeout=120)
    (line,) = json_lines(result.stdout)
    assert result.returncode == 0 and "error" not in line, f"{line}\n{result.stderr[-3000:]}"
    java_records = [(o, k.encode(), v.encode()) for _p, o, _ts, k, v in line["records"]]
    assert java_records == records
    assert line["positions"]["0"] == b.call(lambda: b.broker.logs.get(TOPIC, 0).high_watermark)
    producer.flush(10)


pytestmark = pytest.mark.java


def test_cleanup_policy_changes_start_and_stop_compaction(broker_factory, tmp_path):
    """A topic switched to compact by IncrementalAlterConfigs (confluent-kafka's AdminClient) is
    compacted; switched back to delete, it is not, and takes keyless records again; a compacted topic
    found at start-up is compacted; a deleted one is forgotten."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import (
        AdminClient,
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        ResourceType,
    )

    data = tmp_path / "policy"
    b = broker_factory({"log.cleaner.backoff.ms": "20", "log.flush": "never"}, data)
    b.call(b.broker.create_topic, "t", 1, {"segment.bytes": "2000"})
    cleaner_of = b.broker.logs.cleaner

    def registered() -> bool:
        return b.call(lambda: any(p is b.broker.logs.get("t", 0) for p in cleaner_of.partitions))

    def alter(policy: str) -> None:
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        entry = ConfigEntry("cleanup.policy", policy, incremental_operation=AlterConfigOpType.SET)
        futures = admin.incremental_alter_configs(
            [ConfigResource(ResourceType.TOPIC, "t", incremental_configs=[entry])]
        )
        for f in futures.values():
            f.result(30)

    def produce(keyed: bool, n: int) -> list:
        p = Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 5})
        errors = []
        for i in range(n):
            p.produce(
                "t",
                key=f"k{i % 5}".encode() if keyed else None,
                value=str(i).encode(),
                partition=0,
                on_delivery=lambda err, _m: errors.append(err),
            )
        assert p.flush(30) == 0
        return [e for e in errors if e is not None]

    assert not registered()
    assert produce(keyed=False, n=10) == []
    alter("compact")
    assert registered()
    assert produce(keyed=True, n=500) == []
    wait_for(lambda: b.call(lambda: cleaner.read_checkpoint(b.broker.logs.get("t", 0).dir)) > 0, "a pass")
    # what was cleaned holds each key at most once (the keyless records written before are gone)
    plog = b.call(lambda: b.broker.logs.get("t", 0))
    end = cleaner.read_checkpoint(plog.dir)
    keys = b.call(lambda: [k for _o, k, _t in stored(plog, end)])
    assert None not in keys and len(keys) == len(set(keys)) and len(keys) <= 5
    assert [e.code() for e in produce(keyed=False, n=1)] == [87]  # INVALID_RECORD
    alter("delete")
    assert not registered() and produce(keyed=False, n=3) == []
    alter("compact,delete")
    assert registered()
    b.stop()
    b = broker_factory({"log.cleaner.backoff.ms": "20"}, data)
    cleaner_of = b.broker.logs.cleaner
    assert registered()
    b.call(b.broker.delete_topic, "t")
    assert b.call(lambda: len(cleaner_of.partitions)) == 0
