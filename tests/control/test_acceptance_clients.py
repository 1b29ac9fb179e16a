"""The fault rules seen by real clients over real TCP (issue 13, acceptance 1 and 4)."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, Producer

TOPIC = "t"


@pytest.fixture
def bt(broker_factory):
    # no initial rebalance delay: the consumers' groups form at once, not after Kafka's default 3 s
    b = broker_factory({"control.port": 0, "group.initial.rebalance.delay.ms": 0})
    b.call(b.broker.create_topic, TOPIC, 1)
    return b


def read_all(bt, n: int, topic: str = TOPIC) -> list[bytes]:
    c = Consumer(
        {
            "bootstrap.servers": bt.bootstrap,
            "group.id": "reader",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    c.subscribe([topic])
    out: list[bytes] = []
    deadline = time.monotonic() + 30
    try:
        while len(out) < n and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                out.append(m.value())
        return out
    finally:
        c.close()


def test_idempotent_producer_through_not_leader_three_times(bt):
    """Produce -> NOT_LEADER_OR_FOLLOWER x3: librdkafka retries; every record lands exactly once, in order."""
    rule = bt.control.add_rule(api="Produce", error="NOT_LEADER_OR_FOLLOWER", times=3)
    p = Producer(
        {
            "bootstrap.servers": bt.bootstrap,
            "enable.idempotence": True,
            "linger.ms": 5,
            "retry.backoff.ms": 50,
        }
    )
    errors: list = []
    n = 200
    for i in range(n):
        p.produce(TOPIC, b"%d" % i, on_delivery=lambda err, msg: err and errors.append(err))
        if i % 50 == 0:
            p.poll(0)
    assert p.flush(30) == 0
    assert errors == []
    assert bt.control.rules() == []  # fired three times, then gone
    assert read_all(bt, n) == [b"%d" % i for i in range(n)]
    (t,) = [t for t in bt.control.topics() if t["name"] == TOPIC]
    assert t["partitions"][0]["high_watermark"] == n
    assert rule["times"] == 3


def produce_n(bt, n: int, topic: str = TOPIC) -> None:
    p = Producer({"bootstrap.servers": bt.bootstrap})
    for i in range(n):
        p.produce(topic, b"%d" % i)
    assert p.flush(30) == 0


def test_fetch_delay_is_seen_by_the_client(bt):
    """A 2 s delay on Fetch: the Fetch is answered (with its records) 2 s later."""
    from kafka import KafkaConsumer, TopicPartition

    produce_n(bt, 10)
    c = KafkaConsumer(bootstrap_servers=bt.bootstrap, client_id="slow-reader", enable_auto_commit=False)
    try:
        tp = TopicPartition(TOPIC, 0)
        c.assign([tp])
        c.seek_to_beginning(tp)
        assert c.position(tp) == 0  # metadata and ListOffsets before the rule: only Fetch waits
        bt.control.add_rule(api="Fetch", client_id="^slow-reader$", delay_ms="2s", times=1)
        start = time.monotonic()
        got: list = []
        while not got:
            got = c.poll(timeout_ms=5000).get(tp, [])
        waited = time.monotonic() - start
        assert [r.value for r in got] == [b"%d" % i for i in range(10)]
        assert waited >= 2.0
        assert bt.control.rules() == []
    finally:
        c.close()


def test_close_after_join_group_then_the_client_reconnects_and_joins(bt):
    from kafka import KafkaConsumer

    produce_n(bt, 5)
    bt.control.add_rule(api="JoinGroup", group="g", close="after", times=1)
    c = KafkaConsumer(
        TOPIC,
        bootstrap_servers=bt.bootstrap,
        group_id="g",
        client_id="joiner",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        consumer_timeout_ms=30000,
    )
    try:
        values = []
        for m in c:
            values.append(m.value)
            if len(values) == 5:
                break
        assert values == [b"%d" % i for i in range(5)]
        assert bt.control.rules() == []  # the rule fired: the first JoinGroup's connection was closed
        g = bt.control.group("g")
        assert g["state"] == "STABLE" and [m["client_id"] for m in g["members"]] == ["joiner"]
    finally:
        c.close()


def test_dropped_offset_commit_response_is_retried_and_committed_once(bt):
    from kafka import KafkaConsumer, TopicPartition
    from kafka.structs import OffsetAndMetadata

    produce_n(bt, 5)
    c = KafkaConsumer(
        TOPIC,
        bootstrap_servers=bt.bootstrap,
        group_id="g",
        client_id="committer",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        consumer_timeout_ms=30000,
        session_timeout_ms=6000,
        heartbeat_interval_ms=500,
        request_timeout_ms=7000,
    )
    try:
        for n, _m in enumerate(c, 1):
            if n == 5:
                break
        bt.control.add_rule(api="OffsetCommit", group="g", drop=True, times=1)
        # rules fire first-match-first: this one counts the commits after the dropped one
        counter = bt.control.add_rule(api="OffsetCommit", group="g", throttle_ms=0)
        tp = TopicPartition(TOPIC, 0)
        c.commit({tp: OffsetAndMetadata(5, "", -1)})
        (left,) = bt.control.rules()  # the first commit's response was dropped
        assert left["id"] == counter["id"] and left["fired"] == 1  # the client retried, once
        assert bt.control.offsets("g")[TOPIC]["0"]["offset"] == 5
        assert c.committed(tp) == 5
    finally:
        c.close()


def test_fetch_delay_and_close_after_join_with_confluent_kafka(bt):
    """The same with librdkafka: its first JoinGroup's connection is closed after the join was
    handled, it reconnects and joins; with its Fetch answers 2 s late, a new record arrives 2 s
    after it was written."""
    produce_n(bt, 5)
    bt.control.add_rule(api="JoinGroup", group="cg", close="after", times=1)
    c = Consumer(
        {
            "bootstrap.servers": bt.bootstrap,
            "group.id": "cg",
            "client.id": "rd-reader",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    try:
        c.subscribe([TOPIC])
        values: list[bytes] = []
        deadline = time.monotonic() + 30
        while len(values) < 5 and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                values.append(m.value())
        assert values == [b"%d" % i for i in range(5)]
        assert bt.control.rules() == []
        assert [m["client_id"] for m in bt.control.group("cg")["members"]] == ["rd-reader"]
        # every Fetch waits 2 s (librdkafka keeps one fetch in flight: whichever is out when the
        # record is written, the record reaches the client at least 2 s later)
        rule = bt.control.add_rule(api="Fetch", client_id="^rd-reader$", delay_ms=2000)
        while bt.control.rules()[0]["fired"] == 0:
            assert c.poll(0.1) is None
        start = time.monotonic()
        produce_n(bt, 1)  # offset 5
        got = None
        while got is None and time.monotonic() - start < 30:
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                got = m
        waited = time.monotonic() - start
        assert got is not None and got.offset() == 5
        assert waited >= 2.0
        bt.control.remove_rule(rule["id"])
    finally:
        c.close()


def test_consumer_reads_everything_through_fetch_not_leader_twice(bt):
    produce_n(bt, 20)
    bt.control.add_rule(api="Fetch", topic=TOPIC, error="NOT_LEADER_OR_FOLLOWER", times=2)
    assert read_all(bt, 20) == [b"%d" % i for i in range(20)]
    assert bt.control.rules() == []
