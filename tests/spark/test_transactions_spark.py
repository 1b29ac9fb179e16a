"""The ``records`` view's ``kafka.isolation.level`` over transactions a confluent-kafka transactional
producer committed, aborted and left open, beside plain records: read_uncommitted has every data
record, read_committed stops at the last stable offset and leaves aborted transactions out, and
transaction markers are records in neither -- each compared with a confluent-kafka consumer of the
same isolation level reading the running broker."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from broker.testing import running_broker
from tests.support.spark import available_now

TOPIC = "txn"
PARTITIONS = 2


def _consume(bootstrap: str, isolation: str, want: int) -> list[tuple[int, int, bytes]]:
    """(partition, offset, value) of every record a consumer of ``isolation`` reads, polled until it
    has ``want`` records and then until the partitions have nothing more to give."""
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"spark-txn-{isolation}",
            "isolation.level": isolation,
            "enable.auto.commit": False,
            "enable.partition.eof": True,
        }
    )
    c.assign([TopicPartition(TOPIC, p, 0) for p in range(PARTITIONS)])
    rows, at_eof = [], set()
    deadline = time.monotonic() + 60  # a bound on a broken broker, not a timing assertion
    while time.monotonic() < deadline and (len(rows) < want or len(at_eof) < PARTITIONS):
        m = c.poll(0.5)
        if m is None:
            continue
        if m.error():
            assert m.error().code() == -191, m.error()  # _PARTITION_EOF
            at_eof.add(m.partition())
            continue
        at_eof.discard(m.partition())
        rows.append((m.partition(), m.offset(), m.value()))
    c.close()
    return sorted(rows)


def _spark(spark, data_dir: str, isolation: str | None) -> list[tuple[int, int, bytes]]:
    reader = spark.read.format("pykbroker").option("path", data_dir).option("subscribe", TOPIC)
    if isolation is not None:
        reader = reader.option("kafka.isolation.level", isolation)
    return sorted((r.partition, r.offset, bytes(r.value)) for r in reader.load().collect())


def test_isolation_levels_as_a_consumer(spark, tmp_path):
    data = tmp_path / "data"
    values: dict[str, list[bytes]] = {"committed": [], "aborted": [], "open": [], "plain": [], "late": []}
    with running_broker(data, {"log.segment.bytes": 1024}) as b:  # small segments: several splits
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])[TOPIC].result(30)
        txn = Producer({"bootstrap.servers": b.bootstrap, "transactional.id": "spark-txn", "linger.ms": 5})
        plain = Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 0})
        txn.init_transactions(60)

        def write(p: Producer, kind: str, n: int) -> None:
            for i in range(n):
                v = f"{kind}-{len(values[kind])}-{i}".encode()
                values[kind].append(v)
                p.produce(TOPIC, v, partition=i % PARTITIONS)
            p.flush(60)

        for kind, n, commit in (("committed", 12, True), ("aborted", 9, False), ("committed", 7, True)):
            txn.begin_transaction()
            write(txn, kind, n)
            write(plain, "plain", 3)
            (txn.commit_transaction if commit else txn.abort_transaction)(60)
        txn.begin_transaction()  # left open: holds the last stable offset back
        write(txn, "open", 4)
        write(plain, "late", 4)  # after the open transaction's first records: not yet stable

        n_all = sum(len(v) for v in values.values())
        n_committed = len(values["committed"]) + len(values["plain"])
        uncommitted = _consume(b.bootstrap, "read_uncommitted", n_all)
        committed = _consume(b.bootstrap, "read_committed", n_committed)
    del txn, plain, admin

    assert len(uncommitted) == n_all  # markers are no records
    assert sorted(v for *_k, v in committed) == sorted(values["committed"] + values["plain"])
    d = str(data)
    assert _spark(spark, d, None) == uncommitted  # read_uncommitted is the default, as Spark's source
    assert _spark(spark, d, "read_uncommitted") == uncommitted
    assert _spark(spark, d, "read_committed") == committed
    with pytest.raises(Exception, match="isolation"):
        _spark(spark, d, "serializable")
    # streaming: the same records, a few micro-batches (a limit per trigger) ending at the LSO
    stream = spark.readStream.format("pykbroker").option("path", d).option("subscribe", TOPIC)
    sink, ckpt = tmp_path / "sink", tmp_path / "ckpt"
    rows = available_now(stream, sink, ckpt, startingOffsets="earliest", maxRecordsPerTrigger="10",
                         **{"kafka.isolation.level": "read_committed"})  # fmt: skip
    assert sum(rows) == len(committed) and len([n for n in rows if n]) > 1
    out = spark.read.parquet(str(sink)).collect()
    assert sorted((r.partition, r.offset, bytes(r.value)) for r in out) == committed
