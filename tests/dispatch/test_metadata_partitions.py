"""Metadata's partition entries on a single node are built once per topic layout (broker/dispatch/
metadata.py ``partition_entries``) and follow every change of that layout: more partitions, a topic
deleted and created again under the same name, another broker in the same process."""

from __future__ import annotations

from broker.dispatch.metadata import _SINGLE_NODE_ENTRIES, partition_entries
from broker.protocol.generated.create_partitions import CreatePartitionsRequest, CreatePartitionsTopic
from broker.protocol.generated.delete_topics import DeleteTopicsRequest, DeleteTopicState
from broker.protocol.generated.metadata import MetadataRequest, MetadataRequestTopic

METADATA, DELETE_TOPICS, CREATE_PARTITIONS = 3, 20, 37


def metadata(node, *names, version=12):
    with node.client() as c:
        req = MetadataRequest(
            topics=[MetadataRequestTopic(name=n) for n in names], allow_auto_topic_creation=False
        )
        return {t.name: t for t in c.call(METADATA, version, req).topics}


def layout(topic):
    return [
        (
            p.error_code,
            p.partition_index,
            p.leader_id,
            p.leader_epoch,
            p.replica_nodes,
            p.isr_nodes,
            p.offline_replicas,
        )
        for p in topic.partitions
    ]


def test_entries_are_built_once_per_layout_and_follow_its_changes(node):
    b = node.broker
    b.create_topic("orders", 3)
    nodes, topics = b.services.nodes, b.services.topics
    first = partition_entries(nodes, topics, topics.get("orders"))
    assert partition_entries(nodes, topics, topics.get("orders")) is first  # no rebuild per request
    got = metadata(node, "orders")["orders"]
    assert layout(got) == [(0, i, b.node_id, 0, [b.node_id], [b.node_id], []) for i in range(3)]

    with node.client() as c:  # more partitions: a new layout
        req = CreatePartitionsRequest([CreatePartitionsTopic("orders", 5, None)], 10_000, False)
        assert c.call(CREATE_PARTITIONS, 3, req).results[0].error_code == 0
    assert [p.partition_index for p in metadata(node, "orders")["orders"].partitions] == [0, 1, 2, 3, 4]
    assert partition_entries(nodes, topics, topics.get("orders")) is not first

    old_id = got.topic_id
    with node.client() as c:  # deleted and created again with fewer partitions: its new id, its 2
        req = DeleteTopicsRequest(
            topics=[DeleteTopicState(name="orders")], topic_names=["orders"], timeout_ms=10_000
        )
        assert c.call(DELETE_TOPICS, 6, req).responses[0].error_code == 0
    b.create_topic("orders", 2)
    again = metadata(node, "orders")["orders"]
    assert again.topic_id != old_id
    assert [p.partition_index for p in again.partitions] == [0, 1]


def test_each_broker_in_a_process_answers_with_its_own_node(node_factory):
    a, b = node_factory(), node_factory({"node.id": 7})
    for n in (a, b):
        n.broker.create_topic("same-name", 2)
    assert {p.leader_id for p in metadata(a, "same-name")["same-name"].partitions} == {a.broker.node_id}
    assert {p.leader_id for p in metadata(b, "same-name")["same-name"].partitions} == {7}


def test_deleted_topics_entries_are_forgotten(node):
    b = node.broker
    for i in range(20):
        b.create_topic(f"t{i}", 1)
    metadata(node, *[f"t{i}" for i in range(20)])
    for i in range(20):
        b.delete_topic(f"t{i}")
    b.create_topic("late", 1)
    metadata(node, "late")
    assert set(_SINGLE_NODE_ENTRIES[b.services.nodes]) == {"late"}
