"""Acceptance of the simulated multi-node cluster (``cluster.nodes``, broker/nodes.py) with real
clients over TCP: 3 nodes, a topic of 6 partitions with replication factor 3.

- confluent-kafka and kafka-python each run an acks=all producer and a classic consumer group that
  commits while the leaders are shuffled every 500 ms and one node goes down and comes back: every
  acknowledged record is consumed, and no committed offset ever goes backwards;
- a coordinator move alone causes no rebalance: the classic generation is unchanged and the group
  goes on committing at its new coordinator;
- kcat -L and the admin clients list 3 brokers; a client bootstrapped with node 2's address alone
  works.
"""

from __future__ import annotations

import subprocess
import threading
import time
import uuid
from collections import Counter

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition

BROKER_CONFIG = {"cluster.nodes": 3, "group.initial.rebalance.delay.ms": 0}
PARTITIONS = 6
RECORDS = 1500
#: loop guards (not assertions on time): a scenario that has not converged by then has failed
GIVE_UP_S = 120


@pytest.fixture
def cluster(broker_factory):
    bt = broker_factory(BROKER_CONFIG)
    bt.call(bt.broker.create_topic, "events", PARTITIONS, None, False, False, 3)
    return bt


def bootstrap(bt, node: int | None = None) -> str:
    addresses = bt.broker.addresses()
    if node is not None:
        host, port = addresses[node - 1]
        return f"{host}:{port}"
    return ",".join(f"{h}:{p}" for h, p in addresses)


class Chaos:
    """Shuffles every leader every 500 ms, takes node 3 down after the first few shuffles and
    brings it back later, and watches the group's committed offsets (they must never go back)."""

    def __init__(self, bt, group: str):
        self.bt, self.group = bt, group
        self.stop = threading.Event()
        self.shuffles = 0
        self.backwards: list[str] = []
        self.last: dict[int, int] = {}
        self.thread = threading.Thread(target=self.run, daemon=True)

    def watch_offsets(self) -> None:
        try:
            offsets = self.bt.control.offsets(self.group)
        except KeyError:  # nothing committed yet (NotFound)
            return
        for p, committed in offsets.get("events", {}).items():
            p = int(p)
            if committed["offset"] < self.last.get(p, -1):
                self.backwards.append(f"partition {p}: {self.last[p]} -> {committed['offset']}")
            self.last[p] = committed["offset"]

    def run(self) -> None:
        control = self.bt.control
        while not self.stop.is_set():
            control.shuffle_leaders()
            self.shuffles += 1
            if self.shuffles == 4:
                control.node_down(3)
            if self.shuffles == 10:
                control.node_up(3)
            for _ in range(5):
                self.watch_offsets()
                if self.stop.wait(0.1):
                    break

    def __enter__(self) -> Chaos:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join()
        self.watch_offsets()


def test_confluent_kafka_through_shuffles_and_a_node_down_and_up(cluster):
    group = f"ck-{uuid.uuid4().hex[:6]}"
    acked: set[bytes] = set()
    seen: set[bytes] = set()
    errors: list[str] = []

    def delivered(err, msg):
        if err is None:
            acked.add(msg.value())
        else:
            errors.append(str(err))

    producer = Producer(
        {
            "bootstrap.servers": bootstrap(cluster),
            "acks": "all",
            "enable.idempotence": True,
            "linger.ms": 5,
            "topic.metadata.refresh.interval.ms": 1000,
        }
    )
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap(cluster),
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "topic.metadata.refresh.interval.ms": 1000,
        }
    )
    consumer.subscribe(["events"])
    give_up = time.monotonic() + GIVE_UP_S
    with Chaos(cluster, group) as chaos:
        for i in range(RECORDS):
            producer.produce("events", value=f"v{i}".encode(), on_delivery=delivered)
            producer.poll(0)
            if i % 50 == 0:
                time.sleep(0.1)  # spread the records over the shuffles
            msg = consumer.poll(0)
            if msg is not None and msg.error() is None:
                seen.add(msg.value())
                consumer.commit(message=msg, asynchronous=False)
        assert producer.flush(60) == 0
        while chaos.shuffles < 12 and time.monotonic() < give_up:  # past the node's return
            msg = consumer.poll(0.1)
            if msg is not None and msg.error() is None:
                seen.add(msg.value())
                consumer.commit(message=msg, asynchronous=False)
    while not acked <= seen and time.monotonic() < give_up:
        msg = consumer.poll(0.5)
        if msg is not None and msg.error() is None:
            seen.add(msg.value())
            consumer.commit(message=msg, asynchronous=False)
    consumer.close()
    assert len(acked) == RECORDS and not errors
    assert acked <= seen, f"{len(acked - seen)} acknowledged records never consumed"
    assert chaos.last and chaos.backwards == []  # commits were watched, none went back
    # the idempotent producer wrote each record once, whatever it retried through the moves
    in_log = Counter(read_all(cluster))
    assert set(in_log) == acked and max(in_log.values()) == 1


def read_all(bt) -> list[bytes]:
    """Every record value of the topic, read from the start of each partition."""
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap(bt), auto_offset_reset="earliest", consumer_timeout_ms=3000
    )
    consumer.assign([TopicPartition("events", p) for p in range(PARTITIONS)])
    values = [r.value for r in consumer]
    consumer.close()
    return values


def test_kafka_python_through_shuffles_and_a_node_down_and_up(cluster):
    group = f"kp-{uuid.uuid4().hex[:6]}"
    producer = KafkaProducer(bootstrap_servers=bootstrap(cluster), acks="all", retries=20, linger_ms=5)
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap(cluster),
        group_id=group,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
    )
    consumer.subscribe(["events"])
    acked: set[bytes] = set()
    seen: set[bytes] = set()
    failed: list[str] = []

    def consume(timeout_ms: int) -> None:
        batches = consumer.poll(timeout_ms=timeout_ms)
        for records in batches.values():
            for r in records:
                seen.add(r.value)
        if batches:
            consumer.commit()

    give_up = time.monotonic() + GIVE_UP_S
    with Chaos(cluster, group) as chaos:
        futures = []
        for i in range(RECORDS):
            value = f"v{i}".encode()
            futures.append((value, producer.send("events", value=value)))
            if i % 50 == 0:
                consume(100)
        producer.flush()
        for value, f in futures:
            try:
                f.get(timeout=60)
                acked.add(value)
            except Exception as e:  # noqa: BLE001 - counted: an unacknowledged record need not arrive
                failed.append(repr(e))
        while chaos.shuffles < 12 and time.monotonic() < give_up:
            consume(100)
    while not acked <= seen and time.monotonic() < give_up:
        consume(500)
    consumer.close()
    producer.close()
    assert len(acked) == RECORDS, failed[:3]
    assert acked <= seen, f"{len(acked - seen)} acknowledged records never consumed"
    assert chaos.last and chaos.backwards == []  # commits were watched, none went back


def test_a_coordinator_move_alone_causes_no_rebalance(cluster):
    group = f"move-{uuid.uuid4().hex[:6]}"
    producer = Producer({"bootstrap.servers": bootstrap(cluster), "acks": "all"})
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap(cluster),
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe(["events"])
    give_up = time.monotonic() + GIVE_UP_S

    def consume_until(values: set[bytes]) -> None:
        while values and time.monotonic() < give_up:
            producer.poll(0)
            msg = consumer.poll(0.2)
            if msg is not None and msg.error() is None:
                values.discard(msg.value())
                consumer.commit(message=msg, asynchronous=False)

    before = {f"a{i}".encode() for i in range(30)}
    for v in before:
        producer.produce("events", value=v)
    producer.flush(30)
    consume_until(set(before))
    state = cluster.control.group(group)
    assert state["state"] == "STABLE"
    generation = state["generation"]
    moved = cluster.control.move_coordinator(group)
    assert moved["from"] != moved["to"]
    after = {f"b{i}".encode() for i in range(30)}
    for v in after:
        producer.produce("events", value=v)
    producer.flush(30)
    consume_until(set(after))
    committed_before = sum(o["offset"] for o in cluster.control.offsets(group)["events"].values())
    # the group commits at its new coordinator, in the same generation
    assert committed_before >= 60
    state = cluster.control.group(group)
    assert (state["state"], state["generation"]) == ("STABLE", generation)
    consumer.close()


def test_kcat_and_admin_clients_list_three_brokers_from_node_2_alone(cluster):
    node2 = bootstrap(cluster, 2)
    out = subprocess.run(
        ["kcat", "-L", "-b", node2], capture_output=True, text=True, timeout=60, check=True
    ).stdout
    assert " 3 brokers:" in out, out
    for node in (1, 2, 3):
        assert f"broker {node} at" in out
    assert 'topic "events" with 6 partitions' in out
    brokers = AdminClient({"bootstrap.servers": node2}).list_topics(timeout=30).brokers
    assert sorted(brokers) == [1, 2, 3]
    admin = KafkaAdminClient(bootstrap_servers=node2)
    assert sorted(b["broker_id"] for b in admin.describe_cluster()["brokers"]) == [1, 2, 3]
    admin.close()
    # a producer and a consumer bootstrapped with node 2 alone reach every leader
    producer = KafkaProducer(bootstrap_servers=node2, acks="all")
    for p in range(PARTITIONS):
        producer.send("events", value=b"x", partition=p).get(timeout=30)
    producer.close()
    consumer = KafkaConsumer(bootstrap_servers=node2, auto_offset_reset="earliest", consumer_timeout_ms=5000)
    consumer.assign([TopicPartition("events", p) for p in range(PARTITIONS)])
    got = {r.partition for r in consumer}
    consumer.close()
    assert got == set(range(PARTITIONS))


def test_a_coordinator_move_keeps_kip848_member_epochs(cluster):
    group = f"cg-{uuid.uuid4().hex[:6]}"
    producer = Producer({"bootstrap.servers": bootstrap(cluster), "acks": "all"})
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap(cluster),
            "group.id": group,
            "group.protocol": "consumer",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe(["events"])
    give_up = time.monotonic() + GIVE_UP_S

    def consume_until(values: set[bytes]) -> None:
        while values and time.monotonic() < give_up:
            msg = consumer.poll(0.2)
            if msg is not None and msg.error() is None:
                values.discard(msg.value())
                consumer.commit(message=msg, asynchronous=False)

    def epochs() -> tuple[int, list[int]]:
        g = cluster.control.group(group)
        return g["group_epoch"], [m["member_epoch"] for m in g["members"]]

    before = {f"a{i}".encode() for i in range(30)}
    for v in before:
        producer.produce("events", value=v)
    producer.flush(30)
    consume_until(set(before))
    group_epoch, member_epochs = epochs()
    assert member_epochs == [group_epoch]  # reconciled: the member holds the group's assignment
    moved = cluster.control.move_coordinator(group)
    assert moved["from"] != moved["to"]
    after = {f"b{i}".encode() for i in range(30)}
    for v in after:
        producer.produce("events", value=v)
    producer.flush(30)
    consume_until(set(after))
    assert sum(o["offset"] for o in cluster.control.offsets(group)["events"].values()) >= 60
    assert epochs() == (group_epoch, member_epochs)  # no new epoch: the move caused no rebalance
    consumer.close()
