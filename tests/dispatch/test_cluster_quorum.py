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


class FakeClock:
    def __init__(self, now: float):
        self.now = now

    def __call__(self) -> float:
        return self.now


def test_a_new_controller_is_a_new_quorum_epoch_kept_across_a_restart(node_factory, tmp_path):
    data = tmp_path / "c"
    b = node_factory({"cluster.nodes": 3}, data_dir=data)
    first = describe(b, 2)[1].leader_epoch
    assert first == 1  # a fresh cluster's first election
    b.broker.nodes.node_down(3)  # not the controller: no election
    assert describe(b, 1)[1].leader_epoch == first
    b.broker.nodes.node_down(1)  # the controller: node 2 is elected in a new epoch
    _resp, p = describe(b, 2)
    assert (p.leader_id, p.leader_epoch) == (2, first + 1)
    b.broker.nodes.node_up(3)  # above the controller: no election
    assert describe(b, 3)[1].leader_epoch == first + 1
    b.broker.nodes.node_up(1)  # the lowest node is the controller again: another election
    _resp, p = describe(b, 3)
    assert (p.leader_id, p.leader_epoch) == (1, first + 2)
    b.stop()
    # a restart is a new election too (a KRaft leader restarts resigned), never an older epoch
    again = node_factory({"cluster.nodes": 3}, data_dir=data)
    _resp, p = describe(again, 1)
    assert (p.leader_id, p.leader_epoch) == (1, first + 3)


def test_a_voter_down_keeps_its_last_fetch_until_the_next_election(cluster):
    nodes = cluster.broker.nodes
    clock = nodes.clock = FakeClock(1_000.0)
    nodes.node_down(3)  # it last fetched from leader 1 as it went down
    clock.now = 2_000.0
    _resp, p = describe(cluster, 1)
    voters = {v.replica_id: v for v in p.current_voters}
    assert (voters[3].log_end_offset, voters[3].last_fetch_timestamp, voters[3].last_caught_up_timestamp) == (
        0,
        1_000_000,
        1_000_000,
    )
    assert voters[1].last_fetch_timestamp == voters[2].last_fetch_timestamp == 2_000_000  # live: now
    nodes.node_down(1)  # node 2's new LeaderState has heard from neither node 1 nor node 3
    _resp, p = describe(cluster, 2)
    voters = {v.replica_id: v for v in p.current_voters}
    assert [(voters[n].log_end_offset, voters[n].last_fetch_timestamp) for n in (1, 3)] == [(-1, -1)] * 2
    nodes.node_up(3)  # live again: it fetches from the leader
    assert {v.replica_id: v for v in describe(cluster, 2)[1].current_voters}[
        3
    ].last_fetch_timestamp == 2_000_000


def test_a_single_node_quorum_epoch_stays_1(node_factory, tmp_path):
    data = tmp_path / "one"
    b = node_factory(data_dir=data)
    assert describe(b)[1].leader_epoch == 1
    b.stop()
    assert describe(node_factory(data_dir=data))[1].leader_epoch == 1
    assert not (data / "quorum.json").exists()  # only a cluster writes it
