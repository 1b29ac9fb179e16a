"""Acceptance of the simulated multi-node cluster (``cluster.nodes``, broker/nodes.py) with real
clients over TCP: 3 nodes, a topic of 6 partitions with replication factor 3.

- a coordinator move alone causes no rebalance: the classic generation is unchanged and the group
  goes on committing at its new coordinator;
- kcat -L and the admin clients list 3 brokers; a client bootstrapped with node 2's address alone
  works.

Every client at once through the acceptance's chaos (leaders shuffled every 500 ms for 10 s, a node
down and up, a coordinator move): tests/integration/test_cluster_acceptance.py.
"""

from __future__ import annotations

import subprocess
import time
import uuid

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.errors import KafkaConnectionError

BROKER_CONFIG = {"cluster.nodes": 3, "group.initial.rebalance.delay.ms": 0}
PARTITIONS = 6
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


def test_kafka_python_sees_a_new_quorum_epoch_and_a_down_voters_last_fetch(cluster):
    """describe_metadata_quorum (kafka-python): a controller down is a new election (leader 2,
    epoch 2, node 1 unheard of by the new leader: -1); node 3 going down under leader 2 keeps its
    last fetch time."""
    admin = KafkaAdminClient(bootstrap_servers=bootstrap(cluster, 2), request_timeout_ms=30000)
    try:

        def quorum() -> tuple[int, int, dict[int, int]]:
            for _attempt in range(5):  # kafka-python does not retry a request to a node gone down
                try:
                    described = admin.describe_metadata_quorum()
                    break
                except KafkaConnectionError:
                    continue
            [part] = described["topics"][0]["partitions"]
            voters = {v["replica_id"]: v["last_fetch_timestamp"] for v in part["current_voters"]}
            return part["leader_id"], part["leader_epoch"], voters

        leader, epoch, voters = quorum()
        assert (leader, epoch, sorted(voters)) == (1, 1, [1, 2, 3])
        cluster.call(cluster.broker.nodes.node_down, 1)
        leader, epoch, voters = quorum()
        assert (leader, epoch, voters[1]) == (2, 2, -1)
        cluster.call(cluster.broker.nodes.node_down, 3)
        leader, epoch, voters = quorum()
        assert (leader, epoch, voters[1]) == (2, 2, -1) and voters[3] > 0
        down_at = voters[3]
        assert quorum()[2][3] == down_at  # its last known fetch, not now
    finally:
        admin.close()
