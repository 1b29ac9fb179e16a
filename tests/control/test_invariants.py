"""The invariant checker and the rebalance report (broker/control/invariants.py, report.py).

- silent through real-client groups (kafka-python classic, confluent-kafka KIP-848) that form,
  grow, lose a member and rebalance, with the checker on (a violation would fail the test when the
  broker stops); the rebalance report of those groups counts their rebalances, the time spent and
  the partitions moved;
- catches a deliberately broken assignor planted in a kafka-python leader (every member gets every
  partition), naming the operation (SyncGroup) and the partitions;
- catches a planted high watermark above the log end, and a generation that goes back;
- the HTTP routes.
"""

from __future__ import annotations

import asyncio

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from broker.control import http_features
from broker.control import report as rep
from broker.testing import InvariantViolation, running_broker
from tests.support.groups import MemberPool, wait_consumer_settled, wait_settled

TOPIC = "orders"
GROUP = "g"
PARTITIONS = 6
CLASSIC = {"group.initial.rebalance.delay.ms": "0", "group.min.session.timeout.ms": "1000"}


@pytest.fixture
def pool():
    p = MemberPool()
    yield p
    p.cleanup()


def _kp(pool, bt, name, **extra):
    config = dict(
        client="kafka-python",
        bootstrap=bt.bootstrap,
        group=GROUP,
        topic=TOPIC,
        client_id=f"kp-{name}",
        session_ms=6000,
        heartbeat_ms=200,
    )
    config.update(extra)
    return pool.python(name, **config)


@pytest.mark.integration
def test_silent_through_a_classic_group_and_the_report_counts_its_rebalances(broker_factory, pool):
    bt = broker_factory(CLASSIC, invariants=True)
    bt.call(bt.broker.create_topic, TOPIC, PARTITIONS)
    bt.call(rep.reporter(bt.broker).enable)
    a = _kp(pool, bt, "a")
    wait_settled(bt, GROUP, TOPIC, [a])
    b = _kp(pool, bt, "b")
    wait_settled(bt, GROUP, TOPIC, [a, b])
    c = _kp(pool, bt, "c")
    wait_settled(bt, GROUP, TOPIC, [a, b, c])
    b.close()
    wait_settled(bt, GROUP, TOPIC, [a, c])
    assert bt.checker.enabled and bt.checker.checks > 0
    assert bt.call(bt.checker.violations) == []
    report = bt.call(rep.reporter(bt.broker).report, GROUP)["groups"][GROUP]
    assert report["type"] == "classic" and report["rebalances"] >= 4
    history = report["history"]
    assert history[0]["assigned"] == PARTITIONS and history[0]["moved"] == 0
    assert all(h["duration_ms"] >= 0 and h["to_epoch"] >= h["from_epoch"] for h in history)
    assert sum(h["moved"] for h in history) == report["partitions_moved"] > 0
    assert report["rebalancing_ms"] == sum(h["duration_ms"] for h in history)


@pytest.mark.integration
def test_silent_through_a_consumer_group(broker_factory, pool):
    bt = broker_factory(
        {"group.consumer.session.timeout.ms": "45000", "group.consumer.heartbeat.interval.ms": "300"},
        invariants=True,
    )
    bt.call(bt.broker.create_topic, TOPIC, PARTITIONS)
    bt.call(rep.reporter(bt.broker).enable)
    common = dict(client="confluent", protocol="consumer", bootstrap=bt.bootstrap, group=GROUP, topic=TOPIC)
    a = pool.python("a", client_id="ck-a", **common)
    wait_consumer_settled(bt, GROUP, TOPIC, [a])
    b = pool.python("b", client_id="ck-b", **common)
    wait_consumer_settled(bt, GROUP, TOPIC, [a, b])
    a.close()
    wait_consumer_settled(bt, GROUP, TOPIC, [b])
    assert bt.call(bt.checker.violations) == []
    report = bt.call(rep.reporter(bt.broker).report, GROUP)["groups"][GROUP]
    assert report["type"] == "consumer" and report["rebalances"] >= 3
    assert report["partitions_moved"] >= PARTITIONS // 2  # b took a's half when a left


@pytest.mark.integration
def test_catches_a_broken_assignor(broker_factory, pool):
    bt = broker_factory(CLASSIC, invariants=False)
    bt.call(bt.broker.create_topic, TOPIC, PARTITIONS)
    bt.call(bt.checker.enable)
    a = _kp(pool, bt, "a", strategy="broken")
    b = _kp(pool, bt, "b", strategy="broken")
    # the "broken" assignor hands every partition to every member: once both hold all of them they
    # are in one generation (whether b joined a's first one or caused a second)
    for m in (a, b):
        m.wait_event("state", lambda e: len(e["assignment"]) == PARTITIONS, timeout=60)
    assert bt.call(lambda: len(bt.broker.groups.state.groups[GROUP].members)) == 2
    found = bt.call(bt.checker.violations)
    assert found, "the broken assignment went unnoticed"
    v = found[0]
    assert v["invariant"] == "exclusive-ownership" and v["group"] == GROUP
    assert "sync_group" in v["operation"]
    assert f"{TOPIC}-0 assigned to" in v["detail"]


def test_catches_a_high_watermark_above_the_log_end_and_a_generation_going_back(broker_factory):
    bt = broker_factory(invariants=False)
    bt.call(bt.broker.create_topic, TOPIC, 1)
    checker = bt.checker

    def plant() -> None:
        checker.enable()
        plog = bt.broker.logs.get(TOPIC, 0)
        plog.high_watermark = plog.log_end_offset + 1
        checker.check_logs()
        plog.high_watermark = plog.log_end_offset
        st = bt.broker.groups.state
        from broker.coordinator.classic.group import ClassicGroup

        st.groups["planted"] = ClassicGroup("planted", generation=5)
        checker.after_operation(plant, 0)
        st.groups["planted"].generation = 3
        checker.after_operation(plant, 0)
        del st.groups["planted"]
        checker.after_operation(plant, 0)

    bt.call(plant)
    found = bt.call(checker.violations)
    assert [v["invariant"] for v in found] == ["high-watermark", "monotonic"]
    assert "above log end" in found[0]["detail"] and "from 5 to 3" in found[1]["detail"]
    assert found[1]["operation"].endswith("plant")
    bt.call(checker.clear)


class _Control:
    def __init__(self, broker):
        self.broker = broker


def test_routes(broker_factory):
    bt = broker_factory(invariants=False)

    async def main():
        app = web.Application()
        control = _Control(bt.broker)
        app.add_routes(http_features.invariant_routes(control) + http_features.rebalance_routes(control))
        async with TestClient(TestServer(app)) as client:
            r = await client.put("/invariants", json={"enabled": "yes"})
            assert r.status == 400 and "enabled" in (await r.json())["error"]
            r = await client.put("/invariants", json={"enabled": True})
            assert (await r.json())["enabled"] is True
            r = await client.get("/invariants")
            assert (await r.json())["violations"] == []
            r = await client.put("/rebalances", json={"enabled": True})
            assert (await r.json()) == {"enabled": True, "groups": {}}
            r = await client.get("/rebalances?group=x")
            assert (await r.json())["groups"] == {}

    # the routes touch the broker's state: run them on its loop
    asyncio.run_coroutine_threadsafe(main(), bt.loop).result(10)
    bt.call(bt.checker.disable)


@pytest.mark.server
def test_running_broker_fails_on_a_violation(tmp_path):
    with pytest.raises(InvariantViolation, match="(?s)1 invariant violation.*high-watermark"):
        with running_broker(tmp_path / "data", invariants=True) as bt:
            bt.call(bt.broker.create_topic, TOPIC, 1)

            def plant() -> None:
                plog = bt.broker.logs.get(TOPIC, 0)
                plog.high_watermark = plog.log_end_offset + 5  # seen by the last check at stop

            bt.call(plant)
