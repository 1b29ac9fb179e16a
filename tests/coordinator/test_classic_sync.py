"""SyncGroup, Heartbeat and LeaveGroup of the classic protocol, one rule per test."""

from __future__ import annotations

from broker.coordinator.classic.group import GroupState
from broker.protocol.errors import ErrorCode
from broker.protocol.generated.leave_group import LeaveGroupResponse, MemberResponse
from broker.protocol.generated.sync_group import SyncGroupResponse

from .context import (
    SESSION_MS,
    CoordinatorContext,
    JoinedMember,
    assignment,
    group_record,
    member_record,
)


def client_of(member_id: str) -> str:
    return member_id.split("-", 1)[0]


def leader_and_followers(members):
    leader = next(m for m in members if m.is_leader)
    return leader, [m for m in members if not m.is_leader]


# ---------------------------------------------------------------------- SyncGroup


def test_followers_park_until_the_leader_brings_the_assignment():
    c = CoordinatorContext()
    members = c.join_round("g", 3)
    leader, (f1, f2) = leader_and_followers(members)
    ts = c.group("g").state_timestamp
    s1, r1 = c.sync("g", 1, f1.member_id)
    s2, r2 = c.sync("g", 1, f2.member_id)
    assert r1.response is s1 and r2.response is s2 and not s1.done() and not s2.done()
    assert r1.records == r2.records == []
    plan = {
        leader.member_id: assignment([0, 1]),
        f1.member_id: assignment([2, 3]),
        f2.member_id: assignment([4]),
    }
    sl, rl = c.sync("g", 1, leader.member_id, plan)
    assert rl.response is sl
    for slot, m in ((sl, leader), (s1, f1), (s2, f2)):
        assert slot.value == SyncGroupResponse(
            error_code=0, protocol_type="consumer", protocol_name="range", assignment=plan[m.member_id]
        )
    assert rl.records == [
        group_record(
            "g",
            1,
            [
                member_record(m.member_id, assignment=plan[m.member_id], client_id=client_of(m.member_id))
                for m in members
            ],
            leader=leader.member_id,
            state_timestamp=ts,
        )
    ]
    assert c.group("g").state is GroupState.STABLE


def test_members_left_out_by_the_leader_get_an_empty_assignment_and_unknown_ids_are_ignored():
    c = CoordinatorContext()
    leader, (f,) = leader_and_followers(c.join_round("g", 2))
    s, _ = c.sync("g", 1, f.member_id)
    sl, rl = c.sync("g", 1, leader.member_id, {leader.member_id: b"\x00", "ghost": b"\x01"})
    assert (sl.value.assignment, s.value.assignment) == (b"\x00", b"")
    (record,) = rl.records
    assert {m.member_id: m.assignment for m in record.value.members} == {
        leader.member_id: b"\x00",
        f.member_id: b"",
    }


def test_sync_in_stable_returns_the_current_assignment():
    c = CoordinatorContext()
    members = c.stable_group("g", 2)
    for m in members:
        slot, r = c.sync("g", 1, m.member_id)
        assert r.response is not slot and r.records == []
        assert (r.response.error_code, r.response.assignment) == (0, m.assignment)


def test_sync_with_a_wrong_generation_is_illegal_generation():
    c = CoordinatorContext()
    (a,) = c.join_round("g", 1)
    _s, r = c.sync("g", 2, a.member_id, {a.member_id: b"x"})
    assert r.response == SyncGroupResponse(error_code=ErrorCode.ILLEGAL_GENERATION, assignment=b"")
    assert r.records == [] and c.group("g").state is GroupState.COMPLETING_REBALANCE


def test_sync_from_an_unknown_member_or_group_is_unknown_member_id():
    c = CoordinatorContext()
    c.join_round("g", 1)
    assert c.sync("g", 1, "ghost")[1].response.error_code == ErrorCode.UNKNOWN_MEMBER_ID
    assert c.sync("nope", 1, "ghost")[1].response.error_code == ErrorCode.UNKNOWN_MEMBER_ID


def test_sync_while_preparing_a_rebalance_is_rebalance_in_progress():
    c = CoordinatorContext()
    a, b = c.stable_group("g", 2)
    c.join("g", member_id=a.member_id, client_id="c0")
    _s, r = c.sync("g", 1, b.member_id)
    assert r.response.error_code == ErrorCode.REBALANCE_IN_PROGRESS


def test_sync_v5_with_another_protocol_type_or_name_is_inconsistent_group_protocol():
    c = CoordinatorContext()
    leader, (f,) = leader_and_followers(c.join_round("g", 2))
    bad_type = c.sync("g", 1, f.member_id, protocol_type="connect", protocol_name="range")[1].response
    bad_name = c.sync("g", 1, f.member_id, protocol_type="consumer", protocol_name="roundrobin")[1].response
    assert bad_type.error_code == bad_name.error_code == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    ok, r = c.sync("g", 1, f.member_id, protocol_type="consumer", protocol_name="range")
    assert r.response is ok and not ok.done()
    # before v5 the fields are not sent, so they are not checked
    ok4, r4 = c.sync("g", 1, leader.member_id, {}, version=4, protocol_name="roundrobin")
    assert r4.response is ok4 and ok4.value.error_code == 0


def test_parked_syncs_get_rebalance_in_progress_when_a_rebalance_starts():
    c = CoordinatorContext()
    leader, (f,) = leader_and_followers(c.join_round("g", 2))
    s, _ = c.sync("g", 1, f.member_id)
    c.join_dynamic("g", client_id="late")  # a new member joins during CompletingRebalance
    assert s.value.error_code == ErrorCode.REBALANCE_IN_PROGRESS
    assert c.group("g").state is GroupState.PREPARING_REBALANCE


def test_leader_that_never_syncs_is_removed_after_the_rebalance_timeout():
    c = CoordinatorContext()
    kw = dict(session_ms=30_000, rebalance_ms=10_000)
    leader, (f,) = leader_and_followers(c.join_round("g", 2, **kw))
    s, _ = c.sync("g", 1, f.member_id)
    c.advance(9_999)
    assert not s.done()
    c.advance(1)
    assert s.value.error_code == ErrorCode.REBALANCE_IN_PROGRESS
    g = c.group("g")
    assert set(g.members) == {f.member_id} and g.state is GroupState.PREPARING_REBALANCE
    slot, _ = c.join("g", member_id=f.member_id, client_id=client_of(f.member_id), **kw)
    assert (slot.value.generation_id, slot.value.leader) == (2, f.member_id)


def test_follower_that_never_syncs_is_removed_after_the_rebalance_timeout_even_once_stable():
    """Kafka keeps the pending-sync timer after the leader's SyncGroup (removePendingSyncMember
    cancels it only once *every* member has synced) and expirePendingSync acts in Stable too."""
    c = CoordinatorContext()
    kw = dict(session_ms=30_000, rebalance_ms=10_000)
    leader, (f,) = leader_and_followers(c.join_round("g", 2, **kw))
    c.sync("g", 1, leader.member_id, {leader.member_id: b"\x00", f.member_id: b"\x01"})
    assert c.group("g").state is GroupState.STABLE
    c.advance(5_000)
    assert c.heartbeat("g", 1, f.member_id).error_code == 0  # heartbeats do not replace the sync
    c.advance(5_000)
    assert f.member_id not in set(c.group("g").members), "the follower that never synced is still a member"
    assert c.group("g").state is GroupState.PREPARING_REBALANCE


# ---------------------------------------------------------------------- Heartbeat


def test_heartbeat_errors_and_states():
    c = CoordinatorContext()
    assert c.heartbeat("nope", 0, "x").error_code == ErrorCode.UNKNOWN_MEMBER_ID
    c.commit("empty", {("foo", 0): 1})
    assert c.heartbeat("empty", 0, "x").error_code == ErrorCode.UNKNOWN_MEMBER_ID
    a, b = c.join_round("g", 2, instances=[None, "ib"])
    assert c.heartbeat("g", 1, a.member_id).error_code == 0  # CompletingRebalance
    assert c.heartbeat("g", 1, "ghost").error_code == ErrorCode.UNKNOWN_MEMBER_ID
    assert c.heartbeat("g", 0, a.member_id).error_code == ErrorCode.ILLEGAL_GENERATION
    assert c.heartbeat("g", 1, "ghost", instance="ib").error_code == ErrorCode.FENCED_INSTANCE_ID
    assert c.heartbeat("g", 1, b.member_id, instance="ib").error_code == 0
    c.sync_round("g", [a, b])
    assert c.heartbeat("g", 1, a.member_id).error_code == 0  # Stable
    c.join("g", member_id=a.member_id, client_id="c0")
    assert c.heartbeat("g", 1, b.member_id, instance="ib").error_code == ErrorCode.REBALANCE_IN_PROGRESS
    assert c.heartbeat("g", 0, b.member_id).error_code == ErrorCode.ILLEGAL_GENERATION


def test_heartbeats_keep_a_member_alive():
    c = CoordinatorContext()
    (a,) = c.stable_group("g", 1)
    for _ in range(10):
        c.advance(SESSION_MS - 1)
        assert c.heartbeat("g", 1, a.member_id).error_code == 0
    assert c.group("g").state is GroupState.STABLE and c.log[1:] == []


def test_session_expiry_removes_the_member_and_triggers_a_rebalance():
    c = CoordinatorContext()
    a, b = c.stable_group("g", 2)
    c.advance(5_000)
    assert c.heartbeat("g", 1, a.member_id).error_code == 0
    c.advance(4_999)
    assert b.member_id in c.group("g").members
    c.advance(1)
    g = c.group("g")
    assert set(g.members) == {a.member_id} and g.state is GroupState.PREPARING_REBALANCE
    assert c.heartbeat("g", 1, b.member_id).error_code == ErrorCode.UNKNOWN_MEMBER_ID
    assert c.heartbeat("g", 1, a.member_id).error_code == ErrorCode.REBALANCE_IN_PROGRESS
    slot, _ = c.join("g", member_id=a.member_id, client_id="c0")
    assert (slot.value.generation_id, slot.value.leader, len(slot.value.members)) == (2, a.member_id, 1)


def test_a_member_awaiting_join_is_not_expired():
    c = CoordinatorContext()
    a, b = c.stable_group("g", 2, session_ms=SESSION_MS, rebalance_ms=30_000)
    slot_a, _ = c.join("g", member_id=a.member_id, client_id="c0", session_ms=SESSION_MS, rebalance_ms=30_000)
    for _ in range(5):  # b heartbeats but never rejoins; a stays parked well past its session
        c.advance(5_000)
        assert c.heartbeat("g", 1, b.member_id).error_code == ErrorCode.REBALANCE_IN_PROGRESS
        assert a.member_id in c.group("g").members and not slot_a.done()
    c.advance(5_000)  # the rebalance timeout: b, which did not rejoin, is dropped
    assert (slot_a.value.error_code, slot_a.value.generation_id) == (0, 2)
    assert set(c.group("g").members) == {a.member_id}


# ---------------------------------------------------------------------- LeaveGroup


def test_leave_v0_to_v2_removes_one_member_and_rebalances():
    c = CoordinatorContext()
    a, b = c.stable_group("g", 2)
    resp, r = c.leave("g", member_id=b.member_id, version=1)
    assert resp == LeaveGroupResponse(error_code=0) and r.records == []
    assert set(c.group("g").members) == {a.member_id}
    assert c.heartbeat("g", 1, a.member_id).error_code == ErrorCode.REBALANCE_IN_PROGRESS
    slot, _ = c.join("g", member_id=a.member_id, client_id="c0")
    assert slot.value.generation_id == 2


def test_leave_v0_to_v2_unknown_member_or_group():
    c = CoordinatorContext()
    c.stable_group("g", 1)
    assert c.leave("g", member_id="ghost", version=2)[0].error_code == ErrorCode.UNKNOWN_MEMBER_ID
    assert c.leave("nope", member_id="ghost", version=0)[0].error_code == ErrorCode.UNKNOWN_MEMBER_ID


def test_leave_v3_batch_by_member_id_and_instance_id():
    c = CoordinatorContext()
    a, b, d, e = c.stable_group("g", 4, instances=[None, "ib", "id", None])
    batch = [
        ("wrong", "id"),  # instance known, other member id
        ("", "ib"),  # administrative removal by instance id alone
        ("ghost", None),
        (a.member_id, None),
        ("", "unknown-instance"),
        (d.member_id, "id"),
    ]
    resp, r = c.leave("g", members=batch, version=4)
    assert resp == LeaveGroupResponse(
        error_code=0,
        members=[
            MemberResponse("wrong", "id", ErrorCode.FENCED_INSTANCE_ID),
            MemberResponse("", "ib", 0),
            MemberResponse("ghost", None, ErrorCode.UNKNOWN_MEMBER_ID),
            MemberResponse(a.member_id, None, 0),
            MemberResponse("", "unknown-instance", ErrorCode.UNKNOWN_MEMBER_ID),
            MemberResponse(d.member_id, "id", 0),
        ],
    )
    g = c.group("g")
    assert set(g.members) == {e.member_id} and g.static_members == {}
    assert g.state is GroupState.PREPARING_REBALANCE and r.records == []
    slot, _ = c.join("g", member_id=e.member_id, client_id="c3")
    assert (slot.value.generation_id, slot.value.leader) == (2, e.member_id)


def test_leave_of_a_member_parked_in_join_answers_its_join_with_unknown_member_id():
    c = CoordinatorContext()
    a, b = c.stable_group("g", 2)
    slot_a, _ = c.join("g", member_id=a.member_id, client_id="c0")
    c.leave("g", member_id=a.member_id)
    assert slot_a.value.error_code == ErrorCode.UNKNOWN_MEMBER_ID
    slot_b, _ = c.join("g", member_id=b.member_id, client_id="c1")
    assert (slot_b.value.generation_id, slot_b.value.leader) == (2, b.member_id)


def test_last_member_leaving_empties_the_group_at_once():
    """Kafka: prepareRebalance -> maybeCompleteJoinElseSchedule completes the join phase in the same
    operation when every remaining member (here: none) has joined, writing the Empty generation."""
    c = CoordinatorContext()
    (a,) = c.stable_group("g", 1)
    _resp, r = c.leave("g", member_id=a.member_id)
    assert c.group("g").state is GroupState.EMPTY, "the Empty generation waits for a 0 ms timer"
    assert [(rec.value.generation, rec.value.members) for rec in r.records] == [(2, [])]


def test_pending_member_leave():
    c = CoordinatorContext()
    c.stable_group("g", 1)
    _slot, first = c.join("g", client_id="p")
    pending = first.response.member_id
    resp, _ = c.leave("g", members=[(pending, None)], version=3)
    assert resp.members == [MemberResponse(pending, None, 0)]
    assert c.group("g").pending_members == set()
    assert not any(k.startswith("pending:") for k, _ in c.timers.due())
    assert c.join("g", member_id=pending, client_id="p")[1].response.error_code == ErrorCode.UNKNOWN_MEMBER_ID


def test_pending_member_leave_completes_the_join_phase_when_everyone_else_has_joined():
    """Kafka: LeaveGroup in PreparingRebalance calls maybeCompleteJoinPhase after removing members,
    pending ones included."""
    c = CoordinatorContext()
    (a,) = c.stable_group("g", 1)
    pending = c.join("g", client_id="p")[1].response.member_id
    slot_a, _ = c.join("g", member_id=a.member_id, client_id="c0")
    assert not slot_a.done()
    c.leave("g", members=[(pending, None)], version=3)
    assert slot_a.done(), (
        "the join phase still waits (until the rebalance timeout) after the pending member left"
    )
    assert slot_a.value.generation_id == 2


# ---------------------------------------------------------------------- cooperative rebalancing


def test_cooperative_follow_up_rebalance_reaches_a_new_stable_generation():
    """Cooperative assignors rebalance twice (revoke, then reassign); at the protocol level each
    rejoin opens a new generation and the group returns to Stable after each."""
    c = CoordinatorContext()
    coop = [("cooperative-sticky", b"owned")]
    a, b = c.stable_group("g", 2, protocols=coop)
    # first rebalance: a new member arrives, the others learn it from their heartbeats
    slot_new, _ = c.join_dynamic("g", client_id="c2", protocols=coop)
    for m in (a, b):
        assert c.heartbeat("g", 1, m.member_id).error_code == ErrorCode.REBALANCE_IN_PROGRESS
    members = c.rejoin_all("g", [a, b], protocols=coop) + [_joined(slot_new.value)]
    assert {m.generation for m in members} == {2}
    members = c.sync_round("g", members)
    assert c.group("g").state is GroupState.STABLE
    # follow-up rebalance: the members that revoked partitions rejoin straight away (leader first)
    members.sort(key=lambda m: not m.is_leader)
    members = c.rejoin_all("g", members, protocols=coop)
    assert {m.generation for m in members} == {3}
    c.sync_round("g", members)
    g = c.group("g")
    assert g.state is GroupState.STABLE and g.generation == 3 and len(g.members) == 3
    assert [rec.value.generation for rec in c.records()] == [1, 2, 3]


def _joined(resp):
    return JoinedMember(resp.member_id, resp.generation_id, resp.leader)
