"""A simulated multi-node cluster (``cluster.nodes``, broker/nodes.py) seen through its handlers:
Metadata, DescribeCluster and DescribeTopicPartitions list the live nodes, replicas, leaders, epochs
and ISR; CreateTopics places replicas as Kafka does and refuses replication factors above the node
count; leadership is kept across restarts; a data directory of the single-node broker stays readable."""

from __future__ import annotations

from collections import Counter

import orjson
import pytest

from broker.dispatch.leadership import batch_at
from broker.log.records import simple_batch
from broker.protocol.errors import ErrorCode
from broker.protocol.generated.alter_partition_reassignments import (
    AlterPartitionReassignmentsRequest,
    ReassignablePartition,
    ReassignableTopic,
)
from broker.protocol.generated.create_partitions import CreatePartitionsRequest, CreatePartitionsTopic
from broker.protocol.generated.create_topics import (
    CreatableReplicaAssignment,
    CreatableTopic,
    CreatableTopicConfig,
    CreateTopicsRequest,
)
from broker.protocol.generated.delete_records import (
    DeleteRecordsPartition,
    DeleteRecordsRequest,
    DeleteRecordsTopic,
)
from broker.protocol.generated.describe_cluster import DescribeClusterRequest
from broker.protocol.generated.describe_groups import DescribeGroupsRequest
from broker.protocol.generated.describe_topic_partitions import (
    DescribeTopicPartitionsRequest,
    TopicRequest,
)
from broker.protocol.generated.elect_leaders import ElectLeadersRequest
from broker.protocol.generated.elect_leaders import TopicPartitions as ElectTopicPartitions
from broker.protocol.generated.fetch import FetchPartition, FetchRequest, FetchTopic, ReplicaState
from broker.protocol.generated.find_coordinator import FindCoordinatorRequest
from broker.protocol.generated.join_group import JoinGroupRequest, JoinGroupRequestProtocol
from broker.protocol.generated.list_groups import ListGroupsRequest
from broker.protocol.generated.list_offsets import ListOffsetsPartition, ListOffsetsRequest, ListOffsetsTopic
from broker.protocol.generated.metadata import MetadataRequest, MetadataRequestTopic
from broker.protocol.generated.offset_commit import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from broker.protocol.generated.offset_fetch import OffsetFetchRequest, OffsetFetchRequestGroup
from broker.protocol.generated.offset_for_leader_epoch import (
    OffsetForLeaderEpochRequest,
    OffsetForLeaderPartition,
    OffsetForLeaderTopic,
)
from broker.protocol.generated.produce import PartitionProduceData, ProduceRequest, TopicProduceData

METADATA, CREATE_TOPICS, CREATE_PARTITIONS, DESCRIBE_CLUSTER, DTP = 3, 19, 37, 60, 75


def create(b, name, partitions=6, rf=3, assignments=None):
    t = CreatableTopic(
        name=name,
        num_partitions=partitions if assignments is None else -1,
        replication_factor=rf if assignments is None else -1,
        assignments=[CreatableReplicaAssignment(i, ids) for i, ids in (assignments or [])],
        configs=[],
    )
    with b.client() as c:
        return c.call(CREATE_TOPICS, 7, CreateTopicsRequest([t], 10000, False)).topics[0]


def metadata(b, *names, node=-1, version=12):
    topics = [MetadataRequestTopic(name=n) for n in names] if names else None
    with b.client(node) as c:
        return c.call(METADATA, version, MetadataRequest(topics=topics, allow_auto_topic_creation=False))


@pytest.fixture
def cluster(node_factory):
    return node_factory({"cluster.nodes": 3})


def test_metadata_lists_every_node_and_a_controller(cluster):
    for node in (1, 2, 3):
        resp = metadata(cluster, node=node)
        assert [(br.node_id, br.port) for br in resp.brokers] == [(1, 9001), (2, 9002), (3, 9003)]
        assert resp.controller_id == 1
    with cluster.client(2) as c:
        dc = c.call(DESCRIBE_CLUSTER, 1, DescribeClusterRequest(endpoint_type=1))
    assert [b.broker_id for b in dc.brokers] == [1, 2, 3] and dc.controller_id == 1


def test_create_topic_places_replicas_as_kafka_and_spreads_leaders(cluster):
    result = create(cluster, "t", partitions=6, rf=3)
    assert result.error_code == 0 and result.replication_factor == 3
    parts = metadata(cluster, "t").topics[0].partitions
    leaders = Counter(p.leader_id for p in parts)
    assert leaders == {1: 2, 2: 2, 3: 2}  # striped: each node leads as many partitions
    for p in parts:
        assert sorted(p.replica_nodes) == [1, 2, 3]
        assert p.leader_id == p.replica_nodes[0] and p.isr_nodes == p.replica_nodes
        assert p.leader_epoch == 0 and p.offline_replicas == []
    # consecutive partitions start one node further (StripedReplicaPlacer), within each stripe
    firsts = [p.replica_nodes[0] for p in parts]
    assert len(set(firsts[:3])) == 3


def test_replication_factor_above_the_node_count_is_refused(cluster):
    result = create(cluster, "t", partitions=1, rf=4)
    assert result.error_code == ErrorCode.INVALID_REPLICATION_FACTOR
    assert "only 3 broker(s)" in result.error_message
    assert create(cluster, "two", partitions=2, rf=2).error_code == 0
    assert all(len(p.replica_nodes) == 2 for p in metadata(cluster, "two").topics[0].partitions)


def test_manual_assignment_keeps_its_order(cluster):
    assert create(cluster, "m", assignments=[(0, [3, 1]), (1, [2])]).error_code == 0
    parts = metadata(cluster, "m").topics[0].partitions
    assert [(p.leader_id, p.replica_nodes) for p in parts] == [(3, [3, 1]), (2, [2])]
    bad = create(cluster, "bad", assignments=[(0, [4])])
    assert bad.error_code == ErrorCode.INVALID_REPLICA_ASSIGNMENT


def test_create_partitions_uses_the_topics_replication_factor(cluster):
    create(cluster, "g", partitions=2, rf=2)
    with cluster.client() as c:
        resp = c.call(
            CREATE_PARTITIONS, 3, CreatePartitionsRequest([CreatePartitionsTopic("g", 5, None)], 1000, False)
        )
    assert resp.results[0].error_code == 0
    parts = metadata(cluster, "g").topics[0].partitions
    assert len(parts) == 5 and all(len(p.replica_nodes) == 2 for p in parts)


def test_describe_topic_partitions_reports_the_same(cluster):
    create(cluster, "d", partitions=3, rf=3)
    with cluster.client(3) as c:
        resp = c.call(DTP, 0, DescribeTopicPartitionsRequest([TopicRequest("d")], 2000, None))
    meta = metadata(cluster, "d").topics[0].partitions
    got = [(p.leader_id, p.leader_epoch, p.replica_nodes, p.isr_nodes) for p in resp.topics[0].partitions]
    assert got == [(p.leader_id, p.leader_epoch, p.replica_nodes, p.isr_nodes) for p in meta]


def test_leadership_survives_a_restart(node_factory, tmp_path):
    data = tmp_path / "c"
    b = node_factory({"cluster.nodes": 3}, data_dir=data)
    create(b, "t", partitions=3, rf=3)
    b.broker.nodes.move_leader("t", 0, "next")
    before = [(p.leader_id, p.leader_epoch, p.replica_nodes) for p in metadata(b, "t").topics[0].partitions]
    assert before[0][1] == 1
    b.stop()
    again = node_factory({"cluster.nodes": 3}, data_dir=data)
    after = [
        (p.leader_id, p.leader_epoch, p.replica_nodes) for p in metadata(again, "t").topics[0].partitions
    ]
    assert after == before


def test_single_node_data_directory_stays_readable(node_factory, tmp_path):
    data = tmp_path / "old"
    single = node_factory(data_dir=data)
    create(single, "old", partitions=2, rf=1)
    single.stop()
    doc = orjson.loads((data / "topics.json").read_bytes())
    assert "replicas" not in doc["topics"][0]  # the single-node format is unchanged
    b = node_factory({"cluster.nodes": 3}, data_dir=data)
    parts = metadata(b, "old").topics[0].partitions
    assert [(p.leader_id, p.leader_epoch, p.replica_nodes, p.isr_nodes) for p in parts] == [
        (1, 0, [1], [1])
    ] * 2


def test_node_down_moves_leaders_to_live_replicas_and_up_brings_leaderless_back(cluster):
    create(cluster, "t", partitions=6, rf=3)
    create(cluster, "solo", assignments=[(0, [2])])
    nodes = cluster.broker.nodes
    nodes.node_down(2)
    resp = metadata(cluster, "t", "solo")
    assert [b.node_id for b in resp.brokers] == [1, 3]
    for p in resp.topics[0].partitions:
        assert p.leader_id != 2 and 2 not in p.isr_nodes and p.offline_replicas == [2]
    solo = resp.topics[1].partitions[0]
    assert (
        solo.error_code == ErrorCode.LEADER_NOT_AVAILABLE and solo.leader_id == -1 and solo.leader_epoch == 1
    )
    nodes.node_up(2)
    solo = metadata(cluster, "solo").topics[0].partitions[0]
    assert (solo.error_code, solo.leader_id, solo.leader_epoch, solo.isr_nodes) == (0, 2, 2, [2])


def test_move_leader_next_cycles_through_live_replicas(cluster):
    create(cluster, "t", assignments=[(0, [1, 2, 3])])
    nodes = cluster.broker.nodes
    assert nodes.move_leader("t", 0, "next") == (1, 2)
    nodes.node_down(3)
    assert nodes.move_leader("t", 0, "next") == (2, 1)
    p = metadata(cluster, "t").topics[0].partitions[0]
    assert (p.leader_id, p.leader_epoch) == (1, 2)


def test_single_node_metadata_is_unchanged(node):
    create(node, "t", partitions=2, rf=1)
    resp = metadata(node, "t")
    assert [b.node_id for b in resp.brokers] == [1] and resp.controller_id == 1
    assert [
        (p.leader_id, p.leader_epoch, p.replica_nodes, p.isr_nodes) for p in resp.topics[0].partitions
    ] == [(1, 0, [1], [1])] * 2
    assert create(node, "x", partitions=1, rf=2).error_code == ErrorCode.INVALID_REPLICATION_FACTOR


# ---------------------------------------------------------------- leaders: layer 3

PRODUCE, FETCH, LIST_OFFSETS, DELETE_RECORDS, OFFSET_FOR_LEADER_EPOCH = 0, 1, 2, 21, 23


def one_partition(b, name="t", replicas=(1, 2, 3)):
    assert create(b, name, assignments=[(0, list(replicas))]).error_code == 0
    return b.broker.topics.get(name)


def produce(b, node, version=10, name="t"):
    req = ProduceRequest(
        transactional_id=None,
        acks=1,
        timeout_ms=5000,
        topic_data=[
            TopicProduceData(name=name, partition_data=[PartitionProduceData(0, simple_batch([b"v"]))])
        ],
    )
    with b.client(node) as c:
        return c.call(PRODUCE, version, req)


def fetch(b, node, version=16, epoch=-1, name="t", replica=-1):
    topic = b.broker.topics.get(name)
    req = FetchRequest(
        replica_id=replica,
        replica_state=ReplicaState(replica_id=replica),
        max_wait_ms=0,
        min_bytes=0,
        max_bytes=1 << 20,
        isolation_level=0,
        session_id=0,
        session_epoch=-1,
        topics=[
            FetchTopic(
                topic=name,
                topic_id=topic.topic_id,
                partitions=[
                    FetchPartition(
                        partition=0, current_leader_epoch=epoch, fetch_offset=0, partition_max_bytes=1 << 20
                    )
                ],
            )
        ],
        forgotten_topics_data=[],
        rack_id="",
    )
    with b.client(node) as c:
        return c.call(FETCH, version, req)


def test_produce_on_a_follower_is_not_leader_with_the_new_leader(cluster):
    one_partition(cluster)
    assert produce(cluster, 1).responses[0].partition_responses[0].error_code == 0
    resp = produce(cluster, 2)
    p = resp.responses[0].partition_responses[0]
    assert p.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert (p.current_leader.leader_id, p.current_leader.leader_epoch) == (1, 0)
    assert [(e.node_id, e.port) for e in resp.node_endpoints] == [(1, 9001)]
    cluster.broker.nodes.move_leader("t", 0, 2)
    assert produce(cluster, 2).responses[0].partition_responses[0].error_code == 0
    moved = produce(cluster, 1).responses[0].partition_responses[0]
    assert moved.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER and moved.current_leader.leader_id == 2
    # before KIP-951 (v9): the error alone
    old = produce(cluster, 1, version=9)
    assert old.responses[0].partition_responses[0].error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert old.node_endpoints == []


def test_a_node_that_is_no_replica_is_not_leader_whatever_the_epoch(cluster):
    one_partition(cluster, replicas=(1,))
    p = fetch(cluster, 3, epoch=5).responses[0].partitions[0]
    assert p.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER


def test_fetch_checks_leader_and_epoch(cluster):
    one_partition(cluster)
    produce(cluster, 1)
    ok = fetch(cluster, 1, epoch=0).responses[0].partitions[0]
    assert ok.error_code == 0 and ok.records
    # a follower replica serves a consumer's fetch from v11 (client metadata: Kafka's
    # FetchParams.fetchOnlyLeader is false), the leader's records at the leader's epoch
    for version in (11, 16):
        p = fetch(cluster, 3, version=version).responses[0].partitions[0]
        assert (p.error_code, p.records, p.high_watermark) == (0, ok.records, ok.high_watermark)
    assert fetch(cluster, 3, epoch=0).responses[0].partitions[0].records == ok.records
    # before v11, and a replica's fetch: the leader only
    old = fetch(cluster, 3, version=10).responses[0].partitions[0]
    assert old.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    follower = fetch(cluster, 3, replica=2)
    p = follower.responses[0].partitions[0]
    assert p.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER and p.current_leader.leader_id == 1
    assert [e.node_id for e in follower.node_endpoints] == [1]
    cluster.broker.nodes.move_leader("t", 0, 3)  # epoch 1 now
    fenced = fetch(cluster, 3, epoch=0).responses[0].partitions[0]
    assert fenced.error_code == ErrorCode.FENCED_LEADER_EPOCH
    assert (fenced.current_leader.leader_id, fenced.current_leader.leader_epoch) == (3, 1)
    assert fetch(cluster, 3, epoch=2).responses[0].partitions[0].error_code == ErrorCode.UNKNOWN_LEADER_EPOCH
    assert fetch(cluster, 3, epoch=1).responses[0].partitions[0].error_code == 0
    # a follower with the current epoch: serves a consumer, not a replica; with an older epoch,
    # fenced either way
    assert fetch(cluster, 1, epoch=1).responses[0].partitions[0].error_code == 0
    assert (
        fetch(cluster, 1, epoch=1, replica=2).responses[0].partitions[0].error_code
        == ErrorCode.NOT_LEADER_OR_FOLLOWER
    )
    assert fetch(cluster, 1, epoch=0).responses[0].partitions[0].error_code == ErrorCode.FENCED_LEADER_EPOCH
    # v15: current_leader (v12+) but no node_endpoints (v16+)
    assert fetch(cluster, 1, version=15, replica=2).node_endpoints == []


def test_list_offsets_offset_for_leader_epoch_and_delete_records_need_the_leader(cluster):
    one_partition(cluster)
    produce(cluster, 1)
    cluster.broker.nodes.move_leader("t", 0, 2)

    def list_offsets(node, epoch=-1):
        req = ListOffsetsRequest(
            replica_id=-1,
            isolation_level=0,
            topics=[ListOffsetsTopic("t", [ListOffsetsPartition(0, epoch, -1, 1)])],
        )
        with cluster.client(node) as c:
            return c.call(LIST_OFFSETS, 7, req).topics[0].partitions[0]

    assert list_offsets(1).error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert list_offsets(2, epoch=0).error_code == ErrorCode.FENCED_LEADER_EPOCH
    latest = list_offsets(2, epoch=1)
    assert (latest.error_code, latest.offset, latest.leader_epoch) == (0, 1, 1)

    def ofle(node, epoch, current=-1):
        req = OffsetForLeaderEpochRequest(
            replica_id=-1,
            topics=[OffsetForLeaderTopic("t", [OffsetForLeaderPartition(0, current, epoch)])],
        )
        with cluster.client(node) as c:
            return c.call(OFFSET_FOR_LEADER_EPOCH, 4, req).topics[0].partitions[0]

    assert ofle(3, 0).error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert ofle(2, 0, current=0).error_code == ErrorCode.FENCED_LEADER_EPOCH
    assert (ofle(2, 0).leader_epoch, ofle(2, 0).end_offset) == (0, 1)  # nothing is ever truncated
    assert (ofle(2, 2).leader_epoch, ofle(2, 2).end_offset) == (-1, -1)

    def delete_records(node):
        req = DeleteRecordsRequest([DeleteRecordsTopic("t", [DeleteRecordsPartition(0, 1)])], 1000)
        with cluster.client(node) as c:
            return c.call(DELETE_RECORDS, 2, req).topics[0].partitions[0]

    assert delete_records(1).error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert (delete_records(2).error_code, delete_records(2).low_watermark) == (0, 1)


def test_min_insync_replicas_counts_the_live_replicas(cluster):
    t = CreatableTopic(
        name="m",
        num_partitions=-1,
        replication_factor=-1,
        assignments=[CreatableReplicaAssignment(0, [1, 2])],
        configs=[CreatableTopicConfig("min.insync.replicas", "2")],
    )
    with cluster.client() as c:
        assert c.call(CREATE_TOPICS, 7, CreateTopicsRequest([t], 10000, False)).topics[0].error_code == 0
    req = lambda: ProduceRequest(  # noqa: E731
        transactional_id=None,
        acks=-1,
        timeout_ms=5000,
        topic_data=[
            TopicProduceData(name="m", partition_data=[PartitionProduceData(0, simple_batch([b"v"]))])
        ],
    )
    with cluster.client(1) as c:
        assert c.call(PRODUCE, 9, req()).responses[0].partition_responses[0].error_code == 0
        cluster.broker.nodes.node_down(2)
        refused = c.call(PRODUCE, 9, req()).responses[0].partition_responses[0]
    assert refused.error_code == ErrorCode.NOT_ENOUGH_REPLICAS and "Set(1)" in refused.error_message


# ---------------------------------------------------------------- coordinators: layer 4

FIND_COORDINATOR, JOIN_GROUP, OFFSET_COMMIT, OFFSET_FETCH, LIST_GROUPS, DESCRIBE_GROUPS = 10, 11, 8, 9, 16, 15


def groups_by_coordinator(b, count=40):
    """Group ids keyed by the node coordinating them."""
    out: dict[int, list[str]] = {}
    for i in range(count):
        g = f"group-{i}"
        out.setdefault(b.broker.nodes.coordinator(g), []).append(g)
    return out


def test_find_coordinator_maps_groups_as_kafka(cluster):
    nodes = cluster.broker.nodes
    by_node = groups_by_coordinator(cluster)
    assert set(by_node) == {1, 2, 3}  # 50 slots striped over 3 nodes
    for node, groups in by_node.items():
        for asked in (1, 2, 3):  # every node gives the same answer
            with cluster.client(asked) as c:
                one = c.call(FIND_COORDINATOR, 3, FindCoordinatorRequest(key=groups[0], key_type=0))
                many = c.call(
                    FIND_COORDINATOR, 4, FindCoordinatorRequest(key_type=0, coordinator_keys=groups[:2])
                )
            assert (one.error_code, one.node_id, one.port) == (0, node, 9000 + node)
            assert [(k.node_id, k.error_code) for k in many.coordinators] == [(node, 0)] * len(groups[:2])
    # the slot is Kafka's: abs(String.hashCode) % offsets.topic.num.partitions
    assert nodes.slot_of("group-0") == abs(java_hash("group-0")) % 50


def java_hash(s):
    h = 0
    for ch in s:
        h = (31 * h + ord(ch)) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def test_group_apis_on_another_node_get_not_coordinator(cluster):
    by_node = groups_by_coordinator(cluster)
    g = by_node[2][0]
    join = JoinGroupRequest(
        group_id=g,
        session_timeout_ms=10000,
        rebalance_timeout_ms=10000,
        member_id="",
        protocol_type="consumer",
        protocols=[JoinGroupRequestProtocol("range", b"")],
    )
    with cluster.client(1) as c:
        assert c.call(JOIN_GROUP, 9, join).error_code == ErrorCode.NOT_COORDINATOR
    with cluster.client(2) as c:
        assert c.call(JOIN_GROUP, 9, join).error_code == ErrorCode.MEMBER_ID_REQUIRED
    mine, other = by_node[1][0], by_node[3][0]
    req = OffsetFetchRequest(
        groups=[OffsetFetchRequestGroup(mine, None, -1, None), OffsetFetchRequestGroup(other, None, -1, None)]
    )
    with cluster.client(1) as c:
        resp = c.call(OFFSET_FETCH, 9, req)
        described = c.call(DESCRIBE_GROUPS, 5, DescribeGroupsRequest(groups=[mine, other]))
    assert [(r.group_id, r.error_code) for r in resp.groups] == [
        (mine, 0),
        (other, ErrorCode.NOT_COORDINATOR),
    ]
    assert [(r.group_id, r.error_code) for r in described.groups] == [
        (mine, 0),
        (other, ErrorCode.NOT_COORDINATOR),
    ]


def test_list_groups_lists_the_groups_of_this_node(cluster):
    g = groups_by_coordinator(cluster)[3][0]
    create(cluster, "t", partitions=1, rf=1)
    commit = OffsetCommitRequest(
        group_id=g,
        generation_id_or_member_epoch=-1,
        member_id="",
        topics=[OffsetCommitRequestTopic(name="t", partitions=[OffsetCommitRequestPartition(0, 0)])],
    )
    with cluster.client(1) as c:
        refused = c.call(OFFSET_COMMIT, 8, commit)
    assert refused.topics[0].partitions[0].error_code == ErrorCode.NOT_COORDINATOR
    with cluster.client(3) as c:
        assert c.call(OFFSET_COMMIT, 8, commit).topics[0].partitions[0].error_code == 0
    listed = {}
    for node in (1, 2, 3):
        with cluster.client(node) as c:
            listed[node] = [
                x.group_id for x in c.call(LIST_GROUPS, 4, ListGroupsRequest(states_filter=[])).groups
            ]
    assert listed == {1: [], 2: [], 3: [g]}


# ---------------------------------------------------------------- ElectLeaders, reassignments

ELECT_LEADERS, ALTER_REASSIGNMENTS = 43, 45


def test_elect_leaders_brings_back_the_preferred_replica(cluster):
    one_partition(cluster, replicas=(1, 2, 3))
    nodes = cluster.broker.nodes

    def elect(kind):
        with cluster.client() as c:
            req = ElectLeadersRequest(election_type=kind, topic_partitions=[ElectTopicPartitions("t", [0])])
            return c.call(ELECT_LEADERS, 2, req).replica_election_results[0].partition_result[0].error_code

    assert elect(0) == ErrorCode.ELECTION_NOT_NEEDED
    nodes.move_leader("t", 0, 3)
    nodes.node_down(1)
    assert elect(0) == ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE
    nodes.node_up(1)
    assert elect(0) == 0
    p = metadata(cluster, "t").topics[0].partitions[0]
    assert (p.leader_id, p.leader_epoch) == (1, 2)
    assert elect(1) == ErrorCode.ELECTION_NOT_NEEDED


def test_a_reassignment_completes_at_once_and_moves_a_leader_left_out(cluster):
    one_partition(cluster, replicas=(1, 2))
    req = AlterPartitionReassignmentsRequest(
        topics=[ReassignableTopic("t", [ReassignablePartition(0, [3, 2])])],
        allow_replication_factor_change=False,
    )
    with cluster.client() as c:
        resp = c.call(ALTER_REASSIGNMENTS, 1, req)
    assert resp.responses[0].partitions[0].error_code == 0
    p = metadata(cluster, "t").topics[0].partitions[0]
    assert (p.replica_nodes, p.leader_id, p.leader_epoch) == ([3, 2], 3, 1)
    req.topics[0].partitions[0].replicas = [1]
    with cluster.client() as c:
        refused = c.call(ALTER_REASSIGNMENTS, 1, req).responses[0].partitions[0]
    assert refused.error_code == ErrorCode.INVALID_REPLICATION_FACTOR


def test_a_cluster_data_directory_grown_by_a_single_node(node_factory, tmp_path):
    data = tmp_path / "multi"
    b = node_factory({"cluster.nodes": 3}, data_dir=data)
    create(b, "t", partitions=2, rf=3)
    b.stop()
    single = node_factory(data_dir=data)
    with single.client() as c:
        resp = c.call(
            CREATE_PARTITIONS, 3, CreatePartitionsRequest([CreatePartitionsTopic("t", 3, None)], 1000, False)
        )
    assert resp.results[0].error_code == 0
    parts = metadata(single, "t").topics[0].partitions
    # one node leads everything at epoch 0; the cluster's replica lists are kept for a later cluster
    assert [(p.leader_id, p.leader_epoch, p.replica_nodes) for p in parts] == [(1, 0, [1])] * 3
    assert (
        single.broker.topics.get("t").replicas[2] == [1]
        and len(single.broker.topics.get("t").replicas[0]) == 3
    )


def test_a_single_node_keeps_a_clusters_leader_epochs(node_factory, tmp_path):
    data = tmp_path / "multi"
    b = node_factory({"cluster.nodes": 3}, data_dir=data)
    one_partition(b)
    b.broker.nodes.move_leader("t", 0, 2)
    b.broker.nodes.move_leader("t", 0, 3)  # epoch 2
    assert produce(b, 3).responses[0].partition_responses[0].error_code == 0
    b.stop()
    single = node_factory(data_dir=data)
    [p] = metadata(single, "t").topics[0].partitions
    assert (p.leader_id, p.leader_epoch) == (1, 2)
    assert produce(single, -1).responses[0].partition_responses[0].error_code == 0
    plog = single.broker.logs.get("t", 0)
    # the new batch is stamped with the epoch the cluster left, not 0: epochs never go backwards
    assert [batch_at(plog, offset)[2] for offset in (0, 1)] == [2, 2]
    codes = [fetch(single, -1, epoch=e).responses[0].partitions[0].error_code for e in (-1, 1, 2, 3)]
    assert codes == [0, ErrorCode.FENCED_LEADER_EPOCH, 0, ErrorCode.UNKNOWN_LEADER_EPOCH]
    single.stop()
    again = node_factory({"cluster.nodes": 3}, data_dir=data)  # and back to a cluster
    assert metadata(again, "t").topics[0].partitions[0].leader_epoch == 2


def test_cluster_state_of_one_node_has_no_coordinator_slots(node, cluster):
    single = node.broker.control.cluster()
    assert (single["coordinators"], single["txn_coordinators"]) == ([], [])
    state = cluster.broker.control.cluster()
    assert [len(state["coordinators"]), len(state["txn_coordinators"])] == [50, 50]
