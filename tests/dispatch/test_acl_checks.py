"""What each handler checks with an authorizer (Kafka's KafkaApis checks and error codes), through the
request pipeline in-process, with the connection's principal set as SASL would set it."""

from __future__ import annotations

import pytest

from broker.dispatch import acl as bits
from broker.dispatch.registry import ClientInfo
from broker.log.records import build_batch, simple_batch
from broker.protocol.errors import ErrorCode
from broker.protocol.generated.add_offsets_to_txn import AddOffsetsToTxnRequest
from broker.protocol.generated.add_partitions_to_txn import (
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnTopic,
    AddPartitionsToTxnTransaction,
)
from broker.protocol.generated.create_acls import AclCreation, CreateAclsRequest
from broker.protocol.generated.delete_topics import DeleteTopicsRequest, DeleteTopicState
from broker.protocol.generated.describe_acls import DescribeAclsRequest
from broker.protocol.generated.describe_cluster import DescribeClusterRequest
from broker.protocol.generated.describe_configs import DescribeConfigsRequest, DescribeConfigsResource
from broker.protocol.generated.describe_groups import DescribeGroupsRequest
from broker.protocol.generated.describe_log_dirs import DescribeLogDirsRequest
from broker.protocol.generated.describe_producers import DescribeProducersRequest
from broker.protocol.generated.describe_producers import TopicRequest as DescribeProducersTopic
from broker.protocol.generated.describe_transactions import DescribeTransactionsRequest
from broker.protocol.generated.end_txn import EndTxnRequest
from broker.protocol.generated.fetch import FetchPartition, FetchRequest, FetchTopic
from broker.protocol.generated.find_coordinator import FindCoordinatorRequest
from broker.protocol.generated.init_producer_id import InitProducerIdRequest
from broker.protocol.generated.list_groups import ListGroupsRequest
from broker.protocol.generated.list_offsets import ListOffsetsPartition, ListOffsetsRequest, ListOffsetsTopic
from broker.protocol.generated.list_transactions import ListTransactionsRequest
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
from broker.protocol.generated.txn_offset_commit import (
    TxnOffsetCommitRequest,
    TxnOffsetCommitRequestPartition,
    TxnOffsetCommitRequestTopic,
)
from broker.security.authorizer import (
    ALL,
    ALLOW,
    ALTER_CONFIGS,
    CLUSTER,
    CLUSTER_ACTION,
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
    TRANSACTIONAL_ID,
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


# ---------------------------------------------------------------------- transactions (KafkaApis' checks)


def init_txn(node, principal, tid):
    out = node.req(principal, 22, 4, InitProducerIdRequest(tid, 60_000, -1, -1))
    assert out.error_code == 0
    return out.producer_id, out.producer_epoch


def add_partitions(node, principal, tid, pid, epoch, **topics):
    body = AddPartitionsToTxnRequest(
        v3_and_below_transactional_id=tid,
        v3_and_below_producer_id=pid,
        v3_and_below_producer_epoch=epoch,
        v3_and_below_topics=[AddPartitionsToTxnTopic(t, ps) for t, ps in topics.items()],
    )
    out = node.req(principal, 24, 3, body).results_by_topic_v3_and_below
    return {(t.name, p.partition_index): p.partition_error_code for t in out for p in t.results_by_partition}


def txn_produce(node, principal, tid, pid, epoch, seq, topics=("a",), acks=-1):
    batch = build_batch(
        [(None, b"v")], producer_id=pid, producer_epoch=epoch, base_sequence=seq, transactional=True
    )
    body = ProduceRequest(
        tid,
        acks,
        5000,
        [TopicProduceData(t, partition_data=[PartitionProduceData(0, batch)]) for t in topics],
    )
    out = node.req(principal, 0, 9, body)
    return {t.name: t.partition_responses[0].error_code for t in out.responses}


def test_add_partitions_produce_and_end_txn_need_write_on_the_transactional_id(node):
    pid, epoch = init_txn(node, ADMIN, "tx")
    node.allow((TOPIC, "a", LITERAL, WRITE, ALLOW))
    # no WRITE on the transactional id: every partition, before any topic check
    assert add_partitions(node, ALICE, "tx", pid, epoch, a=[0], b=[0]) == {
        ("a", 0): ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
        ("b", 0): ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
    }
    node.allow((TRANSACTIONAL_ID, "tx", LITERAL, WRITE, ALLOW))
    # topics refused (unknown ones too: their existence is not disclosed; internal ones always), the
    # rest not attempted
    assert add_partitions(node, ALICE, "tx", pid, epoch, a=[0], b=[0], zz=[0], __consumer_offsets=[0]) == {
        ("a", 0): ErrorCode.OPERATION_NOT_ATTEMPTED,
        ("b", 0): ErrorCode.TOPIC_AUTHORIZATION_FAILED,
        ("zz", 0): ErrorCode.TOPIC_AUTHORIZATION_FAILED,
        ("__consumer_offsets", 0): ErrorCode.TOPIC_AUTHORIZATION_FAILED,
    }
    node.allow((TOPIC, "z", PREFIXED, WRITE, ALLOW))
    assert add_partitions(node, ALICE, "tx", pid, epoch, a=[0], zz=[0]) == {
        ("a", 0): ErrorCode.OPERATION_NOT_ATTEMPTED,
        ("zz", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    }
    assert node.broker.txns.verify("tx", pid, epoch, "a", 0) != 0  # nothing was added
    assert add_partitions(node, ALICE, "tx", pid, epoch, a=[0]) == {("a", 0): 0}
    # Produce of transactional records: WRITE on the transactional id, or every partition fails
    assert txn_produce(node, ALICE, "other", pid, epoch, 0, ("a", "b")) == {
        "a": ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
        "b": ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
    }
    assert txn_produce(node, ALICE, None, pid, epoch, 0) == {
        "a": ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    }
    with pytest.raises(ConnectionClosed):
        txn_produce(node, ALICE, "other", pid, epoch, 0, acks=0)
    assert txn_produce(node, ALICE, "tx", pid, epoch, 0, ("a", "b")) == {
        "a": 0,
        "b": ErrorCode.TOPIC_AUTHORIZATION_FAILED,
    }
    assert produce(node, ALICE) == 0  # records that are not transactional need no transactional id
    # EndTxn: WRITE on the transactional id
    end = EndTxnRequest("other", pid, epoch, True)
    assert node.req(ALICE, 26, 3, end).error_code == ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    assert node.req(ALICE, 26, 3, EndTxnRequest("tx", pid, epoch, True)).error_code == 0


def test_batched_add_partitions_needs_cluster_action(node):
    pid, epoch = init_txn(node, ADMIN, "tx")
    assert add_partitions(node, ADMIN, "tx", pid, epoch, a=[0]) == {("a", 0): 0}
    body = AddPartitionsToTxnRequest(
        transactions=[
            AddPartitionsToTxnTransaction("tx", pid, epoch, True, [AddPartitionsToTxnTopic("a", [0])])
        ]
    )
    # brokers send v4+: CLUSTER_ACTION on the cluster, else the whole request fails at the top
    out = node.req(ALICE, 24, 4, body)
    assert (out.error_code, out.results_by_transaction) == (ErrorCode.CLUSTER_AUTHORIZATION_FAILED, [])
    node.allow((CLUSTER, CLUSTER_NAME, LITERAL, CLUSTER_ACTION, ALLOW))
    out = node.req(ALICE, 24, 4, body)  # no transactional id nor topic ACL is needed then
    assert out.error_code == 0
    assert out.results_by_transaction[0].topic_results[0].results_by_partition[0].partition_error_code == 0


def txn_commit(node, principal, tid, pid, epoch, group, *topics):
    body = TxnOffsetCommitRequest(
        transactional_id=tid,
        group_id=group,
        producer_id=pid,
        producer_epoch=epoch,
        generation_id=-1,
        member_id="",
        group_instance_id=None,
        topics=[
            TxnOffsetCommitRequestTopic(t, [TxnOffsetCommitRequestPartition(0, 3, -1, "")]) for t in topics
        ],
    )
    return sorted((t.name, t.partitions[0].error_code) for t in node.req(principal, 28, 3, body).topics)


def test_add_offsets_and_txn_offset_commit(node):
    pid, epoch = init_txn(node, ADMIN, "tx")
    node.allow((TRANSACTIONAL_ID, "tx", LITERAL, WRITE, ALLOW))

    def add_offsets(tid, group):
        return node.req(ALICE, 25, 3, AddOffsetsToTxnRequest(tid, pid, epoch, group)).error_code

    # the transactional id first, then READ on the group
    assert add_offsets("other", "g") == ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    assert add_offsets("tx", "g") == ErrorCode.GROUP_AUTHORIZATION_FAILED
    node.allow((GROUP, "g", LITERAL, READ, ALLOW), (TOPIC, "a", LITERAL, READ, ALLOW))
    assert add_offsets("tx", "g") == 0
    denied_tid = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    assert txn_commit(node, ALICE, "other", pid, epoch, "g", "a") == [("a", denied_tid)]
    assert txn_commit(node, ALICE, "tx", pid, epoch, "h", "a", "b") == [
        ("a", ErrorCode.GROUP_AUTHORIZATION_FAILED),
        ("b", ErrorCode.GROUP_AUTHORIZATION_FAILED),
    ]
    assert txn_commit(node, ALICE, "tx", pid, epoch, "g", "b") == [
        ("b", ErrorCode.TOPIC_AUTHORIZATION_FAILED)
    ]
    assert txn_commit(node, ALICE, "tx", pid, epoch, "g", "a", "b") == [
        ("a", 0),
        ("b", ErrorCode.TOPIC_AUTHORIZATION_FAILED),
    ]
    assert node.req(ALICE, 26, 3, EndTxnRequest("tx", pid, epoch, True)).error_code == 0
    body = OffsetFetchRequest(groups=[OffsetFetchRequestGroup("g", None, -1, None)], require_stable=True)
    (g,) = node.req(ADMIN, 9, 9, body).groups
    assert [(t.name, t.partitions[0].committed_offset) for t in g.topics] == [("a", 3)]


def test_describe_and_list_transactions_and_describe_producers(node):
    pid, epoch = init_txn(node, ADMIN, "tx1")
    init_txn(node, ADMIN, "tx2")
    assert add_partitions(node, ADMIN, "tx1", pid, epoch, a=[0], b=[0]) == {("a", 0): 0, ("b", 0): 0}
    assert txn_produce(node, ADMIN, "tx1", pid, epoch, 0) == {"a": 0}
    node.allow((TRANSACTIONAL_ID, "tx1", LITERAL, DESCRIBE, ALLOW), (TOPIC, "a", LITERAL, DESCRIBE, ALLOW))
    tx1, tx2 = node.req(ALICE, 65, 0, DescribeTransactionsRequest(["tx1", "tx2"])).transaction_states
    # b is left out of the partitions of a transaction alice may describe
    assert (tx1.error_code, tx1.producer_id, [(t.topic, t.partitions) for t in tx1.topics]) == (
        0,
        pid,
        [("a", [0])],
    )
    assert (tx2.transactional_id, tx2.error_code, tx2.topics) == (
        "tx2",
        ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
        [],
    )
    tx1, _ = node.req(ADMIN, 65, 0, DescribeTransactionsRequest(["tx1", "tx2"])).transaction_states
    assert [t.topic for t in tx1.topics] == ["a", "b"]

    def listed(principal):
        out = node.req(principal, 66, 1, ListTransactionsRequest([], [], -1))
        return sorted(s.transactional_id for s in out.transaction_states)

    assert listed(ALICE) == ["tx1"] and listed(ADMIN) == ["tx1", "tx2"]

    def producers(principal, *topics):
        body = DescribeProducersRequest([DescribeProducersTopic(t, [0]) for t in topics])
        out = node.req(principal, 61, 0, body).topics
        return {t.name: (t.partitions[0].error_code, len(t.partitions[0].active_producers)) for t in out}

    # READ is needed (DESCRIBE is not enough); an invalid name is refused as such first
    assert producers(ALICE, "a", "b", "no/such", "zz") == {
        "a": (ErrorCode.TOPIC_AUTHORIZATION_FAILED, 0),
        "b": (ErrorCode.TOPIC_AUTHORIZATION_FAILED, 0),
        "no/such": (ErrorCode.INVALID_TOPIC_EXCEPTION, 0),
        "zz": (ErrorCode.TOPIC_AUTHORIZATION_FAILED, 0),
    }
    node.allow((TOPIC, "a", LITERAL, READ, ALLOW))
    assert producers(ALICE, "a")["a"] == (0, 1)
    assert producers(ADMIN, "zz")["zz"] == (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, 0)


def test_find_coordinator_of_a_transactional_id_needs_describe(node):
    def find(version, key):
        body = FindCoordinatorRequest(key=key, key_type=1, coordinator_keys=[key])
        out = node.req(ALICE, 10, version, body)
        return out.error_code if version < 4 else out.coordinators[0].error_code

    assert find(3, "tx") == find(4, "tx") == ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    node.allow((TRANSACTIONAL_ID, "tx", LITERAL, WRITE, ALLOW))  # implies DESCRIBE
    assert find(3, "tx") == find(4, "tx") == 0
