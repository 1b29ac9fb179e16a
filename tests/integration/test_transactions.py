"""Transactions with confluent-kafka (librdkafka) over TCP: a transactional producer commits and
aborts over several partitions; read_committed consumers see each committed record once and no
aborted one, read_uncommitted consumers see both; the last stable offset and the high watermark
as Kafka reports them; consume-transform-produce with send_offsets_to_transaction; a second
producer with the same transactional id fences the first."""

from __future__ import annotations

import pytest

confluent_kafka = pytest.importorskip("confluent_kafka")

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition  # noqa: E402

from tests.support.transactions import read_isolated  # noqa: E402

TIMEOUT = 60.0
PARTS = 3


def _producer(bt, tid: str, **extra) -> Producer:
    p = Producer({"bootstrap.servers": bt.bootstrap, "transactional.id": tid, **extra})
    p.init_transactions(TIMEOUT)
    return p


def _read_all(bt, topic: str, isolation: str, parts: int = PARTS) -> list[tuple[int, int, str]]:
    """Every record of ``topic`` as ``isolation`` sees it: (partition, offset, value)."""
    return [(p, o, v) for p, o, _k, v in read_isolated(bt.bootstrap, topic, parts, isolation, TIMEOUT)]


def _create(bt, topic: str, parts: int = PARTS) -> None:
    bt.call(bt.broker.create_topic, topic, parts)


def test_commit_and_abort(broker):
    _create(broker, "orders")
    p = _producer(broker, "ck-tx")
    p.begin_transaction()
    for i in range(30):
        p.produce("orders", value=f"c{i}".encode(), partition=i % PARTS)
    p.commit_transaction(TIMEOUT)
    p.begin_transaction()
    for i in range(12):
        p.produce("orders", value=f"a{i}".encode(), partition=i % PARTS)
    p.flush(TIMEOUT)
    p.abort_transaction(TIMEOUT)
    committed = _read_all(broker, "orders", "read_committed")
    assert sorted(v for *_, v in committed) == sorted(f"c{i}" for i in range(30))
    uncommitted = _read_all(broker, "orders", "read_uncommitted")
    assert sorted(v for *_, v in uncommitted) == sorted(
        [f"c{i}" for i in range(30)] + [f"a{i}" for i in range(12)]
    )
    # offsets: 10 committed records, a marker, 4 aborted ones, a marker per partition
    c = Consumer(
        {"bootstrap.servers": broker.bootstrap, "group.id": "wm", "isolation.level": "read_committed"}
    )
    try:
        for part in range(PARTS):
            assert c.get_watermark_offsets(TopicPartition("orders", part), TIMEOUT, cached=False) == (0, 16)
    finally:
        c.close()


def test_open_transaction_holds_the_last_stable_offset(broker):
    _create(broker, "lso", 1)
    p = _producer(broker, "ck-open")
    p.begin_transaction()
    p.produce("lso", value=b"pending", partition=0)
    p.flush(TIMEOUT)
    committed = Consumer(
        {"bootstrap.servers": broker.bootstrap, "group.id": "rc", "isolation.level": "read_committed"}
    )
    plain = Consumer(
        {"bootstrap.servers": broker.bootstrap, "group.id": "ru", "isolation.level": "read_uncommitted"}
    )
    try:
        tp = TopicPartition("lso", 0)
        assert committed.get_watermark_offsets(tp, TIMEOUT, cached=False) == (0, 0)  # the LSO
        assert plain.get_watermark_offsets(tp, TIMEOUT, cached=False) == (0, 1)  # the high watermark
        p.commit_transaction(TIMEOUT)
        assert committed.get_watermark_offsets(tp, TIMEOUT, cached=False) == (0, 2)
    finally:
        committed.close()
        plain.close()
    assert [v for *_, v in _read_all(broker, "lso", "read_committed", 1)] == ["pending"]


def test_consume_transform_produce_with_send_offsets(broker):
    _create(broker, "in")
    _create(broker, "out")
    seed = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(60):
        seed.produce("in", value=f"r{i}".encode(), partition=i % PARTS)
    seed.flush(TIMEOUT)
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "ctp", "enable.auto.commit": False,
                         "auto.offset.reset": "earliest", "isolation.level": "read_committed"})  # fmt: skip
    producer = _producer(broker, "ctp-tx")
    try:
        consumer.subscribe(["in"])
        seen, round_ = 0, 0
        while seen < 60:
            batch = [m for m in consumer.consume(20, TIMEOUT) if m.error() is None]
            if not batch:
                continue
            producer.begin_transaction()
            for m in batch:
                producer.produce("out", value=m.value().upper(), partition=m.partition())
            positions = consumer.position(consumer.assignment())
            producer.send_offsets_to_transaction(positions, consumer.consumer_group_metadata(), TIMEOUT)
            round_ += 1
            if round_ == 2:  # one transaction aborted: its input is read again from the committed offsets
                producer.abort_transaction(TIMEOUT)
                committed = consumer.committed(consumer.assignment(), TIMEOUT)
                for tp in committed:
                    consumer.seek(TopicPartition(tp.topic, tp.partition, tp.offset if tp.offset >= 0 else 0))
                continue
            producer.commit_transaction(TIMEOUT)
            seen += len(batch)
        committed = consumer.committed([TopicPartition("in", p) for p in range(PARTS)], TIMEOUT)
        assert sum(tp.offset for tp in committed) == 60
    finally:
        consumer.close()
    out = _read_all(broker, "out", "read_committed")
    assert sorted(v for *_, v in out) == sorted(f"R{i}" for i in range(60))  # each once


def test_a_second_producer_fences_the_first(broker):
    _create(broker, "fence", 1)
    first = _producer(broker, "shared-id")
    first.begin_transaction()
    first.produce("fence", value=b"zombie", partition=0)
    first.flush(TIMEOUT)
    second = _producer(broker, "shared-id")  # aborts the first one's open transaction
    second.begin_transaction()
    second.produce("fence", value=b"winner", partition=0)
    second.commit_transaction(TIMEOUT)
    with pytest.raises(KafkaException) as e:
        first.produce("fence", value=b"late", partition=0)
        first.flush(TIMEOUT)
        first.commit_transaction(TIMEOUT)
    assert e.value.args[0].code() == KafkaError._FENCED or e.value.args[0].fatal(), e.value
    assert [v for *_, v in _read_all(broker, "fence", "read_committed", 1)] == ["winner"]
    assert sorted(v for *_, v in _read_all(broker, "fence", "read_uncommitted", 1)) == ["winner", "zombie"]


def test_kafka_python_transactional_producer(broker):
    """kafka-python's transactional producer (2.1+) commits and aborts; its read_committed consumer
    sees only the committed records."""
    pytest.importorskip("kafka")
    from kafka import KafkaConsumer, KafkaProducer
    from kafka import TopicPartition as KTopicPartition

    _create(broker, "kp", 2)
    p = KafkaProducer(bootstrap_servers=broker.bootstrap, transactional_id="kp-tx")
    try:
        p.init_transactions()
        p.begin_transaction()
        for i in range(10):
            p.send("kp", value=f"c{i}".encode(), partition=i % 2)
        p.commit_transaction()
        p.begin_transaction()
        for i in range(4):
            p.send("kp", value=f"a{i}".encode(), partition=i % 2)
        p.flush()
        p.abort_transaction()
    finally:
        p.close()
    assert sorted(v for *_, v in _read_all(broker, "kp", "read_committed", 2)) == sorted(
        f"c{i}" for i in range(10)
    )
    c = KafkaConsumer(bootstrap_servers=broker.bootstrap, isolation_level="read_committed",
                      enable_auto_commit=False, consumer_timeout_ms=int(TIMEOUT * 1000))  # fmt: skip
    try:
        tps = [KTopicPartition("kp", i) for i in range(2)]
        c.assign(tps)
        c.seek_to_beginning()
        ends = c.end_offsets(tps)
        got = []
        for _ in range(int(TIMEOUT)):  # a hang guard: each poll waits up to 1 s
            if all(c.position(tp) >= ends[tp] for tp in tps):
                break
            for recs in c.poll(timeout_ms=1000).values():
                got += [r.value.decode() for r in recs]
        assert sorted(got) == sorted(f"c{i}" for i in range(10))
    finally:
        c.close()


def test_aiokafka_transactional_producer(broker):
    """aiokafka's transactional producer commits and aborts."""
    pytest.importorskip("aiokafka")
    import asyncio

    from aiokafka import AIOKafkaProducer

    _create(broker, "aio", 1)

    async def run() -> None:
        p = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, transactional_id="aio-tx")
        await p.start()
        try:
            async with p.transaction():
                await p.send_and_wait("aio", b"kept", partition=0)
            await p.begin_transaction()
            await p.send_and_wait("aio", b"dropped", partition=0)
            await p.abort_transaction()
        finally:
            await p.stop()

    asyncio.run(run())
    assert [v for *_, v in _read_all(broker, "aio", "read_committed", 1)] == ["kept"]
    assert sorted(v for *_, v in _read_all(broker, "aio", "read_uncommitted", 1)) == ["dropped", "kept"]


def test_a_transaction_open_past_its_timeout_is_aborted(broker_factory):
    """On the virtual clock: the coordinator aborts a transaction left open longer than its
    transaction.timeout.ms (fencing its producer); its records never reach read_committed."""
    import time

    bt = broker_factory({"clock": "manual"})
    _create(bt, "slow", 1)
    p = _producer(bt, "slow-tx", **{"transaction.timeout.ms": 60_000})
    p.begin_transaction()
    p.produce("slow", value=b"forgotten", partition=0)
    p.flush(TIMEOUT)
    fired = bt.call(bt.broker.clock.advance, 60_001)
    assert "txn-timeout:slow-tx" in [key for key, _deadline in fired]

    def state() -> str:
        return bt.call(lambda: bt.broker.txns.state.txns["slow-tx"].state.kafka_name)

    for _ in range(600):  # a hang guard: the markers are written on the broker's loop
        if state() == "CompleteAbort":
            break
        time.sleep(0.05)
    assert state() == "CompleteAbort"
    with pytest.raises(KafkaException):
        p.commit_transaction(TIMEOUT)
    assert _read_all(bt, "slow", "read_committed", 1) == []
    assert [v for *_, v in _read_all(bt, "slow", "read_uncommitted", 1)] == ["forgotten"]
