"""Online migration between classic and consumer groups (KIP-848) with real clients, as a user of
Apache Kafka 4.x would do it: a rolling restart of a live group onto group.protocol=consumer, and
back.

Three members (kafka-clients 3.9 running tests/java/GroupProbe.java, or confluent-kafka members from
tests/support/groups.py) consume a 6-partition topic with the classic protocol and the
cooperative-sticky assignor while a producer writes small bursts to every partition. Each member in
turn commits, closes cleanly and is replaced by a consumer-protocol member (the first one converts
the group into a consumer group, in which the remaining classic members keep working); then each is
replaced by a classic member again (when the last consumer-protocol member leaves, the group
converts back into a classic group and the two members left settle in it before the third
returns). After every step the group settles and its type
is checked three ways: the broker's state, ConsumerGroupDescribe/DescribeGroups on the wire (member
types: classic or consumer), and the client's own Admin.

At the end:

- every produced record was consumed (at least once) and the committed offsets cover everything;
- no partition was owned by two members at once: each member logs its rebalance-listener events with
  a CLOCK_MONOTONIC timestamp, and for every partition the ownership intervals (assigned until
  revoked, lost or closed) of different members do not overlap.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from broker.protocol.errors import ErrorCode
from broker.protocol.generated.consumer_group_describe import ConsumerGroupDescribeRequest
from broker.protocol.generated.describe_groups import DescribeGroupsRequest
from tests.support.groups import (
    PARTITIONS,
    Member,
    consumer_group_view,
    group_view,
    wait_consumer_settled,
    wait_settled,
)
from tests.support.java import require_java
from tests.support.wire import WireClient

TOPIC = "orders"
GROUP = "g"
BROKER_CONFIG = {
    "group.consumer.session.timeout.ms": "10000",
    "group.consumer.heartbeat.interval.ms": "300",
    "group.initial.rebalance.delay.ms": "0",
    "group.min.session.timeout.ms": "1000",
}
#: classic members: nobody is killed here, so the session timeout only has to survive a busy machine
SESSION_MS = 10000
HEARTBEAT_MS = 200
DESCRIBE_GROUPS, CONSUMER_GROUP_DESCRIBE = 15, 69
CLASSIC_MEMBER, CONSUMER_MEMBER = 0, 1
HANG_GUARD = 60.0

#: start(slot name, "classic" | "consumer") -> a running member
StartMember = Callable[[str, str], Member]


# ====================================================================================== producing


class BurstProducer:
    """Writes one record to every partition every ``interval`` seconds on its own thread until
    :meth:`stop`; keys are ``"p-i"``. :meth:`stop` returns partition -> acknowledged keys."""

    def __init__(self, bootstrap: str, interval: float = 0.05):
        from kafka import KafkaProducer

        self.producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=2)
        self.interval = interval
        self.futures: list[tuple[int, str, Any]] = []
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="burst-producer", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        i = 0
        try:
            while not self._stop.is_set():
                for p in range(PARTITIONS):
                    key = f"{p}-{i}"
                    self.futures.append(
                        (p, key, self.producer.send(TOPIC, key=key.encode(), value=b"v", partition=p))
                    )
                i += 1
                self._stop.wait(self.interval)
        except BaseException as e:  # reported by stop()
            self.error = e

    def stop(self) -> dict[int, list[str]]:
        self._stop.set()
        self._thread.join(HANG_GUARD)
        assert self.error is None, f"the producer failed: {self.error!r}"
        try:
            self.producer.flush(HANG_GUARD)
            out: dict[int, list[str]] = {p: [] for p in range(PARTITIONS)}
            for p, key, f in self.futures:
                f.get(HANG_GUARD)
                out[p].append(key)
            return out
        finally:
            self.producer.close(timeout=5)

    def close(self) -> None:
        if not self._stop.is_set():
            self._stop.set()
            self._thread.join(HANG_GUARD)
            self.producer.close(timeout=5)


@pytest.fixture
def producer_factory():
    started: list[BurstProducer] = []

    def start(bootstrap: str) -> BurstProducer:
        p = BurstProducer(bootstrap)
        started.append(p)
        return p

    yield start
    for p in started:
        p.close()


# ====================================================================================== checking


def describe_wire(bt: Any) -> tuple[Any, Any]:
    """(ConsumerGroupDescribe v1 group, DescribeGroups v5 group) of GROUP, with our codec."""
    with WireClient(bt.port) as c:
        [cg] = c.call(CONSUMER_GROUP_DESCRIBE, 1, ConsumerGroupDescribeRequest([GROUP], False)).groups
        [dg] = c.call(DESCRIBE_GROUPS, 5, DescribeGroupsRequest([GROUP], False)).groups
    return cg, dg


def check_consumer_group(bt: Any, kinds: dict[str, str], members: list[Member]) -> None:
    """The group is a Stable consumer group of exactly ``members``, each of the member type its
    protocol names (classic members live on inside the consumer group), at the group epoch."""
    assert group_view(bt, GROUP, TOPIC) is None, "a classic group exists next to the consumer group"
    view = consumer_group_view(bt, GROUP, TOPIC)
    assert view is not None, "no consumer group"
    cg, dg = describe_wire(bt)
    assert (cg.error_code, cg.group_state) == (ErrorCode.NONE, "Stable"), cg
    by_id = {m.member_id: m for m in cg.members}
    assert set(by_id) == {m.state["memberId"] for m in members}  # type: ignore[index]
    for m in members:
        d = by_id[m.state["memberId"]]  # type: ignore[index]
        want = CONSUMER_MEMBER if kinds[m.name] == "consumer" else CLASSIC_MEMBER
        assert d.member_type == want, f"{m.name} ({kinds[m.name]}) described as member type {d.member_type}"
        assert d.member_epoch == cg.group_epoch == cg.assignment_epoch, (m.name, d, cg.group_epoch)
        held = sorted(p for tp in d.assignment.topic_partitions for p in tp.partitions)
        assert held == m.state["assignment"], (m.name, d)  # type: ignore[index]
    # DescribeGroups describes classic groups only: below v6 Kafka 4.x answers a consumer group (even
    # one with classic members) as Dead without members, with no error
    assert (dg.error_code, dg.group_state, dg.members) == (ErrorCode.NONE, "Dead", []), dg


def check_classic_group(bt: Any, members: list[Member]) -> None:
    """The group is a Stable classic group of exactly ``members`` on cooperative-sticky, and no
    consumer group of that id exists (ConsumerGroupDescribe: GROUP_ID_NOT_FOUND, as Kafka 4.x)."""
    assert consumer_group_view(bt, GROUP, TOPIC) is None, "a consumer group exists next to the classic group"
    view = group_view(bt, GROUP, TOPIC)
    assert view is not None and view.protocol == "cooperative-sticky", view
    cg, dg = describe_wire(bt)
    assert cg.error_code == ErrorCode.GROUP_ID_NOT_FOUND, cg
    assert (dg.error_code, dg.protocol_type, dg.protocol_data, dg.group_state) == (
        ErrorCode.NONE,
        "consumer",
        "cooperative-sticky",
        "Stable",
    ), dg
    assert {m.member_id for m in dg.members} == {m.state["memberId"] for m in members}  # type: ignore[index]


def ownership(m: Member) -> dict[int, list[tuple[float, float]]]:
    """Partition -> [(from, to)] while ``m`` owned it: from its assigned callback until its revoked
    or lost callback, or its close (or forever, if it still runs)."""
    held: dict[int, float] = {}
    out: dict[int, list[tuple[float, float]]] = {}
    end = math.inf
    for e in m.events:
        if e["event"] == "assigned":
            for p in e["partitions"]:
                held.setdefault(p, e["ts"])
        elif e["event"] in ("revoked", "lost"):
            for p in e["partitions"]:
                if p in held:
                    out.setdefault(p, []).append((held.pop(p), e["ts"]))
        elif e["event"] == "closed":
            end = e["ts"]
    for p, start in held.items():
        out.setdefault(p, []).append((start, end))
    return out


def check_exclusive_ownership(members: list[Member]) -> int:
    """No partition owned by two members at the same time; returns how many hand-overs there were."""
    by_partition: dict[int, list[tuple[float, float, str]]] = {}
    for m in members:
        for p, spans in ownership(m).items():
            by_partition.setdefault(p, []).extend((a, b, m.name) for a, b in spans)
    t0 = min(e["ts"] for m in members for e in m.events)  # times below are seconds since t0
    overlaps = []
    for p, spans in sorted(by_partition.items()):
        spans.sort()
        for i, (a1, b1, n1) in enumerate(spans):
            for a2, b2, n2 in spans[i + 1 :]:
                if n1 != n2 and a2 < b1:
                    overlaps.append(
                        f"partition {p}: {n1} owned it {a1 - t0:.3f}..{b1 - t0:.3f}, "
                        f"{n2} {a2 - t0:.3f}..{b2 - t0:.3f}"
                    )
    if overlaps:
        logs = "\n".join(
            f"{m.name}: "
            + ", ".join(
                f"{e['event']} {e.get('partitions', '')} @{e['ts'] - t0:.3f}"
                for e in m.events
                if e["event"] in ("assigned", "revoked", "lost", "closed")
            )
            for m in members
        )
        raise AssertionError("partitions owned by two members at once:\n" + "\n".join(overlaps) + "\n" + logs)
    assert set(by_partition) == set(range(PARTITIONS)), by_partition
    return sum(len(s) for s in by_partition.values()) - PARTITIONS


def wait_consumed(members: list[Member], expected: dict[int, list[str]]) -> None:
    """Every acknowledged record was delivered to some member (hang guard only)."""
    want = {k for ks in expected.values() for k in ks}
    deadline = time.monotonic() + HANG_GUARD
    while True:
        got = {k for m in members for _, _, k in m.records()}
        missing = want - got
        if not missing:
            assert got <= want, f"records nobody produced: {sorted(got - want)[:5]}"
            return
        if time.monotonic() > deadline:
            raise AssertionError(
                f"{len(missing)} records never consumed, e.g. {sorted(missing)[:5]}\n"
                + "\n".join(m.describe() for m in members if m.alive)
            )
        time.sleep(0.1)


# ====================================================================================== the roll


def rolling_migration(
    bt: Any,
    producer: BurstProducer,
    start: StartMember,
    admin_type: Callable[[], str],
    committed: Callable[[], dict[int, int]],
) -> list[Member]:
    """Classic -> consumer -> classic, one member at a time, with the checks of the module
    docstring. ``admin_type`` is the group type the client's Admin reports ("classic" or
    "consumer"); ``committed`` the group's committed offsets as its Admin lists them."""
    slots = ["a", "b", "c"]
    kinds = dict.fromkeys(slots, "classic")
    started: dict[str, float] = {}

    def launch(name: str, protocol: str) -> Member:
        started[name] = time.monotonic()
        return start(name, protocol)

    live = {s: launch(s, "classic") for s in slots}
    everyone = list(live.values())

    def settle(phase: str, members: list[Member], member_kinds: dict[str, str]) -> None:
        if all(k == "classic" for k in member_kinds.values()):
            wait_settled(bt, GROUP, TOPIC, members)
            check_classic_group(bt, members)
            expected = "classic"
        else:
            wait_consumer_settled(bt, GROUP, TOPIC, members)
            check_consumer_group(bt, member_kinds, members)
            expected = "consumer"
        assert admin_type() == expected, f"{phase}: the client's Admin does not see a {expected} group"

    def settle_all(phase: str) -> None:
        settle(phase, list(live.values()), {live[s].name: kinds[s] for s in slots})

    settle_all("all classic")
    for protocol in ("consumer", "classic"):
        for s in slots:
            old = live[s]
            old.commit()  # the group is settled: a commit at the member's generation/epoch is valid
            old.close()
            if protocol == "classic" and s == slots[-1]:
                # the last consumer-protocol member left: a classic group of the other two rebalances
                rest = [live[r] for r in slots if r != s]
                settle("the last consumer member left", rest, {m.name: "classic" for m in rest})
            kinds[s] = protocol
            live[s] = launch(f"{s}-{protocol}", protocol)
            everyone.append(live[s])
            settle_all(f"{s} restarted with the {protocol} protocol")

    expected = producer.stop()
    wait_consumed(everyone, expected)
    final = list(live.values())
    for m in final:
        m.commit()
    ends = {p: len(keys) for p, keys in expected.items()}
    assert min(ends.values()) > 0
    assert committed() == ends, "the committed offsets do not cover every record"
    now = time.monotonic()
    for m in everyone:  # the members' "ts" is this process's clock, or the ownership check is moot
        stamps = [e["ts"] for e in m.events]
        assert started[m.name] <= min(stamps) and max(stamps) <= now, f"{m.name}: clock mismatch"
    handovers = check_exclusive_ownership(everyone)
    assert handovers >= 6, f"only {handovers} partition hand-overs: the roll moved nothing?"
    for m in final:
        m.close()
    return everyone


# ====================================================================================== Java


COOPERATIVE = "org.apache.kafka.clients.consumer.CooperativeStickyAssignor"


@pytest.mark.java
@pytest.mark.usefixtures("java_clients")
def test_java_rolling_upgrade_and_downgrade(bt, pool, producer_factory):
    java = require_java()

    def start(name: str, protocol: str) -> Member:
        props: dict[str, Any] = {"client.id": f"java-{name}", "max.poll.interval.ms": 30000}
        if protocol == "consumer":
            props["group.protocol"] = "consumer"
        else:
            props.update(
                {
                    "partition.assignment.strategy": COOPERATIVE,
                    "session.timeout.ms": SESSION_MS,
                    "heartbeat.interval.ms": HEARTBEAT_MS,
                }
            )
        return pool.java(java, name, bt.bootstrap, GROUP, TOPIC, **props)

    with java.session("AdminProbe", [bt.bootstrap], timeout=HANG_GUARD) as admin:

        def request(command: str) -> dict:
            line = admin.request(command)
            assert "error" not in line, f"{line}\nstderr:\n{admin.stderr[-3000:]}"
            return line

        def admin_type() -> str:
            d = request(f"describe-groups {GROUP}")["groups"][GROUP]
            assert (d["state"], d["simple"]) == ("Stable", False), d
            return d["type"].lower()  # GroupType.toString(): "Classic" / "Consumer"

        def committed() -> dict[int, int]:
            offsets = request(f"group-offsets {GROUP}")["offsets"]
            return {int(tp.rsplit("-", 1)[1]): off for tp, off in offsets.items()}

        producer = producer_factory(bt.bootstrap)
        rolling_migration(bt, producer, start, admin_type, committed)


# ====================================================================================== confluent-kafka


def test_confluent_rolling_upgrade_and_downgrade(bt, pool, producer_factory):
    from confluent_kafka import ConsumerGroupType, TopicPartition
    from confluent_kafka.admin import AdminClient

    def start(name: str, protocol: str) -> Member:
        config: dict[str, Any] = dict(
            client="confluent", bootstrap=bt.bootstrap, group=GROUP, topic=TOPIC, client_id=f"ck-{name}"
        )
        if protocol == "consumer":
            config["protocol"] = "consumer"
        else:
            config.update(strategy="cooperative-sticky", session_ms=SESSION_MS, heartbeat_ms=HEARTBEAT_MS)
        return pool.python(name, **config)

    admin = AdminClient({"bootstrap.servers": bt.bootstrap})

    def admin_type() -> str:
        d = admin.describe_consumer_groups([GROUP], request_timeout=10)[GROUP].result()
        assert d.is_simple_consumer_group is False, d
        return {ConsumerGroupType.CLASSIC: "classic", ConsumerGroupType.CONSUMER: "consumer"}[d.type]

    def committed() -> dict[int, int]:
        from confluent_kafka import ConsumerGroupTopicPartitions

        request = [ConsumerGroupTopicPartitions(GROUP, [TopicPartition(TOPIC, p) for p in range(PARTITIONS)])]
        got = admin.list_consumer_group_offsets(request, request_timeout=10)[GROUP].result()
        return {tp.partition: tp.offset for tp in got.topic_partitions if tp.offset >= 0}

    producer = producer_factory(bt.bootstrap)
    rolling_migration(bt, producer, start, admin_type, committed)
