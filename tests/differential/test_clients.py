"""Client-level differential tests: the same scenario code, written only against client libraries
(confluent-kafka, kafka-python and the Java kafka-clients 3.9 and 4.x; nothing of pykbroker's
internals), runs against pykbroker and against Apache Kafka, and what the application observes is
compared: produce/consume, a classic group resuming at committed offsets, a KIP-848 group, online
migration from a classic member, topic administration.

Each scenario returns an *outcome*: the facts a user of the client would check (records and their
offsets, committed offsets, group states and types, assignment shapes, admin results and error
codes), with what must differ left out (member ids, which member the assignor gives which partition).
The test asserts the outcome is right on its own terms and identical on both brokers; there is no
allowed-differences list at this layer. Names are unique per run (the brokers are session-long).
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
    ResourceType,
)
from kafka import KafkaConsumer, OffsetAndMetadata
from kafka import TopicPartition as KTopicPartition

from tests.differential import tally
from tests.support.java import json_lines, require_java

GUARD = 120.0  # hang guard for one wait (a loaded 2-core machine runs two brokers), never a timing assertion
BROKERS = ("pykbroker", "kafka")


@pytest.fixture(scope="module")
def bootstraps(our_broker: Any, real_kafka: Any) -> dict[str, str]:
    return {"pykbroker": our_broker.bootstrap, "kafka": real_kafka.bootstrap}


def both(bootstraps: dict[str, str], scenario: Callable[[str, str], dict], name: str) -> dict:
    """Run ``scenario(bootstrap, suffix)`` on both brokers; the outcomes must be equal."""
    slug = "".join(c if c.isalnum() else "-" for c in name)
    outcomes = {}
    for b in BROKERS:
        try:
            outcomes[b] = scenario(bootstraps[b], f"{slug}-{b}-{uuid.uuid4().hex[:6]}")
        except AssertionError as e:  # say which broker the scenario failed on
            raise AssertionError(f"{name}, on {b}: {e}") from e
    same = outcomes["pykbroker"] == outcomes["kafka"]
    tally.record("client", name, not same, False)
    assert same, f"{name}: pykbroker {outcomes['pykbroker']!r}\n  vs Kafka {outcomes['kafka']!r}"
    return outcomes["kafka"]


def wait_for(what: str, check: Callable[[], Any], timeout: float = GUARD) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        got = check()
        if got:
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


def create_topic(admin: AdminClient, topic: str, partitions: int, configs: dict | None = None) -> None:
    fs = admin.create_topics([NewTopic(topic, partitions, 1, config=configs or {})], operation_timeout=30)
    fs[topic].result(GUARD)
    wait_for(f"{topic} in metadata", lambda: topic in admin.list_topics(timeout=10).topics)


def produce(bootstrap: str, topic: str, records: list[tuple[int, bytes, bytes]]) -> list[tuple]:
    """Idempotent confluent-kafka producer; returns (key, partition, offset) per delivered record."""
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5})
    delivered: list[tuple] = []

    def report(err, msg):
        assert err is None, err
        delivered.append((msg.key(), msg.partition(), msg.offset()))

    for partition, key, value in records:
        producer.produce(topic, value, key, partition=partition, headers=[("h", key)], on_delivery=report)
    assert producer.flush(GUARD) == 0
    return sorted(delivered)


def classic_member(bootstrap: str, topic: str, **config: Any) -> KafkaConsumer:
    """A kafka-python classic-group member subscribed to ``topic`` once its metadata knows the topic.

    kafka-python 3.0.12 can lose a rejoin for good: a leader that first assigned from metadata
    without the topic (subscribed before its first Metadata answer) rejoins when the partitions
    appear; if that JoinGroup/SyncGroup straddles the end of a ``poll(timeout_ms)``, the next poll
    finds ``need_rejoin()`` false (the leader's assignment already updated its metadata snapshot,
    the first join cleared ``rejoin_needed``) and never collects the finished join: the assignment
    is never installed and heartbeats stay off. With the topic known before the first join there is
    no second join (10 ms polls against Kafka 4.3: 16 of 30 members stuck subscribing at
    construction, 0 of 30 this way)."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, **config)
    wait_for(f"{topic} in kafka-python's metadata", lambda: consumer.partitions_for_topic(topic))
    consumer.subscribe([topic])
    return consumer


def read_all(bootstrap: str, topic: str, partitions: int, expected: int) -> dict[int, list[tuple]]:
    """kafka-python, assigned to every partition from the beginning: (offset, key, value, headers)."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, consumer_timeout_ms=1000)
    try:
        consumer.assign([KTopicPartition(topic, p) for p in range(partitions)])
        consumer.seek_to_beginning()
        got: dict[int, list[tuple]] = {p: [] for p in range(partitions)}
        deadline = time.monotonic() + GUARD
        while sum(map(len, got.values())) < expected and time.monotonic() < deadline:
            for tp, msgs in consumer.poll(timeout_ms=500).items():
                got[tp.partition] += [(m.offset, m.key, m.value, list(m.headers)) for m in msgs]
        return got
    finally:
        consumer.close()


# ------------------------------------------------------------------------------------ scenarios


def test_produce_and_consume(bootstraps: dict[str, str]) -> None:
    def scenario(bootstrap: str, topic: str) -> dict:
        admin = AdminClient({"bootstrap.servers": bootstrap})
        create_topic(admin, topic, 3)
        records = [(i % 3, b"k%02d" % i, b"v%02d" % i) for i in range(30)]
        delivered = produce(bootstrap, topic, records)
        consumed = read_all(bootstrap, topic, 3, len(records))
        assert sorted((k, p, o) for p, msgs in consumed.items() for o, k, _v, _h in msgs) == delivered
        probe = Consumer({"bootstrap.servers": bootstrap, "group.id": f"{topic}-w"})
        watermarks = [probe.get_watermark_offsets(TopicPartition(topic, p), timeout=10) for p in range(3)]
        probe.close()
        return {"delivered": delivered, "consumed": consumed, "watermarks": watermarks}

    outcome = both(bootstraps, scenario, "produce/consume")
    assert outcome["watermarks"] == [(0, 10)] * 3


def test_classic_group_resumes_at_committed_offsets(bootstraps: dict[str, str]) -> None:
    def scenario(bootstrap: str, name: str) -> dict:
        topic, group = name, f"{name}-g"
        admin = AdminClient({"bootstrap.servers": bootstrap})
        create_topic(admin, topic, 4)
        produce(bootstrap, topic, [(i % 4, b"k%d" % i, b"v%d" % i) for i in range(20)])

        def member() -> KafkaConsumer:
            return classic_member(
                bootstrap, topic, group_id=group, enable_auto_commit=False, auto_offset_reset="earliest"
            )

        first = member()
        wait_for("an assignment", lambda: first.poll(timeout_ms=200) or first.assignment())
        assigned = sorted(tp.partition for tp in first.assignment())
        first.commit({KTopicPartition(topic, p): OffsetAndMetadata(3, "m", -1) for p in range(4)})
        first.close()
        desc = admin.describe_consumer_groups([group])[group].result(GUARD)
        second = member()
        starts: dict[int, int] = {}

        def first_offsets() -> bool:
            for tp, msgs in second.poll(timeout_ms=200).items():
                starts.setdefault(tp.partition, msgs[0].offset)
            return len(starts) == 4

        wait_for("records from every partition", first_offsets)
        second.close()
        offsets = admin.list_consumer_group_offsets([_group_request(group)])[group].result(GUARD)
        return {
            "assigned": assigned,
            "state after close": str(desc.state),
            "type": str(desc.type),
            "starts": dict(sorted(starts.items())),
            # (not the metadata: confluent-kafka 2.16's list_consumer_group_offsets returns it with
            # stray bytes after the string, from either broker)
            "committed": sorted((tp.partition, tp.offset) for tp in offsets.topic_partitions),
        }

    outcome = both(bootstraps, scenario, "classic group")
    assert outcome["assigned"] == [0, 1, 2, 3] and outcome["starts"] == {p: 3 for p in range(4)}


def test_consumer_protocol_group_shares_partitions_and_commits(bootstraps: dict[str, str]) -> None:
    def scenario(bootstrap: str, name: str) -> dict:
        topic, group = name, f"{name}-g"
        admin = AdminClient({"bootstrap.servers": bootstrap})
        create_topic(admin, topic, 4)
        produce(bootstrap, topic, [(i % 4, b"k%d" % i, b"v%d" % i) for i in range(40)])
        members = [_kip848_member(bootstrap, group, topic) for _ in range(2)]
        try:
            owned = _poll_until_split(members, 4)
            for m, mine in zip(members, owned, strict=True):
                m.commit(offsets=[TopicPartition(topic, p, 5) for p in sorted(mine)], asynchronous=False)
            desc = admin.describe_consumer_groups([group])[group].result(GUARD)
            sizes = sorted(len(m.assignment.topic_partitions) for m in desc.members)
        finally:
            for m in members:
                m.close()
        offsets = admin.list_consumer_group_offsets([_group_request(group)])[group].result(GUARD)
        committed = sorted(tp.offset for tp in offsets.topic_partitions)
        return {
            "partitions per member": sorted(len(o) for o in owned),
            "described sizes": sizes,
            "state": str(desc.state),
            "type": str(desc.type),
            "committed": committed,
        }

    outcome = both(bootstraps, scenario, "consumer group")
    assert outcome["partitions per member"] == [2, 2] and outcome["type"].endswith("CONSUMER")
    assert outcome["committed"] == [5, 5, 5, 5]


def test_online_migration_from_a_classic_member(bootstraps: dict[str, str]) -> None:
    """A live classic (kafka-python) member, then a KIP-848 (confluent-kafka) member joins the same
    group: the group becomes a consumer group and the two share the partitions; when the classic
    member leaves, the other takes everything."""

    def scenario(bootstrap: str, name: str) -> dict:
        topic, group = name, f"{name}-g"
        admin = AdminClient({"bootstrap.servers": bootstrap})
        create_topic(admin, topic, 4)
        classic = classic_member(bootstrap, topic, group_id=group, auto_offset_reset="earliest")
        stop = threading.Event()
        classic_owned: list[list[int]] = []

        def run_classic() -> None:
            while not stop.is_set():
                classic.poll(timeout_ms=100)
                classic_owned.append(sorted(tp.partition for tp in classic.assignment()))
            classic.close()

        thread = threading.Thread(target=run_classic, daemon=True)
        thread.start()
        wait_for(
            "the classic member's assignment", lambda: classic_owned and classic_owned[-1] == [0, 1, 2, 3]
        )
        modern = _kip848_member(bootstrap, group, topic)
        try:

            def split() -> bool:
                modern.poll(0.1)
                mine = {tp.partition for tp in modern.assignment()}
                return (
                    bool(mine)
                    and classic_owned[-1]
                    and not mine & set(classic_owned[-1])
                    and (mine | set(classic_owned[-1]) == {0, 1, 2, 3})
                )

            wait_for("the partitions shared", split)
            during = admin.describe_consumer_groups([group])[group].result(GUARD)
            stop.set()
            thread.join(GUARD)

            def takes_all() -> bool:
                modern.poll(0.1)
                return sorted(tp.partition for tp in modern.assignment()) == [0, 1, 2, 3]

            wait_for("the KIP-848 member owning everything", takes_all)
            after = admin.describe_consumer_groups([group])[group].result(GUARD)
        finally:
            modern.close()
        return {
            "type while shared": str(during.type),
            "members while shared": len(during.members),
            "type after": str(after.type),
            "members after": len(after.members),
        }

    outcome = both(bootstraps, scenario, "migration")
    assert outcome["type while shared"].endswith("CONSUMER") and outcome["members after"] == 1


def test_topic_administration(bootstraps: dict[str, str]) -> None:
    def scenario(bootstrap: str, topic: str) -> dict:
        admin = AdminClient({"bootstrap.servers": bootstrap})
        create_topic(admin, topic, 2, {"retention.ms": "1000", "cleanup.policy": "compact"})
        again = _error_of(lambda: admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(GUARD))
        resource = ConfigResource(ResourceType.TOPIC, topic)
        configs = admin.describe_configs([resource])[resource].result(GUARD)
        picked = {
            k: (configs[k].value, ConfigSource(configs[k].source).name)
            for k in ("retention.ms", "cleanup.policy", "segment.bytes", "max.message.bytes")
        }
        admin.create_partitions([NewPartitions(topic, 4)])[topic].result(GUARD)
        wait_for(
            "4 partitions", lambda: len(admin.list_topics(topic, timeout=10).topics[topic].partitions) == 4
        )
        shrink = _error_of(lambda: admin.create_partitions([NewPartitions(topic, 3)])[topic].result(GUARD))
        admin.delete_topics([topic], operation_timeout=30)[topic].result(GUARD)
        wait_for("the topic gone", lambda: topic not in admin.list_topics(timeout=10).topics)
        gone = _error_of(lambda: admin.describe_configs([resource])[resource].result(GUARD))
        return {"create again": again, "configs": picked, "shrink": shrink, "describe deleted": gone}

    outcome = both(bootstraps, scenario, "topic admin")
    assert outcome["create again"] == "TOPIC_ALREADY_EXISTS" and outcome["shrink"] == "INVALID_PARTITIONS"
    assert outcome["configs"]["retention.ms"] == ("1000", "DYNAMIC_TOPIC_CONFIG")


# -------------------------------------------------------------------------------------- helpers


def _group_request(group: str) -> ConsumerGroupTopicPartitions:
    return ConsumerGroupTopicPartitions(group)


def _kip848_member(bootstrap: str, group: str, topic: str) -> Consumer:
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "group.protocol": "consumer",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    c.subscribe([topic])
    return c


def _poll_until_split(members: list[Consumer], partitions: int) -> list[set[int]]:
    def split() -> list[set[int]] | None:
        for m in members:
            m.poll(0.1)
        owned = [{tp.partition for tp in m.assignment()} for m in members]
        disjoint = sum(map(len, owned)) == len(set().union(*owned)) == partitions
        balanced = max(map(len, owned)) - min(map(len, owned)) <= 1  # not a reconciliation midway
        return owned if disjoint and balanced and all(owned) else None

    return wait_for("the partitions split between the members", split)


def _error_of(call: Callable[[], Any]) -> str | None:
    try:
        call()
    except KafkaException as e:
        return e.args[0].name()
    return None


@pytest.mark.java
@pytest.mark.usefixtures("java_clients")
def test_java_producer_and_consumer(bootstraps: dict[str, str]) -> None:
    """kafka-clients (3.9 and 4.x) through tests/java/ProduceConsumeProbe.java: keyed records with
    known timestamps produced idempotently, read back, and ListOffsets by time."""
    java = require_java()
    n, base_ts = 500, int(time.time() * 1000) - 60_000
    stamps = [base_ts - 1000, base_ts, base_ts + 250, base_ts + n]

    def scenario(bootstrap: str, topic: str) -> dict:
        create_topic(AdminClient({"bootstrap.servers": bootstrap}), topic, 4)
        commands = [
            f"produce {topic} {n} {base_ts}",
            f"consume {topic} {n}",
            f"offsets {topic} {','.join(map(str, stamps))}",
        ]
        result = java.run("ProduceConsumeProbe", [bootstrap, *commands], timeout=120)
        lines = json_lines(result.stdout)
        assert result.returncode == 0 and [line.get("cmd") for line in lines] == [
            "produce",
            "consume",
            "offsets",
        ], result.stderr[-3000:]
        assert not [line for line in lines if "error" in line], lines
        produced, consumed, offsets = lines
        return {
            "idempotent": (produced["idempotence"], produced["acksConfig"]),
            "acks": produced["acks"],
            "records": sorted(map(tuple, consumed["records"])),
            "offsets": {k: v for k, v in offsets.items() if k != "cmd"},
        }

    outcome = both(bootstraps, scenario, "java produce/consume")
    assert outcome["idempotent"] == (True, "-1") and len(outcome["records"]) == n
