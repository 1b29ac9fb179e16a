"""DescribeTopicPartitions (key 75, KIP-966): kafka-python's ``describe_topic_partitions`` pages
through the cursor as Kafka answers; a bad cursor is INVALID_REQUEST; the partition limit is capped by
``max.request.partition.size.limit``. The Java Admin's ``describeTopics`` (3.9 and 4.x) pages with it
in test_java_admin.py. librdkafka (confluent-kafka) describes topics with Metadata, not this API."""

from __future__ import annotations

import pytest

from broker.dispatch import acl
from broker.protocol.errors import ErrorCode
from broker.protocol.generated.describe_topic_partitions import (
    DescribeTopicPartitionsRequest,
    DescribeTopicPartitionsRequestCursor,
    TopicRequest,
)
from tests.support.wire import WireClient


@pytest.fixture
def kp_admin(broker):
    from kafka.admin import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=10000)
    yield admin
    admin.close()


def pages(admin, topics: list[str], limit: int) -> list[tuple[list[tuple[str, list[int]]], dict | None]]:
    out = []
    cursor = None
    while True:
        page = admin.describe_topic_partitions(topics, response_partition_limit=limit, cursor=cursor)
        out.append(
            (
                [(t["name"], [p["partition_index"] for p in t["partitions"]]) for t in page["topics"]],
                page["next_cursor"],
            )
        )
        cursor = page["next_cursor"]
        if cursor is None or len(out) > 10:
            return out


def test_kafka_python_pages_through_the_cursor(kp_admin, broker):
    for name, n in (("b", 3), ("a", 2), ("c", 1)):
        broker.call(broker.broker.create_topic, name, n)
    assert pages(kp_admin, ["c", "a", "b"], 2) == [
        ([("a", [0, 1])], {"topic_name": "b", "partition_index": 0}),
        ([("b", [0, 1])], {"topic_name": "b", "partition_index": 2}),
        ([("b", [2]), ("c", [0])], None),
    ]
    # every topic (an empty list), one page
    [(topics, cursor)] = pages(kp_admin, [], 100)
    assert topics == [("a", [0, 1]), ("b", [0, 1, 2]), ("c", [0])] and cursor is None

    page = kp_admin.describe_topic_partitions(["a", "missing", "bad/name"])
    by_name = {t["name"]: t for t in page["topics"]}
    assert [t["name"] for t in page["topics"]] == ["a", "bad/name", "missing"]  # name order
    a = by_name["a"]
    assert (a["error_code"], a["is_internal"], a["topic_authorized_operations"]) == (0, False, acl.TOPIC_OPS)
    assert a["topic_id"] == broker.broker.topics.get("a").topic_id
    assert a["partitions"][0] == {
        "error_code": 0,
        "partition_index": 0,
        "leader_id": 1,
        "leader_epoch": 0,
        "replica_nodes": [1],
        "isr_nodes": [1],
        "eligible_leader_replicas": None,  # kafka-python shows Kafka's empty ELR lists as None
        "last_known_elr": None,
        "offline_replicas": [],
    }
    assert by_name["missing"]["error_code"] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert by_name["bad/name"]["error_code"] == ErrorCode.INVALID_TOPIC_EXCEPTION


def call(broker, req: DescribeTopicPartitionsRequest):
    with WireClient(broker.port) as c:
        return c.call(75, 0, req)


def test_bad_cursors_are_invalid_requests(broker):
    broker.call(broker.broker.create_topic, "a", 2)
    for cursor in (
        DescribeTopicPartitionsRequestCursor("z", 0),
        DescribeTopicPartitionsRequestCursor("a", -1),
    ):
        resp = call(broker, DescribeTopicPartitionsRequest([TopicRequest("a")], 10, cursor))
        assert [(t.name, t.error_code, t.partitions) for t in resp.topics] == [
            ("a", ErrorCode.INVALID_REQUEST, [])
        ]
        assert resp.next_cursor is None
    # a cursor past the topic's last partition: the topic with no partitions, no next page
    resp = call(
        broker,
        DescribeTopicPartitionsRequest([TopicRequest("a")], 10, DescribeTopicPartitionsRequestCursor("a", 9)),
    )
    assert [(t.name, t.error_code, t.partitions) for t in resp.topics] == [("a", 0, [])]
    assert resp.next_cursor is None


def test_the_limit_is_capped_by_the_broker_and_at_least_one(broker_factory):
    b = broker_factory({"max.request.partition.size.limit": 3})
    b.call(b.broker.create_topic, "a", 5)
    resp = call(b, DescribeTopicPartitionsRequest([TopicRequest("a")], 100, None))
    assert [p.partition_index for p in resp.topics[0].partitions] == [0, 1, 2]
    assert (resp.next_cursor.topic_name, resp.next_cursor.partition_index) == ("a", 3)
    resp = call(b, DescribeTopicPartitionsRequest([TopicRequest("a")], -5, None))
    assert [p.partition_index for p in resp.topics[0].partitions] == [0]
