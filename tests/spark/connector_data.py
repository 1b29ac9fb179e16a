"""Topics written by real clients into any Kafka-compatible broker (this one or real Kafka), and
what a real consumer reads back: the reference the Spark connector's rows are compared with.

- ``kc`` (3 partitions): kafka-python with explicit CreateTime timestamps ``ts(partition, offset)``
  (so reads by timestamp have known answers), keys, values, zero to two headers (an empty header
  value among them), a null key and a null value;
- ``kc-codecs`` (1 partition): confluent-kafka batches in gzip, snappy, lz4 and zstd, with headers;
- ``kc-append`` (1 partition, LogAppendTime): the broker's clock replaces the producer's timestamps.
"""

from __future__ import annotations

import time

from kafka import KafkaAdminClient, KafkaProducer
from kafka.admin import NewTopic

KC, CODECS_TOPIC, APPEND = "kc", "kc-codecs", "kc-append"
PER_PARTITION = 20
BASE_TS = 1_700_000_000_000
CODECS = ("gzip", "snappy", "lz4", "zstd")

#: (topic, partition, offset, key, value, headers as ((key, value), ...), timestamp ms, timestamp type)
Row = tuple[str, int, int, bytes | None, bytes | None, tuple[tuple[str, bytes], ...], int, int]


def ts(partition: int, offset: int) -> int:
    """The CreateTime the producer gave record ``offset`` of ``kc-partition``: increasing, unique."""
    return BASE_TS + offset * 1000 + partition


def create_topics(bootstrap: str, *names_partitions: tuple[str, int], configs: dict | None = None) -> None:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.create_topics(
            [NewTopic(n, p, 1, topic_configs=(configs or {}).get(n, {})) for n, p in names_partitions]
        )
    finally:
        admin.close()


def produce_kc(bootstrap: str, start: int = 0, count: int = PER_PARTITION, topic: str = KC) -> None:
    """``count`` records per partition of ``topic`` (3 partitions), offsets ``start`` onwards."""
    p = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=5, batch_size=1024)
    for part in range(3):
        for n in range(start, start + count):
            key = None if n == 3 else f"k{part}-{n}".encode()
            value = None if n == 4 else f"v{part}-{n}-{'x' * (n % 7)}".encode()
            headers = [("h", str(n).encode()), ("empty", b"")][: n % 3]
            p.send(topic, key=key, value=value, partition=part, headers=headers, timestamp_ms=ts(part, n))
    p.flush()
    p.close()


def produce_codecs(bootstrap: str, topic: str = CODECS_TOPIC) -> None:
    from confluent_kafka import Producer

    for codec in CODECS:
        p = Producer({"bootstrap.servers": bootstrap, "compression.type": codec, "linger.ms": 20})
        for i in range(10):
            p.produce(topic, key=f"{codec}-{i}".encode(), value=(f"{codec} {i} " * 10).encode(),
                      partition=0, headers=[("codec", codec.encode())])  # fmt: skip
        assert p.flush(30) == 0
    del p


def produce_append(bootstrap: str, topic: str = APPEND) -> None:
    p = KafkaProducer(bootstrap_servers=bootstrap)
    for i in range(5):
        p.send(topic, value=f"a{i}".encode(), timestamp_ms=1_000 + i)  # replaced by the broker's time
    p.flush()
    p.close()


def topics(prefix: str = "") -> dict[str, int]:
    """The topics :func:`populate` writes ({name: partitions}), their names prefixed."""
    return {prefix + KC: 3, prefix + CODECS_TOPIC: 1, prefix + APPEND: 1}


def populate(bootstrap: str, prefix: str = "") -> None:
    create_topics(bootstrap, (prefix + KC, 3), (prefix + CODECS_TOPIC, 1), (prefix + APPEND, 1),
                  configs={prefix + APPEND: {"message.timestamp.type": "LogAppendTime"}})  # fmt: skip
    produce_kc(bootstrap, topic=prefix + KC)
    produce_codecs(bootstrap, prefix + CODECS_TOPIC)
    produce_append(bootstrap, prefix + APPEND)


def consume(bootstrap: str, topics: dict[str, int]) -> list[Row]:
    """Every record of ``topics`` ({name: partitions}) as confluent-kafka reads it, sorted."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False,
                  "enable.partition.eof": True})  # fmt: skip
    tps = [TopicPartition(t, p, OFFSET_BEGINNING) for t, n in topics.items() for p in range(n)]
    c.assign(tps)
    rows: list[Row] = []
    at_end: set[tuple[str, int]] = set()
    deadline = time.monotonic() + 60  # hang guard
    while len(at_end) < len(tps):
        assert time.monotonic() < deadline, f"hang guard: at the end of {sorted(at_end)} only"
        m = c.poll(0.5)
        if m is None:
            continue
        if m.error():
            assert m.error().code() == KafkaError._PARTITION_EOF, m.error()
            at_end.add((m.topic(), m.partition()))
            continue
        ts_type, ts_ms = m.timestamp()
        headers = tuple(m.headers() or [])
        rows.append((m.topic(), m.partition(), m.offset(), m.key(), m.value(), headers, ts_ms, ts_type - 1))
    c.close()
    return sorted(rows, key=lambda r: (r[0], r[1], r[2]))


def spark_rows(df) -> list[Row]:
    """The rows of a ``format("kafka")`` DataFrame (with ``includeHeaders``) in the same shape."""
    from pyspark.sql import functions as F

    got = df.select("topic", "partition", "offset", "key", "value", "headers",
                    F.expr("unix_millis(timestamp)").alias("ms"), "timestampType").collect()  # fmt: skip
    rows = [
        (r.topic, r.partition, r.offset, _b(r.key), _b(r.value),
         tuple((h.key, _b(h.value)) for h in (r.headers or [])), r.ms, r.timestampType)
        for r in got
    ]  # fmt: skip
    return sorted(rows, key=lambda r: (r[0], r[1], r[2]))


def _b(v: bytes | bytearray | None) -> bytes | None:
    return None if v is None else bytes(v)


def offsets_of(ranges: dict[int, tuple[int, int]]) -> list[tuple[int, int]]:
    """(partition, offset) for each half-open offset range {partition: (from, to)}."""
    return [(p, o) for p, (lo, hi) in sorted(ranges.items()) for o in range(lo, hi)]
