"""What each handler checks with an authorizer (Kafka's KafkaApis checks and error codes), through the
request pipeline in-process, with the connection's principal set as SASL would set it."""

from __future__ import annotations

import pytest

from broker.dispatch import acl as bits
from broker.dispatch.registry import ClientInfo
from broker.log.records import simple_batch
from broker.protocol.errors import ErrorCode
from broker.protocol.generated.create_acls import AclCreation, CreateAclsRequest
from broker.protocol.generated.delete_topics import DeleteTopicsRequest, DeleteTopicState
from broker.protocol.generated.describe_acls import DescribeAclsRequest
from broker.protocol.generated.describe_cluster import DescribeClusterRequest
from broker.protocol.generated.describe_configs import DescribeConfigsRequest, DescribeConfigsResource
from broker.protocol.generated.describe_groups import DescribeGroupsRequest
from broker.protocol.generated.describe_log_dirs import DescribeLogDirsRequest
from broker.protocol.generated.fetch import FetchPartition, FetchRequest, FetchTopic
from broker.protocol.generated.find_coordinator import FindCoordinatorRequest
from broker.protocol.generated.init_producer_id import InitProducerIdRequest
from broker.protocol.generated.list_groups import ListGroupsRequest
from broker.protocol.generated.list_offsets import ListOffsetsPartition, ListOffsetsRequest, ListOffsetsTopic
from broker.protocol.generated.metadata import MetadataRequest, MetadataRequestTopic
from broker.protocol.generated.offset_commit import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from broker.protocol.generated.offset_fetch import (
    OffsetFetchRequest,
    OffsetFetchRequestGroup,
    OffsetFetchRequestTopics,
)
from broker.protocol.generated.produce import PartitionProduceData, ProduceRequest, TopicProduceData
from broker.security.authorizer import (
    ALL,
    ALLOW,
    ALTER_CONFIGS,
    CLUSTER,
    CLUSTER_NAME,
    CREATE,
    DELETE,
    DENY,
    DESCRIBE,
    GROUP,
    LITERAL,
    PREFIXED,
    READ,
    TOPIC,
    WRITE,
    AclBinding,
)
from tests.support.inprocess import ConnectionClosed

ADMIN, ALICE = "User:admin", "User:alice"
CONFIG = {"authorizer.class.name": "acl", "super.users": ADMIN, "group.initial.rebalance.delay.ms": 0}


def client(principal: str) -> ClientInfo:
    return ClientInfo(peer="10.1.2.3:5555", principal=principal)


@pytest.fixture
def node(node_factory):
    n = node_factory(CONFIG)
    for t in ("a", "b"):
        n.broker.create_topic(t, 1)
    n.req = lambda principal, key, version, body: n.request(key, version, body, client(principal))  # type: ignore[attr-defined]
    n.allow = lambda *acls: n.broker.acls.create(  # type: ignore[attr-defined]
        [AclBinding(rt, name, pt, ALICE, "*", op, perm) for rt, name, pt, op, perm in acls]
    )
    return n


def produce(node, principal, topic="a"):
    body = ProduceRequest(
        None,
        1,
        5000,
        [TopicProduceData(topic, partition_data=[PartitionProduceData(0, simple_batch([b"v"]))])],
    )
    return node.req(principal, 0, 9, body).responses[0].partition_responses[0].error_code


def fetch(node, principal, topic="a"):
    body = FetchRequest(
        replica_id=-1,
        max_wait_ms=0,
        min_bytes=0,
        max_bytes=1 << 20,
        isolation_level=0,
        session_id=0,
        session_epoch=-1,
        topics=[
            FetchTopic(
                topic=topic,
                partitions=[FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1 << 20)],
            )
        ],
        forgotten_topics_data=[],
        rack_id="",
    )
    return node.req(principal, 1, 12, body).responses[0].partitions[0].error_code


def list_offsets(node, principal, topic="a"):
    body = ListOffsetsRequest(
        replica_id=-1,
        isolation_level=0,
        topics=[ListOffsetsTopic(topic, [ListOffsetsPartition(0, -1, -1, 1)])],
    )
    return node.req(principal, 2, 7, body).topics[0].partitions[0].error_code


def test_produce_fetch_and_list_offsets_need_their_operations(node):
    assert produce(node, ADMIN) == 0
    assert produce(node, ALICE) == ErrorCode.TOPIC_AUTHORIZATION_FAILED
    # refused before its existence is checked: the name discloses nothing
    assert produce(node, ALICE, "nonexistent") == ErrorCode.TOPIC_AUTHORIZATION_FAILED
    assert produce(node, ADMIN, "nonexistent") == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert fetch(node, ALICE) == list_offsets(node, ALICE) == ErrorCode.TOPIC_AUTHORIZATION_FAILED
    node.allow((TOPIC, "a", LITERAL, DESCRIBE, ALLOW))
    assert list_offsets(node, ALICE) == 0
    assert fetch(node, ALICE) == ErrorCode.TOPIC_AUTHORIZATION_FAILED
    node.allow((TOPIC, "a", LITERAL, READ, ALLOW), (TOPIC, "a", PREFIXED, WRITE, ALLOW))
    assert fetch(node, ALICE) == 0
    assert produce(node, ALICE) == 0


def test_metadata_hides_and_refuses_topics_and_fills_authorized_operations(node):
    node.allow((TOPIC, "a", LITERAL, READ, ALLOW))
    md = node.req(ALICE, 3, 12, MetadataRequest(None, False, False, True))
    assert [(t.name, t.topic_authorized_operations) for t in md.topics] == [
        ("a", (1 << READ) | (1 << DESCRIBE))
    ]
    md = node.req(ADMIN, 3, 12, MetadataRequest(None, False, False, True))
    assert {t.name: t.topic_authorized_operations for t in md.topics} == {
        "a": bits.TOPIC_OPS,
        "b": bits.TOPIC_OPS,
    }
    b_id = next(t.topic_id for t in md.topics if t.name == "b")
    md = node.req(
        ALICE,
        3,
        12,
        MetadataRequest(
            [MetadataRequestTopic(name="b"), MetadataRequestTopic(name=None, topic_id=b_id)], False
        ),
    )
    assert [(t.error_code, t.name, t.topic_id) for t in md.topics] == [
        (ErrorCode.TOPIC_AUTHORIZATION_FAILED, "b", md.topics[0].topic_id),
        (ErrorCode.TOPIC_AUTHORIZATION_FAILED, None, b_id),  # topic ids are not secret
    ]
    assert md.topics[0].topic_id.int == 0
    # auto-creation needs CREATE (on the cluster or the topic) besides DESCRIBE
    node.allow((TOPIC, "new-", PREFIXED, DESCRIBE, ALLOW))
    md = node.req(ALICE, 3, 12, MetadataRequest([MetadataRequestTopic(name="new-1")], True))
    assert md.topics[0].error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED
    assert node.broker.topics.get("new-1") is None
    node.allow((TOPIC, "new-", PREFIXED, CREATE, ALLOW))
    md = node.req(ALICE, 3, 12, MetadataRequest([MetadataRequestTopic(name="new-1")], True))
    assert md.topics[0].error_code == 0 and node.broker.topics.get("new-1") is not None


def commit(node, principal, group, *topics):
    body = OffsetCommitRequest(
        group,
        -1,
        "",
        None,
        -1,
        [OffsetCommitRequestTopic(t, partitions=[OffsetCommitRequestPartition(0, 1)]) for t in topics],
    )
    return [(t.name, t.partitions[0].error_code) for t in node.req(principal, 8, 2, body).topics]


def test_offset_commit_and_fetch(node):
    assert commit(node, ALICE, "g", "a", "b") == [
        ("a", ErrorCode.GROUP_AUTHORIZATION_FAILED),
        ("b", ErrorCode.GROUP_AUTHORIZATION_FAILED),
    ]
    node.allow((GROUP, "g", LITERAL, READ, ALLOW), (TOPIC, "a", LITERAL, READ, ALLOW))
    assert sorted(commit(node, ALICE, "g", "a", "b")) == [
        ("a", 0),
        ("b", ErrorCode.TOPIC_AUTHORIZATION_FAILED),
    ]
    assert commit(node, ADMIN, "g", "b") == [("b", 0)]

    def fetch_offsets(principal, group, topics):
        body = OffsetFetchRequest(
            groups=[OffsetFetchRequestGroup(group, None, -1, topics)], require_stable=False
        )
        g = node.req(principal, 9, 9, body).groups[0]
        return g.error_code, sorted(
            (t.name, t.partitions[0].error_code, t.partitions[0].committed_offset) for t in g.topics
        )

    # READ on the group implies DESCRIBE; "b" is left out of an all-offsets fetch, refused when named
    assert fetch_offsets(ALICE, "g", None) == (0, [("a", 0, 1)])
    named = [
        OffsetFetchRequestTopics("a", partition_indexes=[0]),
        OffsetFetchRequestTopics("b", partition_indexes=[0]),
    ]
    assert fetch_offsets(ALICE, "g", named) == (
        0,
        [("a", 0, 1), ("b", ErrorCode.TOPIC_AUTHORIZATION_FAILED, -1)],
    )
    assert fetch_offsets(ADMIN, "g", None) == (0, [("a", 0, 1), ("b", 0, 1)])
    assert fetch_offsets(ALICE, "other", None) == (ErrorCode.GROUP_AUTHORIZATION_FAILED, [])


def test_group_describe_list_and_find_coordinator(node):
    commit(node, ADMIN, "g1", "a")
    commit(node, ADMIN, "g2", "a")
    node.allow((GROUP, "g1", LITERAL, DELETE, ALLOW))
    d = node.req(ALICE, 15, 5, DescribeGroupsRequest(["g1", "g2"], True)).groups
    assert [(g.group_id, g.error_code, g.authorized_operations) for g in d] == [
        ("g1", 0, (1 << DELETE) | (1 << DESCRIBE)),
        ("g2", ErrorCode.GROUP_AUTHORIZATION_FAILED, bits.NOT_REQUESTED),
    ]
    listed = node.req(ALICE, 16, 4, ListGroupsRequest(states_filter=[])).groups
    assert [g.group_id for g in listed] == ["g1"]
    assert [g.group_id for g in node.req(ADMIN, 16, 4, ListGroupsRequest(states_filter=[])).groups] == [
        "g1",
        "g2",
    ]
    fc = node.req(
        ALICE, 10, 4, FindCoordinatorRequest(key_type=0, coordinator_keys=["g1", "g2"])
    ).coordinators
    assert [(c.key, c.error_code) for c in fc] == [("g1", 0), ("g2", ErrorCode.GROUP_AUTHORIZATION_FAILED)]
    fc = node.req(ALICE, 10, 4, FindCoordinatorRequest(key_type=1, coordinator_keys=["tx"])).coordinators
    assert fc[0].error_code == ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED


def test_delete_topics(node):
    node.allow((TOPIC, "a", LITERAL, DESCRIBE, ALLOW))
    body = DeleteTopicsRequest(
        [DeleteTopicState("a"), DeleteTopicState("b"), DeleteTopicState("zz")], [], 5000
    )
    out = node.req(ALICE, 20, 6, body).responses
    assert [(r.name, r.error_code) for r in out] == [
        ("a", ErrorCode.TOPIC_AUTHORIZATION_FAILED),  # may describe, not delete
        ("b", ErrorCode.TOPIC_AUTHORIZATION_FAILED),  # may not describe: existence not disclosed
        ("zz", ErrorCode.TOPIC_AUTHORIZATION_FAILED),
    ]
    node.allow((TOPIC, "a", LITERAL, DELETE, ALLOW))
    out = node.req(ALICE, 20, 6, DeleteTopicsRequest([DeleteTopicState("a")], [], 5000)).responses
    assert out[0].error_code == 0 and node.broker.topics.get("a") is None


def test_configs_and_cluster_apis(node):
    body = DescribeConfigsRequest(
        [
            DescribeConfigsResource(2, "a", None),
            DescribeConfigsResource(4, "1", None),
            DescribeConfigsResource(32, "g", None),
        ],
        False,
        False,
    )
    res = node.req(ALICE, 32, 4, body).results
    assert [r.error_code for r in res] == [
        ErrorCode.TOPIC_AUTHORIZATION_FAILED,
        ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
        ErrorCode.GROUP_AUTHORIZATION_FAILED,
    ]
    node.allow((TOPIC, "a", LITERAL, ALTER_CONFIGS, ALLOW))  # implies DESCRIBE_CONFIGS
    assert node.req(ALICE, 32, 4, body).results[0].error_code == 0
    dld = node.req(ALICE, 35, 4, DescribeLogDirsRequest(topics=None))
    assert dld.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED and dld.results == []
    dc = node.req(ALICE, 60, 1, DescribeClusterRequest(True, 1))
    assert dc.error_code == 0 and dc.cluster_authorized_operations == 0
    node.allow((CLUSTER, CLUSTER_NAME, LITERAL, DESCRIBE, ALLOW))
    dc = node.req(ALICE, 60, 1, DescribeClusterRequest(True, 1))
    assert dc.cluster_authorized_operations == 1 << DESCRIBE
    assert (
        node.req(ADMIN, 60, 1, DescribeClusterRequest(True, 1)).cluster_authorized_operations
        == bits.CLUSTER_OPS
    )
    assert node.req(ALICE, 35, 4, DescribeLogDirsRequest(topics=None)).error_code == 0


def test_idempotent_producers_need_idempotent_write_or_write_on_some_topic(node):
    body = InitProducerIdRequest(None, -1, -1, -1)
    assert node.req(ALICE, 22, 4, body).error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    node.allow((TOPIC, "x-", PREFIXED, WRITE, ALLOW))
    assert node.req(ALICE, 22, 4, body).error_code == 0
    node.allow((TOPIC, "x", PREFIXED, ALL, DENY))  # a DENY on a prefix of the only ALLOW
    assert node.req(ALICE, 22, 4, body).error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED


def test_acl_apis(node, node_factory):
    creation = AclCreation(TOPIC, "a", LITERAL, ALICE, "*", READ, ALLOW)
    assert node.req(ALICE, 30, 3, CreateAclsRequest([creation])).results[0].error_code == (
        ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    )
    assert node.req(ADMIN, 30, 3, CreateAclsRequest([creation])).results[0].error_code == 0
    describe = DescribeAclsRequest(1, None, 1, None, None, 1, 1)
    assert node.req(ALICE, 29, 3, describe).error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    res = node.req(ADMIN, 29, 3, describe).resources
    assert [
        (r.resource_type, r.resource_name, r.pattern_type, [a.principal for a in r.acls]) for r in res
    ] == [(TOPIC, "a", LITERAL, [ALICE])]
    # v0: no pattern type on the wire, LITERAL
    assert (
        node.req(ADMIN, 29, 0, DescribeAclsRequest(TOPIC, "a", 3, None, None, 1, 1))
        .resources[0]
        .resource_name
        == "a"
    )
    # UNKNOWN (0) codes: Kafka cannot parse the request and closes the connection
    with pytest.raises(ConnectionClosed):
        node.req(ADMIN, 30, 3, CreateAclsRequest([AclCreation(0, "a", LITERAL, ALICE, "*", READ, ALLOW)]))
    # without an authorizer: SECURITY_DISABLED
    plain = node_factory({})
    assert plain.request(29, 3, describe, client(ADMIN)).error_code == ErrorCode.SECURITY_DISABLED
    assert plain.request(30, 3, CreateAclsRequest([creation]), client(ADMIN)).results[0].error_code == (
        ErrorCode.SECURITY_DISABLED
    )
