"""The virtual broker clock (broker/clock.py, broker/control/clock.py).

- unit: a manual clock fires the coordinator's timers in deadline order, each at its deadline,
  including timers armed by a timer that fired within the same advance; switching modes;
  time-based segment rolls, log retention and committed offsets' expiry follow the virtual clock;
- the HTTP routes (a tiny local aiohttp app): read, switch, advance, and 400s that name the
  valid choices;
- acceptance with real clients (issue 13, 3): a frozen (SIGSTOPped) kafka-python member with
  session.timeout.ms=45000 is expired by ``advance`` and the other member takes its partitions in
  well under 5 s of wall time; the same for a confluent-kafka ``group.protocol=consumer`` member.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer
from confluent_kafka import Producer as ConfluentProducer
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.structs import OffsetAndMetadata

from broker.clock import BrokerClock
from broker.control import http_features
from broker.coordinator.result import Result
from broker.coordinator.runtime import LoopTimers
from broker.coordinator.timers import CONSUMER_SESSION, consumer_key, session_key
from tests.support.groups import (
    MemberPool,
    consumer_group_view,
    group_view,
    wait_consumer_settled,
    wait_settled,
)

TOPIC = "orders"
GROUP = "g"
PARTITIONS = 6
SESSION_MS = 45000


# ---------------------------------------------------------------------------------- unit


def _timers(clock: BrokerClock, log: list) -> LoopTimers:
    def run_detached(op):
        op(clock.now_ms())

    return LoopTimers(clock, run_detached)


def test_advance_fires_due_timers_in_deadline_order_at_their_deadlines():
    clock = BrokerClock("manual", start_ms=1_000)
    fired: list[tuple[str, int]] = []
    timers = _timers(clock, fired)

    def op(name):
        def run(now):
            fired.append((name, now))
            if name == "b":  # a timer armed by a timer, due within the same advance
                timers.schedule("c", now + 5, op("c"))
            return Result()

        return run

    timers.schedule("late", 1_000 + 500, op("late"))
    timers.schedule("b", 1_000 + 20, op("b"))
    timers.schedule("a", 1_000 + 10, op("a"))
    assert clock.advance(100) == [("a", 1_010), ("b", 1_020), ("c", 1_025)]
    assert fired == [("a", 1_010), ("b", 1_020), ("c", 1_025)]
    assert clock.now_ms() == 1_100
    assert timers.pending() == [(1_500, "late")]
    assert timers.extend("late", 1_600)
    assert clock.advance(450) == []  # the pushed deadline is not due yet
    assert clock.advance(50) == [("late", 1_600)]
    assert fired[-1] == ("late", 1_600)


def test_mode_switch_and_bad_input():
    clock = BrokerClock()
    assert clock.mode == "system"
    with pytest.raises(ValueError, match="not manual"):
        clock.advance(1)
    clock.set_mode("manual")
    frozen = clock.now_ms()
    assert clock.now_ms() == frozen
    with pytest.raises(ValueError, match="negative"):
        clock.advance(-1)
    clock.advance(7 * 24 * 3600 * 1000)
    assert clock.now_ms() == frozen + 7 * 24 * 3600 * 1000
    with pytest.raises(ValueError, match="system, manual"):
        clock.set_mode("fast")
    clock.set_mode("system")
    assert clock.mode == "system"


def test_switching_to_system_arms_loop_timers():
    async def main():
        clock = BrokerClock("manual")
        fired = []
        timers = LoopTimers(clock, lambda op: fired.append(op(clock.now_ms())))
        timers.schedule("k", clock.now_ms() + 10, lambda now: "done")
        assert not timers.handles  # a manual clock fires it in advance(), no loop timer
        clock.set_mode("system")
        assert "k" in timers.handles
        clock.set_mode("manual")
        assert not timers.handles and timers.scheduled("k")

    asyncio.run(main())


def test_retention_runs_on_the_advanced_time(broker_factory):
    bt = broker_factory({"clock": "manual"})
    seen: list[int] = []
    bt.call(bt.broker.clock.on_advance.append, seen.append)
    now = bt.call(bt.broker.clock.now_ms)
    bt.call(bt.broker.clock.advance, 86_400_000)
    assert seen == [now + 86_400_000]
    assert bt.call(bt.broker.logs.now_ms) == now + 86_400_000


@pytest.mark.integration
def test_segment_roll_and_retention_follow_the_virtual_clock(broker_factory):
    bt = broker_factory({"clock": "manual"})
    configs = {"segment.ms": "60000", "retention.ms": "120000", "segment.jitter.ms": "0"}
    bt.call(bt.broker.create_topic, "aged", 1, configs)
    producer = KafkaProducer(bootstrap_servers=bt.bootstrap, linger_ms=0)

    def send(value: bytes) -> None:
        producer.send("aged", value, partition=0).get(10)

    def segments() -> list[int]:
        return bt.call(lambda: [s.base_offset for s in bt.broker.logs.get("aged", 0).segments])

    send(b"first")
    send(b"second")
    assert segments() == [0]  # no virtual time has passed: no roll
    bt.call(bt.broker.clock.advance, 61_000)
    send(b"third")  # the active segment is older than segment.ms on the broker clock
    assert segments() == [0, 2]
    bt.call(bt.broker.clock.advance, 100_000)  # 161 s after the first records: past retention.ms
    assert segments() == [2]
    assert bt.call(lambda: bt.broker.logs.get("aged", 0).log_start_offset) == 2
    producer.close(timeout=5)


@pytest.mark.integration
def test_committed_offsets_expire_on_the_virtual_clock(broker_factory):
    bt = broker_factory({"clock": "manual", "offsets.retention.minutes": "60"})
    bt.call(bt.broker.create_topic, TOPIC, 1)
    tp = TopicPartition(TOPIC, 0)
    consumer = KafkaConsumer(bootstrap_servers=bt.bootstrap, group_id="idle", enable_auto_commit=False)
    consumer.assign([tp])
    consumer.commit({tp: OffsetAndMetadata(5, "", -1)})
    consumer.close()

    def committed() -> bool:
        return bt.call(lambda: "idle" in bt.broker.groups.state.offsets)

    assert committed()
    bt.call(bt.broker.clock.advance, 3_000_000)  # 50 min
    assert committed()
    fired = bt.call(bt.broker.clock.advance, 1_200_000)  # 70 min: past retention, and a check ran
    assert not committed()
    assert all(key == "offsets:expire" for key, _deadline in fired)


@pytest.mark.integration
def test_idle_producers_are_forgotten_on_the_virtual_clock(broker_factory):
    """producer.id.expiration.ms counts from the producer's last batch; once forgotten, the same
    idempotent producer (confluent-kafka) goes on writing at its next sequence, as against Kafka."""
    bt = broker_factory({"clock": "manual", "producer.id.expiration.ms": "3600000"})
    bt.call(bt.broker.create_topic, "idem", 1)
    producer = ConfluentProducer(
        {"bootstrap.servers": bt.bootstrap, "enable.idempotence": True, "linger.ms": 0}
    )

    def send(*values: bytes) -> None:
        for v in values:
            producer.produce("idem", v, partition=0)
        assert producer.flush(30) == 0

    def producers() -> list[int]:
        return bt.call(lambda: list(bt.broker.logs.get("idem", 0).producers.producers))

    send(b"a", b"b", b"c")
    assert len(producers()) == 1
    bt.call(bt.broker.clock.advance, 1_800_000)  # 30 min after its last batch
    assert len(producers()) == 1
    bt.call(bt.broker.clock.advance, 1_860_000)  # 61 min
    assert producers() == []
    send(b"d", b"e")  # sequences 3 and 4 of a producer the partition no longer knows
    assert len(producers()) == 1
    consumer = KafkaConsumer(
        bootstrap_servers=bt.bootstrap, auto_offset_reset="earliest", consumer_timeout_ms=10000
    )
    consumer.assign([TopicPartition("idem", 0)])
    got = [m.value for m in consumer]
    consumer.close()
    assert got == [b"a", b"b", b"c", b"d", b"e"]


# ---------------------------------------------------------------------------------- HTTP routes


class _Control:
    def __init__(self, clock: BrokerClock):
        self.clock = clock


@pytest.mark.server
def test_routes():
    async def main():
        clock = BrokerClock("system")
        app = web.Application()
        app.add_routes(http_features.clock_routes(_Control(clock)))
        async with TestClient(TestServer(app)) as client:
            r = await client.get("/clock")
            assert (await r.json())["mode"] == "system"
            r = await client.post("/clock/advance", json={"ms": 5})
            assert r.status == 400 and "manual" in (await r.json())["error"]
            r = await client.put("/clock", json={"mode": "slow"})
            assert r.status == 400 and "system, manual" in (await r.json())["error"]
            r = await client.put("/clock", json={"mode": "manual"})
            start = (await r.json())["now_ms"]
            r = await client.post("/clock/advance", json={"duration": "46s"})
            body = await r.json()
            assert r.status == 200 and body["now_ms"] == start + 46000 and body["fired"] == []
            r = await client.post("/clock/advance", json={"ms": "soon"})
            assert r.status == 400 and "bad duration" in (await r.json())["error"]
            r = await client.post("/clock/advance", data=b"{")
            assert r.status == 400
            assert clock.now_ms() == start + 46000  # nothing half-applied

    asyncio.run(main())


# ---------------------------------------------------------------------------------- acceptance


@pytest.fixture
def pool():
    p = MemberPool()
    yield p
    p.cleanup()


def _freeze(member) -> None:
    os.kill(member.proc.pid, signal.SIGSTOP)


def _wait(pred, what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not pred():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def _advance_past_session(bt, survivor_key: str) -> float:
    """Advance 46 s in two steps with the survivor heartbeating in between (as it would have while
    the time passed): 30 s, then -- once the survivor's session deadline is past the clock again --
    16 s (the frozen member's session ends 45 s after its last heartbeat, at the first advance's
    start; the survivor's 45 s after its heartbeat at the first advance's end). Returns the wall time of the second advance."""
    clock = bt.broker.clock
    bt.call(clock.advance, 30_000)

    def survivor_alive() -> bool:
        deadline = bt.call(lambda: bt.broker.groups.timers.deadlines[survivor_key][0])
        return deadline >= bt.call(clock.now_ms) + SESSION_MS

    _wait(survivor_alive, "the survivor's heartbeat after the first advance")
    start = time.monotonic()
    bt.call(clock.advance, 16_000)
    return start


@pytest.mark.integration
def test_frozen_kafka_python_member_expires_on_advance(broker_factory, pool):
    bt = broker_factory(
        {"clock": "manual", "group.initial.rebalance.delay.ms": "0", "group.min.session.timeout.ms": "1000"}
    )
    bt.call(bt.broker.create_topic, TOPIC, PARTITIONS)
    common = dict(
        client="kafka-python",
        bootstrap=bt.bootstrap,
        group=GROUP,
        topic=TOPIC,
        session_ms=SESSION_MS,
        heartbeat_ms=300,
        max_poll_ms=SESSION_MS,
    )
    a = pool.python("a", client_id="kp-a", **common)
    b = pool.python("b", client_id="kp-b", **common)
    wait_settled(bt, GROUP, TOPIC, [a, b])
    a_id, b_id = a.state["memberId"], b.state["memberId"]
    generation = group_view(bt, GROUP, TOPIC).generation
    _freeze(a)
    start = _advance_past_session(bt, session_key(GROUP, b_id))
    view = wait_settled(bt, GROUP, TOPIC, [b])
    took = time.monotonic() - start
    assert a_id not in view.members and view.generation > generation
    assert view.members[b_id][1] == list(range(PARTITIONS))
    print(f"takeover after the advance: {took:.2f} s of wall time")
    assert took < 5.0, f"takeover took {took:.1f} s of wall time"


@pytest.mark.integration
def test_frozen_consumer_protocol_member_expires_on_advance(broker_factory, pool):
    bt = broker_factory(
        {
            "clock": "manual",
            "group.consumer.session.timeout.ms": str(SESSION_MS),
            "group.consumer.heartbeat.interval.ms": "300",
        }
    )
    bt.call(bt.broker.create_topic, TOPIC, PARTITIONS)
    common = dict(client="confluent", protocol="consumer", bootstrap=bt.bootstrap, group=GROUP, topic=TOPIC)
    a = pool.python("a", client_id="ck-a", **common)
    b = pool.python("b", client_id="ck-b", **common)
    wait_consumer_settled(bt, GROUP, TOPIC, [a, b])
    a_id, b_id = a.state["memberId"], b.state["memberId"]
    epoch = consumer_group_view(bt, GROUP, TOPIC).group_epoch
    _freeze(a)
    start = _advance_past_session(bt, consumer_key(CONSUMER_SESSION, GROUP, b_id))
    view = wait_consumer_settled(bt, GROUP, TOPIC, [b])
    took = time.monotonic() - start
    assert a_id not in view.members and view.group_epoch > epoch
    assert view.members[b_id][2] == list(range(PARTITIONS))
    print(f"takeover after the advance: {took:.2f} s of wall time")
    assert took < 5.0, f"takeover took {took:.1f} s of wall time"
