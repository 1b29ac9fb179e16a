"""Fault rules seen by the Java consumer (kafka-clients 3.9 and 4.x; issue 13, acceptance 2)."""

from __future__ import annotations

import pytest

from tests.support.groups import GROUP_CONFIG, PARTITIONS, MemberPool, produce, wait_state
from tests.support.java import require_java

pytestmark = [pytest.mark.java, pytest.mark.usefixtures("java_clients")]

TOPIC = "orders"
GROUP = "g"


@pytest.fixture
def pool():
    p = MemberPool()
    yield p
    p.cleanup()


def test_coordinator_not_available_x5_then_rebalance_in_progress_once(broker_factory, pool):
    """FindCoordinator -> COORDINATOR_NOT_AVAILABLE x5: the consumer keeps looking and the group
    forms; Heartbeat -> REBALANCE_IN_PROGRESS once: the member rejoins (a new generation) and goes
    on from its committed offsets."""
    java = require_java()
    bt = broker_factory({**GROUP_CONFIG, "control.port": 0})
    bt.call(bt.broker.create_topic, TOPIC, PARTITIONS)
    produce(bt, TOPIC, PARTITIONS, 5)
    bt.control.add_rule(api="FindCoordinator", group=GROUP, error="COORDINATOR_NOT_AVAILABLE", times=5)
    m = pool.java(
        java,
        "a",
        bt.bootstrap,
        GROUP,
        TOPIC,
        **{
            "client.id": "java-a",
            "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 200,
            "retry.backoff.ms": 50,
        },
    )
    first = m.wait_records(5 * PARTITIONS)
    assert bt.control.rules() == []  # all five errors were answered before the group formed
    committed = m.commit()
    assert committed == {p: 5 for p in range(PARTITIONS)}
    generation = m.state["generation"]
    assert bt.control.group(GROUP)["generation"] == generation

    mark = m.mark()
    bt.control.add_rule(api="Heartbeat", group=GROUP, error="REBALANCE_IN_PROGRESS", times=1)
    m.wait_event(
        "state", lambda e: e["generation"] > generation and len(e["assignment"]) == PARTITIONS, since=mark
    )
    assert bt.control.rules() == []
    wait_state(bt, GROUP, TOPIC, "Stable")
    offsets = bt.control.offsets(GROUP)[TOPIC]
    assert {int(p): o["offset"] for p, o in offsets.items()} == committed  # kept through the rejoin
    produce(bt, TOPIC, PARTITIONS, 1)  # offset 5 of each partition
    after = m.wait_records(PARTITIONS, since=mark)
    assert sorted((p, o) for p, o, _ in after) == [(p, 5) for p in range(PARTITIONS)]
    assert len({(p, o) for p, o, _ in first + after}) == 6 * PARTITIONS  # nothing delivered twice
    m.close()
