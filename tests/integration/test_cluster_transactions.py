"""Transactions on the simulated multi-node cluster (``cluster.nodes``) with real clients over TCP:
3 nodes, a topic of 6 partitions with replication factor 3. A transactional producer commits and
aborts while its transaction coordinator moves once (mid-transaction) and the partition leaders
are shuffled; a read_committed reader then sees every committed record exactly once and no aborted
one. confluent-kafka (librdkafka) and the Java client (tests/java/TxnProbe.java)."""

from __future__ import annotations

import threading
import time
from collections import Counter

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

from tests.support.java import json_lines, require_java

BROKER_CONFIG = {"cluster.nodes": 3, "group.initial.rebalance.delay.ms": 0}
PARTITIONS = 6
#: loop guards (not assertions on time): a scenario that has not converged by then has failed
GIVE_UP_S = 120
#: generous client timeouts: the machine is shared
CLIENT_TIMEOUT_S = 60


@pytest.fixture
def cluster(broker_factory):
    bt = broker_factory(BROKER_CONFIG)
    bt.call(bt.broker.create_topic, "txev", PARTITIONS, None, False, False, 3)
    return bt


def bootstrap(bt) -> str:
    return ",".join(f"{h}:{p}" for h, p in bt.broker.addresses())


def read_committed(bt, topic: str, expected: int) -> list[str]:
    """The records a read_committed consumer gets from the start: once it has ``expected``, until
    a poll brings nothing more (a duplicate would come with them). librdkafka's position does not
    move past an aborted transaction at a partition's end, so the count is what ends the read."""
    c = Consumer({"bootstrap.servers": bootstrap(bt), "group.id": "reader", "isolation.level": "read_committed",
                  "enable.auto.commit": False, "auto.offset.reset": "earliest"})  # fmt: skip
    try:
        c.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
        values: list[str] = []
        deadline = time.monotonic() + GIVE_UP_S
        while time.monotonic() < deadline:
            got = [m.value().decode() for m in c.consume(500, timeout=1.0) if m.error() is None]
            values += got
            if len(values) >= expected and not got:
                break
        return values
    finally:
        c.close()


def _commit(p: Producer) -> bool:
    """Commit the open transaction: True; False when it had to be aborted. Retriable errors (the
    coordinator moved: librdkafka looks it up again) are retried, as librdkafka's docs say."""
    for _ in range(50):
        try:
            p.commit_transaction(CLIENT_TIMEOUT_S)
            return True
        except KafkaException as e:
            err = e.args[0]
            if err.retriable():
                continue
            if err.txn_requires_abort():
                p.abort_transaction(CLIENT_TIMEOUT_S)
                return False
            raise
    raise AssertionError("commit_transaction kept failing")


def test_confluent_kafka_transactions_through_a_coordinator_move_and_leader_shuffles(cluster):
    tid = "cfk-tx"
    nodes = cluster.broker.nodes
    p = Producer({"bootstrap.servers": bootstrap(cluster), "transactional.id": tid,
                  "transaction.timeout.ms": 60000})  # fmt: skip
    p.init_transactions(CLIENT_TIMEOUT_S)
    first = cluster.call(nodes.txn_coordinator, tid)
    committed: list[str] = []
    aborted: list[str] = []
    for k in range(24):
        p.begin_transaction()
        values = [f"t{k}-{i}" for i in range(5)]
        for i, v in enumerate(values):
            p.produce("txev", value=v, partition=(k + i) % PARTITIONS)
        if k % 4 == 1:  # leaders move under the open transaction
            cluster.call(nodes.shuffle)
        p.flush(CLIENT_TIMEOUT_S)
        if k == 10:  # the coordinator moves with the transaction open, before its end
            cluster.call(nodes.move_txn_coordinator, tid, "next")
        if k % 3 == 2:
            p.abort_transaction(CLIENT_TIMEOUT_S)
            aborted += values
        elif _commit(p):
            committed += values
        else:
            aborted += values
    assert cluster.call(nodes.txn_coordinator, tid) != first
    values = read_committed(cluster, "txev", len(committed))
    counts = Counter(values)
    assert not [v for v, n in counts.items() if n > 1], "a committed record was read twice"
    assert not set(values) & set(aborted), "an aborted record was read"
    assert sorted(values) == sorted(committed)
    assert len(committed) >= 5 * 14  # at most the move's transaction was aborted besides every third


@pytest.mark.java
@pytest.mark.usefixtures("java_clients")
def test_java_transactions_through_a_coordinator_move_and_leader_shuffles(cluster):
    tid = "j-tx"
    nodes = cluster.broker.nodes
    result: dict = {}

    def run() -> None:
        result["run"] = require_java().run(
            "TxnProbe", [bootstrap(cluster), f"txn txev {tid} 60 3"], timeout=300
        )

    producer = threading.Thread(target=run, daemon=True)
    producer.start()
    deadline = time.monotonic() + GIVE_UP_S
    # once the producer is in its transactions: the coordinator moves once, leaders shuffle on
    while time.monotonic() < deadline and producer.is_alive():
        meta = cluster.call(lambda: cluster.broker.txns.state.txns.get(tid))
        if meta is not None and meta.partitions:
            break
        time.sleep(0.02)
    first = cluster.call(nodes.txn_coordinator, tid)
    cluster.call(nodes.move_txn_coordinator, tid, "next")
    while producer.is_alive() and time.monotonic() < deadline:
        cluster.call(nodes.shuffle)
        time.sleep(0.2)
    producer.join(GIVE_UP_S)
    out = result["run"]
    (txn,) = json_lines(out.stdout)
    assert out.returncode == 0 and "error" not in txn, f"{txn}\n{out.stderr[-4000:]}"
    assert cluster.call(nodes.txn_coordinator, tid) != first
    values = read_committed(cluster, "txev", len(txn["committed"]))
    assert not [v for v, n in Counter(values).items() if n > 1], "a committed record was read twice"
    assert not set(values) & set(txn["aborted"]), "an aborted record was read"
    assert sorted(values) == sorted(txn["committed"])
    assert len(txn["committed"]) == 5 * 40 and len(txn["aborted"]) == 5 * 20
