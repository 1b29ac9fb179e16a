"""The design documents' coordinator failure points on a simulated 3-node cluster, driven by wire
clients (each member's requests and answers are observable): the coordinator moves

(b) after the join phase completed but before every member got its JoinGroup answer (a fault rule
    drops one): as in Kafka's classic coordinator a generation is persisted only with its
    assignment, so the new coordinator has the previously persisted state (here: none) and the
    members rejoin (UNKNOWN_MEMBER_ID for members it never had);
(c) before the assignment is persisted: the parked SyncGroup is answered NOT_COORDINATOR, and the
    generation that was never persisted is refused by the new coordinator (members rejoin);
(d) after the assignment is persisted but before every SyncGroup answer (a fault rule drops one):
    the member that missed its answer syncs again at the new coordinator and gets its assignment in
    the same generation, without a rebalance.

Moving the coordinator while JoinGroups are parked (a) is in test_cluster_server.py.
"""

from __future__ import annotations

import time

import pytest

from broker.control import ControlClient
from broker.protocol.errors import ErrorCode
from broker.protocol.generated.find_coordinator import FindCoordinatorRequest
from broker.protocol.generated.join_group import JoinGroupRequest, JoinGroupRequestProtocol
from broker.protocol.generated.sync_group import SyncGroupRequest, SyncGroupRequestAssignment
from tests.support.wire import WireClient

FIND_COORDINATOR, JOIN_GROUP, SYNC_GROUP = 10, 11, 14

pytestmark = pytest.mark.server


@pytest.fixture
def bt(broker_factory):
    return broker_factory({"cluster.nodes": 3, "control.port": 0, "group.initial.rebalance.delay.ms": 0})


def ports(bt) -> dict[int, int]:
    return {node: port for node, (_h, port) in zip((1, 2, 3), bt.broker.addresses(), strict=True)}


def coordinator(bt, group) -> int:
    with WireClient(ports(bt)[1]) as c:
        return c.call(FIND_COORDINATOR, 3, FindCoordinatorRequest(key=group, key_type=0)).node_id


def join_request(group, member_id=""):
    return JoinGroupRequest(
        group_id=group,
        session_timeout_ms=30000,
        rebalance_timeout_ms=30000,
        member_id=member_id,
        protocol_type="consumer",
        protocols=[JoinGroupRequestProtocol("range", b"meta")],
    )


def sync_request(group, generation, member_id, assignments=()):
    return SyncGroupRequest(
        group_id=group,
        generation_id=generation,
        member_id=member_id,
        protocol_type="consumer",
        protocol_name="range",
        assignments=[SyncGroupRequestAssignment(m, a) for m, a in assignments],
    )


def connection_id(bt, client: WireClient) -> int:
    host, port = client.sock.getsockname()[:2]
    return next(c["id"] for c in bt.control.connections() if c["peer"] == f"{host}:{port}")


def wait_for(bt, group, state):
    read = lambda: bt.call(lambda: bt.broker.groups.state.groups[group].state.value)  # noqa: E731
    while read() != state:
        time.sleep(0.01)


def two_members(bt, group, port, drop_b_join=False):
    """a forms generation 1 alone (never synced, so nothing is persisted); b's JoinGroup starts a
    rebalance and a's rejoin completes generation 2, a leading. Returns a, b, their ids, a's
    answer, and b's JoinGroup correlation id (its answer still to read, or dropped)."""
    a, b = WireClient(port), WireClient(port)
    a_id = a.call(JOIN_GROUP, 9, join_request(group)).member_id
    assert a.call(JOIN_GROUP, 9, join_request(group, a_id)).generation_id == 1
    b_id = b.call(JOIN_GROUP, 9, join_request(group)).member_id
    if drop_b_join:
        bt.control.add_rule(api="JoinGroup", connection=connection_id(bt, b), drop=True, times=1)
    b_cid = b.send(JOIN_GROUP, 9, join_request(group, b_id))  # parked until a rejoins
    wait_for(bt, group, "PreparingRebalance")
    a_joined = a.call(JOIN_GROUP, 9, join_request(group, a_id))
    assert (a_joined.error_code, a_joined.generation_id, a_joined.leader) == (0, 2, a_id)
    return a, b, a_id, b_id, a_joined, b_cid


def test_b_join_answer_lost_then_the_coordinator_moves(bt):
    group = "fail-b"
    a, b, a_id, b_id, _a_joined, _cid = two_members(
        bt, group, ports(bt)[coordinator(bt, group)], drop_b_join=True
    )
    assert bt.control.rules() == []  # b's answer was dropped: b never learnt generation 2
    moved = ControlClient(bt.control_url).move_coordinator(group)
    with WireClient(ports(bt)[moved["to"]]) as new:
        # no generation was ever persisted: the new coordinator knows neither member
        assert new.call(JOIN_GROUP, 9, join_request(group, b_id)).error_code == ErrorCode.UNKNOWN_MEMBER_ID
        assert new.call(SYNC_GROUP, 5, sync_request(group, 2, a_id)).error_code == ErrorCode.UNKNOWN_MEMBER_ID
        # the documented recovery: join again without a member id
        assert new.call(JOIN_GROUP, 9, join_request(group)).error_code == ErrorCode.MEMBER_ID_REQUIRED
    a.close()
    b.close()


def test_c_coordinator_moves_before_the_assignment_is_persisted(bt):
    group = "fail-c"
    a, b, a_id, b_id, _a_joined, b_cid = two_members(bt, group, ports(bt)[coordinator(bt, group)])
    corr, b_joined = b.recv(JOIN_GROUP, 9)
    assert corr == b_cid and b_joined.generation_id == 2
    parked = b.send(SYNC_GROUP, 5, sync_request(group, 2, b_id))  # the follower waits for the leader
    while not bt.call(lambda: bt.broker.groups.state.groups[group].members[b_id].awaiting_sync):
        time.sleep(0.01)
    moved = ControlClient(bt.control_url).move_coordinator(group)
    corr, answer = b.recv(SYNC_GROUP, 5)
    assert corr == parked and answer.error_code == ErrorCode.NOT_COORDINATOR
    with WireClient(ports(bt)[moved["to"]]) as new:
        # the leader's assignment reaches a coordinator that never saw generation 2 persisted
        late = new.call(SYNC_GROUP, 5, sync_request(group, 2, a_id, [(a_id, b"A"), (b_id, b"B")]))
        assert late.error_code == ErrorCode.UNKNOWN_MEMBER_ID
        assert new.call(SYNC_GROUP, 5, sync_request(group, 2, b_id)).error_code == ErrorCode.UNKNOWN_MEMBER_ID
    a.close()
    b.close()


def test_d_sync_answer_lost_after_the_assignment_is_persisted(bt):
    group = "fail-d"
    a, b, a_id, b_id, _a_joined, b_cid = two_members(bt, group, ports(bt)[coordinator(bt, group)])
    assert b.recv(JOIN_GROUP, 9)[1].generation_id == 2
    bt.control.add_rule(api="SyncGroup", connection=connection_id(bt, b), drop=True, times=1)
    b.send(SYNC_GROUP, 5, sync_request(group, 2, b_id))  # its answer will be dropped
    assignments = [(a_id, b"to-a"), (b_id, b"to-b")]
    assert a.call(SYNC_GROUP, 5, sync_request(group, 2, a_id, assignments)).assignment == b"to-a"
    while bt.control.rules():  # b's answer is dropped once the assignment is persisted
        time.sleep(0.01)
    moved = ControlClient(bt.control_url).move_coordinator(group)
    with WireClient(ports(bt)[moved["to"]]) as new:
        again = new.call(SYNC_GROUP, 5, sync_request(group, 2, b_id))
    assert (again.error_code, again.assignment) == (0, b"to-b")
    g = bt.control.group(group)
    assert (g["state"], g["generation"]) == ("STABLE", 2)  # no rebalance
    a.close()
    b.close()
