"""confluent-kafka helpers shared by the transaction tests: a transactional producer that survives a
broker restart while it initialises, retried commit/abort, and a reader of every record a given
isolation level shows."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition


def transactional_producer(bootstrap: str, transactional_id: str, timeout: float, **config: Any) -> Producer:
    """A producer with ``transactional_id``, its transactions initialised (retried while the error
    is retriable, e.g. while a restarted broker loads its coordinators)."""
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": transactional_id,
                  "transaction.timeout.ms": 30_000, "message.timeout.ms": 25_000,
                  "reconnect.backoff.max.ms": 200, **config})  # fmt: skip
    for _ in range(20):
        try:
            p.init_transactions(timeout)
            return p
        except KafkaException as e:
            if not e.args[0].retriable():
                raise
    raise AssertionError("init_transactions kept failing")


def retrying(end: Callable[[float], None], timeout: float) -> None:
    """``commit_transaction`` / ``abort_transaction``, again while the error is retriable."""
    while True:
        try:
            end(timeout)
            return
        except KafkaException as e:
            if not e.args[0].retriable():
                raise


def read_isolated(
    bootstrap: str, topic: str, partitions: int, isolation: str, timeout: float
) -> list[tuple[int, int, bytes | None, str]]:
    """(partition, offset, key, value) of every record of ``topic`` that ``isolation`` shows, read
    from the beginning until each of its ``partitions`` reports its end."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"reader-{isolation}", "isolation.level": isolation,
                  "enable.auto.commit": False, "enable.partition.eof": True})  # fmt: skip
    try:
        c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        out, at_end = [], set()
        while len(at_end) < partitions:
            m = c.poll(timeout)
            assert m is not None, "no message nor end of partition"
            if m.error() is not None:
                assert m.error().code() == KafkaError._PARTITION_EOF, m.error()
                at_end.add(m.partition())
                continue
            at_end.discard(m.partition())
            out.append((m.partition(), m.offset(), m.key(), m.value().decode()))
        return out
    finally:
        c.close()


def one_transaction(
    p: Producer, produce: Callable[[Producer], None], abort: bool, timeout: float
) -> str | None:
    """Begin, ``produce``, then commit (or ``abort``): "committed" or "aborted" once the broker said
    so. An error that requires an abort is answered by aborting ("aborted"). None when the producer
    cannot go on (fenced, or the broker gave up on it): the caller replaces it, and the new one's
    InitProducerId aborts whatever this one left open."""
    try:
        p.begin_transaction()
        produce(p)
        if abort:
            retrying(p.abort_transaction, timeout)
            return "aborted"
        retrying(p.commit_transaction, timeout)
        return "committed"
    except KafkaException as e:
        if e.args[0].txn_requires_abort():
            try:
                retrying(p.abort_transaction, timeout)
                return "aborted"
            except KafkaException:
                pass
        return None
