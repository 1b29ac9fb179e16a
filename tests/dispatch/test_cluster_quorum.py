"""DescribeQuorum on a simulated cluster (``cluster.nodes``): a combined-mode KRaft quorum of every
node, as Kafka's would be with ``controller.quorum.voters`` naming each (broker/dispatch/
describe_quorum.py); a single node's answer is unchanged."""

from __future__ import annotations

import pytest

from broker.protocol.generated.describe_quorum import (
    DescribeQuorumRequest,
    DescribeQuorumRequestPartitionData,
    DescribeQuorumRequestTopicData,
)

DESCRIBE_QUORUM = 55
REQUEST = DescribeQuorumRequest(
    topics=[DescribeQuorumRequestTopicData("__cluster_metadata", [DescribeQuorumRequestPartitionData(0)])]
)


def describe(b, node=-1):
    with b.client(node) as c:
        resp = c.call(DESCRIBE_QUORUM, 2, REQUEST)
    assert resp.error_code == 0
    return resp, resp.topics[0].partitions[0]


@pytest.fixture
def cluster(node_factory):
    return node_factory({"cluster.nodes": 3})


def test_every_node_is_a_voter_and_the_controller_leads(cluster):
    for asked in (1, 2, 3):
        resp, p = describe(cluster, asked)
        assert p.error_code == 0 and p.leader_id == 1
        assert [v.replica_id for v in p.current_voters] == [1, 2, 3]
        assert all(v.last_fetch_timestamp > 0 and v.log_end_offset == 0 for v in p.current_voters)
        assert p.observers == []
        assert [(n.node_id, n.listeners[0].port) for n in resp.nodes] == [(1, 9001), (2, 9002), (3, 9003)]


def test_a_node_down_stays_a_voter_without_fetches_and_the_next_node_leads(cluster):
    cluster.broker.nodes.node_down(1)
    _resp, p = describe(cluster, 2)
    assert p.leader_id == 2
    voters = {v.replica_id: v for v in p.current_voters}
    assert sorted(voters) == [1, 2, 3]
    assert (voters[1].log_end_offset, voters[1].last_fetch_timestamp, voters[1].last_caught_up_timestamp) == (
        -1,
        -1,
        -1,
    )
    assert voters[2].last_fetch_timestamp > 0 and voters[3].last_fetch_timestamp > 0
    cluster.broker.nodes.node_up(1)
    assert describe(cluster, 3)[1].leader_id == 1


def test_a_single_node_is_the_whole_quorum(node):
    resp, p = describe(node)
    assert p.leader_id == 1 and [v.replica_id for v in p.current_voters] == [1] and p.observers == []
    assert [n.node_id for n in resp.nodes] == [1]
