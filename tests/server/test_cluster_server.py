"""A simulated 3-node cluster over real sockets (``cluster.nodes``): each node listens on its own
port and says so in Metadata; a node taken down closes its listener and its connections and comes
back on the same port; a coordinator move fails the group over (parked joins answered
NOT_COORDINATOR, the persisted generation kept); the control API drives all of it over HTTP."""

from __future__ import annotations

import json
import socket
import time

import pytest

from broker.control import ControlClient
from broker.control.client import ControlError
from broker.log.records import simple_batch
from broker.protocol.errors import ErrorCode
from broker.protocol.generated.describe_groups import DescribeGroupsRequest
from broker.protocol.generated.fetch import FetchPartition, FetchRequest, FetchTopic
from broker.protocol.generated.find_coordinator import FindCoordinatorRequest
from broker.protocol.generated.heartbeat import HeartbeatRequest
from broker.protocol.generated.join_group import JoinGroupRequest, JoinGroupRequestProtocol
from broker.protocol.generated.metadata import MetadataRequest
from broker.protocol.generated.produce import PartitionProduceData, ProduceRequest, TopicProduceData
from broker.protocol.generated.sync_group import SyncGroupRequest, SyncGroupRequestAssignment
from tests.support.wire import WireClient

FETCH, METADATA, FIND_COORDINATOR, JOIN_GROUP, HEARTBEAT, SYNC_GROUP, DESCRIBE_GROUPS = (
    1,
    3,
    10,
    11,
    12,
    14,
    15,
)

pytestmark = pytest.mark.server


@pytest.fixture
def bt(broker_factory):
    return broker_factory({"cluster.nodes": 3, "control.port": 0, "group.initial.rebalance.delay.ms": 0})


def ports(bt) -> dict[int, int]:
    return {node: port for node, (_h, port) in zip((1, 2, 3), bt.broker.addresses(), strict=True)}


def test_every_node_listens_on_its_own_port_and_lists_all(bt):
    by_node = ports(bt)
    assert len(set(by_node.values())) == 3
    for port in by_node.values():
        with WireClient(port) as c:
            resp = c.call(METADATA, 12, MetadataRequest(topics=None))
        assert [(b.node_id, b.port) for b in resp.brokers] == sorted(by_node.items())
        assert resp.controller_id == 1


def test_node_down_closes_its_listener_and_connections_and_up_reopens_the_same_port(bt):
    by_node = ports(bt)
    c = WireClient(by_node[2])
    other = WireClient(by_node[1])
    result = ControlClient(bt.control_url).node_down(2)
    assert result["live"] is False
    assert c.is_closed_by_peer()
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", by_node[2]), timeout=2).close()
    resp = other.call(METADATA, 12, MetadataRequest(topics=None))  # node 1's clients carry on
    assert [b.node_id for b in resp.brokers] == [1, 3]
    ControlClient(bt.control_url).node_up(2)
    with WireClient(by_node[2]) as again:
        assert [b.node_id for b in again.call(METADATA, 12, MetadataRequest(topics=None)).brokers] == [
            1,
            2,
            3,
        ]
    other.close()


def join(c, group, member_id=""):
    req = JoinGroupRequest(
        group_id=group,
        session_timeout_ms=30000,
        rebalance_timeout_ms=30000,
        member_id=member_id,
        protocol_type="consumer",
        protocols=[JoinGroupRequestProtocol("range", b"meta")],
    )
    return c.call(JOIN_GROUP, 9, req)


def stable_group(port, group):
    """One member, joined and synced: generation 1, Stable, persisted."""
    c = WireClient(port)
    first = join(c, group)
    assert first.error_code == ErrorCode.MEMBER_ID_REQUIRED
    joined = join(c, group, first.member_id)
    assert joined.error_code == 0 and joined.generation_id == 1
    sync = SyncGroupRequest(
        group_id=group,
        generation_id=1,
        member_id=joined.member_id,
        protocol_type="consumer",
        protocol_name="range",
        assignments=[SyncGroupRequestAssignment(joined.member_id, b"assigned")],
    )
    assert c.call(SYNC_GROUP, 5, sync).assignment == b"assigned"
    return c, joined.member_id


def coordinator(bt, group) -> int:
    with WireClient(ports(bt)[1]) as c:
        return c.call(FIND_COORDINATOR, 3, FindCoordinatorRequest(key=group, key_type=0)).node_id


def test_coordinator_move_keeps_the_generation_and_the_old_node_says_not_coordinator(bt):
    by_node = ports(bt)
    group = "moving"
    old = coordinator(bt, group)
    c, member = stable_group(by_node[old], group)
    moved = ControlClient(bt.control_url).move_coordinator(group)
    assert moved["from"] == old and moved["to"] != old and coordinator(bt, group) == moved["to"]
    hb = HeartbeatRequest(group_id=group, generation_id=1, member_id=member)
    assert c.call(HEARTBEAT, 4, hb).error_code == ErrorCode.NOT_COORDINATOR
    with WireClient(by_node[moved["to"]]) as new:
        assert new.call(HEARTBEAT, 4, hb).error_code == 0  # same generation: no rebalance
        described = new.call(DESCRIBE_GROUPS, 5, DescribeGroupsRequest(groups=[group])).groups[0]
    assert (described.group_state, len(described.members)) == ("Stable", 1)
    assert described.members[0].member_assignment == b"assigned"
    c.close()


def test_a_parked_join_is_answered_not_coordinator_when_the_coordinator_moves(bt):
    by_node = ports(bt)
    group = "parked"
    old = coordinator(bt, group)
    c, member = stable_group(by_node[old], group)
    second = WireClient(by_node[old])
    first = join(second, group)
    cid = second.send(
        JOIN_GROUP,
        9,
        JoinGroupRequest(
            group_id=group,
            session_timeout_ms=30000,
            rebalance_timeout_ms=30000,
            member_id=first.member_id,
            protocol_type="consumer",
            protocols=[JoinGroupRequestProtocol("range", b"meta")],
        ),
    )  # parked: the rebalance waits for the first member to rejoin
    state = lambda: bt.call(lambda: bt.broker.groups.state.groups[group].state.value)  # noqa: E731
    while state() != "PreparingRebalance":
        time.sleep(0.01)
    moved = ControlClient(bt.control_url).move_coordinator(group)
    corr, parked = second.recv(JOIN_GROUP, 9)
    assert corr == cid and parked.error_code == ErrorCode.NOT_COORDINATOR
    with WireClient(by_node[moved["to"]]) as new:
        # the rebalance in progress is lost: the new coordinator has the persisted generation
        described = new.call(DESCRIBE_GROUPS, 5, DescribeGroupsRequest(groups=[group])).groups[0]
        assert (described.group_state, [m.member_id for m in described.members]) == ("Stable", [member])
    second.close()
    c.close()


def test_control_api_moves_leaders_and_refuses_what_cannot_be(bt, tmp_path):
    ctl = ControlClient(bt.control_url)
    bt.call(bt.broker.create_topic, "t", 1, None, False, False, 2)
    before = ctl.cluster()["topics"]["t"][0]
    out = ctl.move_leader("t", 0)
    assert out["from"] == before["leader"] and out["to"] != before["leader"] and out["epoch"] == 1
    outside = next(n for n in (1, 2, 3) if n not in before["replicas"])
    with pytest.raises(ControlError) as e:
        ctl.move_leader("t", 0, outside)
    assert e.value.status == 409 and e.value.body["code"] == "INVALID_REPLICA_ASSIGNMENT"
    with pytest.raises(ControlError) as e:
        ctl.move_leader("nope", 0)
    assert e.value.status == 404
    assert ctl.shuffle_leaders()["moved"] >= 1
    ctl.node_down(1)
    ctl.node_down(2)
    with pytest.raises(ControlError) as e:
        ctl.node_down(3)
    assert e.value.status == 409
    assert [n["live"] for n in ctl.cluster()["nodes"]] == [False, False, True]


def test_rolling_restart_brings_every_node_back(bt):
    ctl = ControlClient(bt.control_url)
    bt.call(bt.broker.create_topic, "t", 3, None, False, False, 3)
    assert ctl.rolling_restart(pause_ms=20) == [1, 2, 3]
    state = ctl.cluster()
    assert [n["live"] for n in state["nodes"]] == [True, True, True]
    assert all(p["epoch"] >= 1 and p["leader"] in (1, 2, 3) for p in state["topics"]["t"])
    for port in ports(bt).values():  # every node listens again
        with WireClient(port) as c:
            assert len(c.call(METADATA, 12, MetadataRequest(topics=None)).brokers) == 3


def test_cluster_operations_are_journaled_with_tracing_on(bt, tmp_path):
    journal = tmp_path / "trace.jsonl"
    bt.control.start_trace(str(journal))
    bt.control.move_coordinator("g")
    bt.control.node_down(2)
    bt.control.node_up(2)
    bt.control.stop_trace()
    events = [json.loads(line) for line in journal.read_text().splitlines()]
    kinds = [e["event"] for e in events if "event" in e]
    assert kinds == ["move-coordinator", "node-down", "node-up"]
    assert events[0]["groups"] == ["g"] and events[0]["details"]["group_id"] == "g"


def test_a_fault_rule_names_the_real_leader_in_its_hint(bt):
    bt.call(bt.broker.create_topic, "h", 1, None, False, False, 3)
    topic = bt.call(lambda: bt.broker.topics.get("h"))
    leader, epoch = bt.call(lambda: bt.broker.nodes.leader(topic, 0))
    bt.control.add_rule(api="Produce", error="NOT_LEADER_OR_FOLLOWER", times=1)
    req = ProduceRequest(
        transactional_id=None,
        acks=1,
        timeout_ms=5000,
        topic_data=[
            TopicProduceData(name="h", partition_data=[PartitionProduceData(0, simple_batch([b"v"]))])
        ],
    )
    with WireClient(ports(bt)[leader]) as c:
        resp = c.call(0, 10, req)
    p = resp.responses[0].partition_responses[0]
    assert p.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert (p.current_leader.leader_id, p.current_leader.leader_epoch) == (leader, epoch)
    assert [(e.node_id, e.port) for e in resp.node_endpoints] == [(leader, ports(bt)[leader])]


def test_a_parked_fetch_is_answered_at_once_when_its_node_loses_a_partition(bt):
    """As Kafka's DelayedFetch completes on a leader change: a long-polling Fetch on the leader of
    two partitions, naming their leader epochs, is answered as soon as one of them moves,
    FENCED_LEADER_EPOCH with the new leader for it, not at the end of its wait (5 minutes: the
    client's 10 s socket timeout would fail the test first). (Without an epoch a v11+ consumer's
    fetch may be served by a follower, so a move alone does not end its wait, as in Kafka.)"""
    bt.call(bt.broker.create_topic, "f", 2, None, False, False, 3)
    for p in (0, 1):
        if bt.control.cluster()["topics"]["f"][p]["leader"] != 1:
            bt.control.move_leader("f", p, 1)
    epochs = [bt.control.cluster()["topics"]["f"][p]["epoch"] for p in (0, 1)]
    logs = bt.call(lambda: [bt.broker.logs.get("f", p) for p in (0, 1)])
    req = FetchRequest(
        replica_id=-1,
        max_wait_ms=300_000,
        min_bytes=1,
        isolation_level=0,
        session_id=0,
        session_epoch=-1,
        topics=[
            FetchTopic(
                topic="f",
                partitions=[
                    FetchPartition(
                        partition=p,
                        current_leader_epoch=epochs[p],
                        fetch_offset=0,
                        partition_max_bytes=1 << 20,
                    )
                    for p in (0, 1)
                ],
            )
        ],
        forgotten_topics_data=[],
        rack_id="",
    )
    with WireClient(ports(bt)[1]) as c:
        c.send(FETCH, 12, req)
        deadline = time.monotonic() + 30  # loop guard: the fetch is parked on both partitions
        while not bt.call(lambda: all(plog.waiters for plog in logs)):
            assert time.monotonic() < deadline, "the fetch never parked"
            time.sleep(0.01)
        moved = bt.control.move_leader("f", 1, "next")
        _cid, resp = c.recv(FETCH, 12)
    parts = {p.partition_index: p for p in resp.responses[0].partitions}
    assert parts[0].error_code == 0 and parts[0].records in (b"", None)
    assert parts[1].error_code == ErrorCode.FENCED_LEADER_EPOCH
    assert (parts[1].current_leader.leader_id, parts[1].current_leader.leader_epoch) == (
        moved["to"],
        moved["epoch"],
    )


def test_control_api_moves_a_transaction_coordinator_and_node_down_moves_them_too(bt):
    ctl = ControlClient(bt.control_url)
    nodes = bt.broker.nodes
    tid = "tx-move"
    before = bt.call(nodes.txn_coordinator, tid)
    moved = ctl.move_coordinator(transactional_id=tid)
    assert moved["transactional_id"] == tid and moved["from"] == before and moved["to"] != before
    assert moved["slot"] == bt.call(nodes.txn_slot_of, tid)
    host, port = bt.broker.addresses()[0]
    with WireClient(port, host) as c:
        found = c.call(FIND_COORDINATOR, 3, FindCoordinatorRequest(key=tid, key_type=1))
    assert (found.error_code, found.node_id, found.port) == (0, moved["to"], ports(bt)[moved["to"]])
    with pytest.raises(ControlError) as e:
        ctl.move_coordinator(transactional_id=tid, to=moved["to"] + 10)
    assert e.value.status == 409
    with pytest.raises(ValueError):
        ctl.move_coordinator("g", transactional_id=tid)
    ctl.node_down(moved["to"])
    after = bt.call(nodes.txn_coordinator, tid)
    assert after not in (moved["to"], -1)


def test_cluster_state_lists_the_group_and_transaction_coordinator_slots(bt):
    ctl = ControlClient(bt.control_url)
    nodes = bt.broker.nodes
    state = ctl.cluster()
    for key, slots in (("coordinators", nodes.slots), ("txn_coordinators", nodes.txn_slots)):
        assert [s["slot"] for s in state[key]] == list(range(slots.partitions))
        assert [(s["leader"], s["epoch"], s["replicas"]) for s in state[key]] == [
            (slots.leaders[p], slots.leader_epochs[p], slots.replicas[p]) for p in range(slots.partitions)
        ]
        assert all(s["isr"] == s["replicas"] for s in state[key])  # every node is live
    moved = ctl.move_coordinator(transactional_id="tx-1")
    slot = ctl.cluster()["txn_coordinators"][nodes.txn_slot_of("tx-1")]
    assert (slot["leader"], slot["epoch"]) == (moved["to"], 1)
    group_slot = ctl.cluster()["coordinators"][nodes.slot_of("g")]
    down = group_slot["leader"]
    ctl.node_down(down)
    after = ctl.cluster()
    assert all(s["leader"] != down and down not in s["isr"] for s in after["coordinators"])
    assert all(s["leader"] != down and down not in s["isr"] for s in after["txn_coordinators"])
    assert after["coordinators"][nodes.slot_of("g")]["epoch"] == group_slot["epoch"] + 1
