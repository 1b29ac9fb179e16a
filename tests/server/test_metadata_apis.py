"""Metadata, FindCoordinator and DescribeCluster at every version, over real TCP."""

from __future__ import annotations

import uuid

import pytest

from broker.dispatch import acl
from broker.protocol.errors import ErrorCode
from broker.protocol.generated.describe_cluster import DescribeClusterRequest
from broker.protocol.generated.find_coordinator import FindCoordinatorRequest
from broker.protocol.generated.metadata import MetadataRequest, MetadataRequestTopic
from tests.support.wire import WireClient

METADATA, FIND_COORDINATOR, DESCRIBE_CLUSTER = 3, 10, 60


def _req_topics(names):
    return [MetadataRequestTopic(name=n) for n in names]


@pytest.mark.parametrize("version", range(0, 14))
def test_metadata_every_version_describes_this_node_and_auto_creates(broker, version):
    with WireClient(broker.port) as c:
        resp = c.call(
            METADATA, version, MetadataRequest(topics=_req_topics(["orders"]), allow_auto_topic_creation=True)
        )
    b = broker.broker
    assert [(x.node_id, x.host, x.port) for x in resp.brokers] == [(1, "127.0.0.1", broker.port)]
    if version >= 1:
        assert resp.controller_id == 1
    if version >= 2:
        assert resp.cluster_id == b.cluster_id
    (t,) = resp.topics
    assert (t.error_code, t.name) == (0, "orders")
    assert [(p.partition_index, p.leader_id, p.replica_nodes, p.isr_nodes) for p in t.partitions] == [
        (0, 1, [1], [1])
    ]
    if version >= 10:
        assert t.topic_id == b.topics.get("orders").topic_id != uuid.UUID(int=0)


def test_metadata_all_topics_null_vs_empty(broker):
    broker.call(broker.broker.create_topic, "a", 2)
    broker.call(broker.broker.create_topic, "b", 1)
    with WireClient(broker.port) as c:
        v0_all = c.call(METADATA, 0, MetadataRequest(topics=[]))
        v1_none = c.call(METADATA, 1, MetadataRequest(topics=[]))
        v1_all = c.call(METADATA, 1, MetadataRequest(topics=None))
        v12_all = c.call(METADATA, 12, MetadataRequest(topics=None))
    assert sorted(t.name for t in v0_all.topics) == ["a", "b"]
    assert v1_none.topics == []
    assert sorted((t.name, len(t.partitions)) for t in v1_all.topics) == [("a", 2), ("b", 1)]
    assert sorted(t.name for t in v12_all.topics) == ["a", "b"]


def test_metadata_auto_create_respects_request_flag(broker):
    with WireClient(broker.port) as c:
        resp = c.call(
            METADATA, 4, MetadataRequest(topics=_req_topics(["nope"]), allow_auto_topic_creation=False)
        )
    assert resp.topics[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert broker.broker.topics.get("nope") is None


def test_metadata_auto_create_respects_broker_config(broker_factory):
    b = broker_factory({"auto.create.topics.enable": "false"})
    with WireClient(b.port) as c:
        resp = c.call(METADATA, 1, MetadataRequest(topics=_req_topics(["nope"])))
    assert resp.topics[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_metadata_auto_create_uses_num_partitions(broker_factory):
    b = broker_factory({"num.partitions": "4"})
    with WireClient(b.port) as c:
        resp = c.call(
            METADATA, 9, MetadataRequest(topics=_req_topics(["wide"]), allow_auto_topic_creation=True)
        )
    assert [p.partition_index for p in resp.topics[0].partitions] == [0, 1, 2, 3]


@pytest.mark.parametrize("name", ["bad name", "x" * 250, "..", "tab\there", "ü"])
def test_metadata_invalid_topic_name(broker, name):
    with WireClient(broker.port) as c:
        resp = c.call(
            METADATA, 12, MetadataRequest(topics=_req_topics([name]), allow_auto_topic_creation=True)
        )
    assert resp.topics[0].error_code == ErrorCode.INVALID_TOPIC_EXCEPTION
    assert broker.broker.topics.get(name) is None


def test_metadata_lookup_by_topic_id(broker):
    t = broker.call(broker.broker.create_topic, "by-id", 1)
    unknown = uuid.uuid4()
    with WireClient(broker.port) as c:
        resp = c.call(
            METADATA,
            12,
            MetadataRequest(
                topics=[
                    MetadataRequestTopic(topic_id=t.topic_id, name=None),
                    MetadataRequestTopic(topic_id=unknown, name=None),
                ]
            ),
        )
    found, missing = resp.topics
    assert (found.error_code, found.name, found.topic_id) == (0, "by-id", t.topic_id)
    assert (missing.error_code, missing.name, missing.topic_id) == (ErrorCode.UNKNOWN_TOPIC_ID, None, unknown)


def test_metadata_authorized_operations_when_asked(broker):
    broker.call(broker.broker.create_topic, "ops", 1)
    with WireClient(broker.port) as c:
        asked = c.call(
            METADATA,
            10,
            MetadataRequest(
                topics=None,
                include_cluster_authorized_operations=True,
                include_topic_authorized_operations=True,
            ),
        )
        not_asked = c.call(METADATA, 10, MetadataRequest(topics=None))
    assert asked.cluster_authorized_operations == acl.CLUSTER_OPS
    assert asked.topics[0].topic_authorized_operations == acl.TOPIC_OPS
    assert not_asked.cluster_authorized_operations == acl.NOT_REQUESTED
    assert not_asked.topics[0].topic_authorized_operations == acl.NOT_REQUESTED


def test_cluster_id_and_topic_ids_survive_restart(broker_factory, tmp_path):
    data = tmp_path / "persist"
    first = broker_factory(data_dir=data)
    topic = first.call(first.broker.create_topic, "keep", 3)
    cluster_id = first.broker.cluster_id
    first.stop()
    second = broker_factory(data_dir=data)
    with WireClient(second.port) as c:
        resp = c.call(METADATA, 12, MetadataRequest(topics=None))
    assert resp.cluster_id == cluster_id
    assert [(t.name, t.topic_id, len(t.partitions)) for t in resp.topics] == [("keep", topic.topic_id, 3)]


@pytest.mark.parametrize("version", range(0, 4))
def test_find_coordinator_single_key(broker, version):
    with WireClient(broker.port) as c:
        resp = c.call(FIND_COORDINATOR, version, FindCoordinatorRequest(key="group-a", key_type=0))
    assert (resp.error_code, resp.node_id, resp.host, resp.port) == (0, 1, "127.0.0.1", broker.port)


@pytest.mark.parametrize("version", range(4, 7))
def test_find_coordinator_batched_keys(broker, version):
    with WireClient(broker.port) as c:
        groups = c.call(
            FIND_COORDINATOR, version, FindCoordinatorRequest(key_type=0, coordinator_keys=["g1", "g2"])
        )
        txns = c.call(
            FIND_COORDINATOR, version, FindCoordinatorRequest(key_type=1, coordinator_keys=["tx", ""])
        )
        bad = c.call(FIND_COORDINATOR, version, FindCoordinatorRequest(key_type=7, coordinator_keys=["g"]))
    assert [(x.key, x.error_code, x.node_id, x.port) for x in groups.coordinators] == [
        ("g1", 0, 1, broker.port),
        ("g2", 0, 1, broker.port),
    ]
    # an empty transactional id has a coordinator too, as in Kafka (InitProducerId refuses it)
    assert [(x.key, x.error_code, x.node_id) for x in txns.coordinators] == [("tx", 0, 1), ("", 0, 1)]
    assert bad.coordinators[0].error_code == ErrorCode.INVALID_REQUEST


def test_find_coordinator_unknown_key_type_v1(broker):
    with WireClient(broker.port) as c:
        resp = c.call(FIND_COORDINATOR, 1, FindCoordinatorRequest(key="g", key_type=5))
    assert resp.error_code == ErrorCode.INVALID_REQUEST and resp.node_id == -1


@pytest.mark.parametrize("version", range(0, 3))
def test_describe_cluster(broker, version):
    with WireClient(broker.port) as c:
        resp = c.call(
            DESCRIBE_CLUSTER,
            version,
            DescribeClusterRequest(include_cluster_authorized_operations=True, endpoint_type=1),
        )
    assert resp.error_code == 0
    assert resp.cluster_id == broker.broker.cluster_id and resp.controller_id == 1
    assert [(x.broker_id, x.host, x.port) for x in resp.brokers] == [(1, "127.0.0.1", broker.port)]
    assert resp.cluster_authorized_operations == acl.CLUSTER_OPS


def test_describe_cluster_controller_endpoints_unsupported(broker):
    # as Kafka's broker: controllers asked of a broker endpoint is a mismatch, other types unsupported
    with WireClient(broker.port) as c:
        resp = c.call(DESCRIBE_CLUSTER, 1, DescribeClusterRequest(endpoint_type=2))
        other = c.call(DESCRIBE_CLUSTER, 1, DescribeClusterRequest(endpoint_type=9))
    assert resp.error_code == ErrorCode.MISMATCHED_ENDPOINT_TYPE and resp.endpoint_type == 1
    assert other.error_code == ErrorCode.UNSUPPORTED_ENDPOINT_TYPE and other.endpoint_type == 1
