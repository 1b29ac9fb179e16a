"""Real admin clients (kafka-python, confluent-kafka, aiokafka) connect, negotiate versions, list
topics, describe the cluster and find the group coordinator. The Java Admin client is covered in
test_java_admin.py."""

from __future__ import annotations

import pytest

TIMEOUT_MS = 10000


def _create(broker, name, partitions):
    return broker.call(broker.broker.create_topic, name, partitions)


# ---------------------------------------------------------------- kafka-python


@pytest.fixture
def kp_admin(broker):
    from kafka.admin import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=TIMEOUT_MS)
    yield admin
    admin.close()


def test_kafka_python_negotiates_newest_versions(kp_admin, broker):
    from kafka.protocol.metadata import ApiVersionsRequest, FindCoordinatorRequest, MetadataRequest

    versions = kp_admin._manager.broker_version_data
    # kafka-python picks min(its max, our max) for every API we advertise
    assert versions.api_version(ApiVersionsRequest) == 4
    assert versions.api_version(MetadataRequest) == min(MetadataRequest.max_version, 13)
    assert versions.api_version(FindCoordinatorRequest) == 6


def test_kafka_python_lists_topics_and_describes_cluster(kp_admin, broker):
    assert kp_admin.list_topics() == []
    _create(broker, "alpha", 2)
    _create(broker, "beta", 1)
    assert sorted(kp_admin.list_topics()) == ["alpha", "beta"]
    cluster = kp_admin.describe_cluster()
    assert cluster["cluster_id"] == broker.broker.cluster_id
    assert cluster["controller_id"] == 1
    assert [(b["broker_id"], b["host"], b["port"]) for b in cluster["brokers"]] == [
        (1, "127.0.0.1", broker.port)
    ]
    described = {t["name"]: t for t in kp_admin.describe_topics(["alpha"])}
    parts = described["alpha"]["partitions"]
    assert sorted(p["partition_index"] for p in parts) == [0, 1]
    assert {p["leader_id"] for p in parts} == {1}
    assert described["alpha"]["topic_id"] == str(broker.broker.topics.get("alpha").topic_id)


def test_kafka_python_finds_group_coordinator(kp_admin, broker):
    coordinators = kp_admin._manager.run(kp_admin._find_coordinator_ids, ["orders-app", "audit-app"])
    assert coordinators == {"orders-app": 1, "audit-app": 1}


def test_kafka_python_producer_auto_creates_on_metadata(broker):
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, max_block_ms=TIMEOUT_MS)
    try:
        # the producer asks Metadata for the topic with allow_auto_topic_creation=True
        assert producer.partitions_for("auto-made") == {0}
    finally:
        producer.close()
    assert broker.broker.topics.get("auto-made").partitions == 1


# ---------------------------------------------------------------- confluent-kafka (librdkafka)


@pytest.fixture
def ck_admin(broker):
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": broker.bootstrap, "socket.timeout.ms": TIMEOUT_MS})


def test_confluent_lists_topics_and_describes_cluster(ck_admin, broker):
    _create(broker, "gamma", 3)
    md = ck_admin.list_topics(timeout=10)
    assert md.cluster_id == broker.broker.cluster_id
    assert md.controller_id == 1
    assert {b.id: (b.host, b.port) for b in md.brokers.values()} == {1: ("127.0.0.1", broker.port)}
    assert set(md.topics) == {"gamma"}
    assert sorted(md.topics["gamma"].partitions) == [0, 1, 2]
    assert {p.leader for p in md.topics["gamma"].partitions.values()} == {1}

    desc = ck_admin.describe_cluster(request_timeout=10).result()
    assert desc.cluster_id == broker.broker.cluster_id
    assert desc.controller.id == 1
    assert [(n.id, n.host, n.port) for n in desc.nodes] == [(1, "127.0.0.1", broker.port)]


def test_confluent_describe_topics_with_topic_ids(ck_admin, broker):
    from confluent_kafka import TopicCollection

    topic = _create(broker, "delta", 2)
    (fut,) = ck_admin.describe_topics(TopicCollection(["delta"]), request_timeout=10).values()
    desc = fut.result()
    assert desc.name == "delta"
    tid = desc.topic_id  # librdkafka prints ids in standard base64; compare the 128-bit value
    msb, lsb = tid.get_most_significant_bits() & (2**64 - 1), tid.get_least_significant_bits() & (2**64 - 1)
    assert (msb << 64) | lsb == topic.topic_id.int
    assert [(p.id, p.leader.id, [r.id for r in p.replicas]) for p in desc.partitions] == [
        (0, 1, [1]),
        (1, 1, [1]),
    ]


def test_confluent_finds_coordinator_via_consumer(broker):
    """librdkafka looks the group coordinator up as soon as a consumer with a group.id starts."""
    import logging

    from confluent_kafka import Consumer

    records: list[str] = []

    class Capture(logging.Handler):
        def emit(self, record):
            records.append(record.getMessage())

    logger = logging.getLogger("rdkafka-test")
    logger.addHandler(Capture())
    logger.setLevel(logging.DEBUG)
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": "coord-probe",
            "debug": "cgrp",
            "logger": logger,
        }
    )
    try:
        import time

        deadline = time.monotonic() + 15
        want = f"127.0.0.1:{broker.port}/1"
        while time.monotonic() < deadline:
            consumer.poll(0.1)
            if any("coordinator" in r.lower() and want in r for r in records):
                break
        found = [r for r in records if "coordinator" in r.lower() and want in r]
        assert found, "librdkafka never reported the coordinator; saw:\n" + "\n".join(records[-20:])
    finally:
        consumer.close()


# ---------------------------------------------------------------- aiokafka


async def test_aiokafka_admin_lists_and_describes(broker):
    from aiokafka.admin import AIOKafkaAdminClient

    _create(broker, "epsilon", 2)
    admin = AIOKafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=TIMEOUT_MS)
    await admin.start()
    try:
        assert await admin.list_topics() == ["epsilon"]
        cluster = await admin.describe_cluster()
        assert cluster["cluster_id"] == broker.broker.cluster_id
        assert cluster["controller_id"] == 1
        assert [(b["node_id"], b["host"], b["port"]) for b in cluster["brokers"]] == [
            (1, "127.0.0.1", broker.port)
        ]
        coordinator = await admin.find_coordinator("aio-group")
        assert coordinator == 1
    finally:
        await admin.close()
