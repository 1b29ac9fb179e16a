"""The Java consumer (kafka-clients 3.9 and 4.x) on a simulated 3-node cluster (``cluster.nodes``):
a classic group member keeps its generation through a coordinator move, follows leaders shuffled
under it and a node going down and up, and reads every record once."""

from __future__ import annotations

import pytest

from tests.support.groups import GROUP_CONFIG, MemberPool, produce
from tests.support.java import require_java

pytestmark = [pytest.mark.java, pytest.mark.usefixtures("java_clients")]

TOPIC = "orders"
GROUP = "java-g"
PARTITIONS = 6


@pytest.fixture
def pool():
    p = MemberPool()
    yield p
    p.cleanup()


def test_java_classic_member_through_a_coordinator_move_shuffles_and_a_node_down(broker_factory, pool):
    java = require_java()
    bt = broker_factory({**GROUP_CONFIG, "cluster.nodes": 3})
    bt.call(bt.broker.create_topic, TOPIC, PARTITIONS, None, False, False, 3)
    produce(bt, TOPIC, PARTITIONS, 5)
    m = pool.java(
        java,
        "a",
        bt.bootstrap,
        GROUP,
        TOPIC,
        **{
            "client.id": "java-a",
            "session.timeout.ms": 10000,
            "heartbeat.interval.ms": 200,
            "retry.backoff.ms": 50,
        },
    )
    first = m.wait_records(5 * PARTITIONS)
    assert m.commit() == {p: 5 for p in range(PARTITIONS)}
    generation = m.state["generation"]

    moved = bt.control.move_coordinator(GROUP)
    assert moved["from"] != moved["to"]
    mark = m.mark()
    produce(bt, TOPIC, PARTITIONS, 1)  # offset 5 of each partition
    second = m.wait_records(PARTITIONS, since=mark)
    assert m.commit() == {p: 6 for p in range(PARTITIONS)}  # committed at the new coordinator
    assert bt.control.group(GROUP)["generation"] == generation == m.state["generation"]

    bt.control.shuffle_leaders()
    bt.control.node_down(3)
    bt.control.shuffle_leaders()
    mark = m.mark()
    produce(bt, TOPIC, PARTITIONS, 1)  # offset 6
    third = m.wait_records(PARTITIONS, since=mark)
    bt.control.node_up(3)
    bt.control.shuffle_leaders()
    mark = m.mark()
    produce(bt, TOPIC, PARTITIONS, 1)  # offset 7
    fourth = m.wait_records(PARTITIONS, since=mark)
    assert m.commit() == {p: 8 for p in range(PARTITIONS)}
    everything = {(p, o) for p, o, _ in first + second + third + fourth}
    assert everything == {(p, o) for p in range(PARTITIONS) for o in range(8)}
    m.close()
