"""JoinGroup and the join phase of the classic protocol, one rule per test (Kafka's classic
coordinator, GroupMetadataManager#classicGroupJoin and friends, is the reference)."""

from __future__ import annotations

import pytest

from broker.coordinator.classic.group import GroupState
from broker.protocol.errors import ErrorCode
from broker.protocol.generated.join_group import JoinGroupResponseMember

from .context import (
    PROTOCOLS,
    REBALANCE_MS,
    SESSION_MS,
    CoordinatorContext,
    group_record,
    member_record,
    subscription,
)

SUB = PROTOCOLS[0][1]


def client_of(member_id: str) -> str:
    return member_id.split("-", 1)[0]


def members_of(resp) -> dict[str, tuple[str | None, bytes]]:
    return {m.member_id: (m.group_instance_id, m.metadata) for m in resp.members}


# ---------------------------------------------------------------------- two-step join (KIP-394)


def test_v4_join_without_member_id_gets_member_id_required_with_generated_id():
    c = CoordinatorContext()
    slot, r = c.join("g", version=4, client_id="cli")
    resp = r.response
    assert resp.error_code == ErrorCode.MEMBER_ID_REQUIRED
    assert resp.member_id.startswith("cli-") and len(resp.member_id) > len("cli-")
    assert (resp.generation_id, resp.leader, resp.members) == (-1, "", [])
    assert not slot.done() and r.records == [] and c.log == []
    g = c.group("g")
    assert g.state is GroupState.EMPTY and g.members == {} and g.pending_members == {resp.member_id}
    _slot, r2 = c.join("g", version=4, client_id="cli")
    assert r2.response.member_id != resp.member_id


def test_pending_member_expires_after_session_timeout():
    c = CoordinatorContext()
    _slot, r = c.join("g", version=5, session_ms=SESSION_MS)
    pending = r.response.member_id
    c.advance(SESSION_MS - 1)
    assert pending in c.group("g").pending_members
    c.advance(1)
    assert c.group("g").pending_members == set()
    _slot, r2 = c.join("g", member_id=pending, version=5)
    assert r2.response.error_code == ErrorCode.UNKNOWN_MEMBER_ID
    assert c.group("g").members == {}


def test_rejoin_with_generated_id_completes_after_the_initial_delay():
    c = CoordinatorContext(initial_rebalance_delay_ms=3000)
    _slot, r = c.join("g", version=9, client_id="cli")
    mid = r.response.member_id
    slot, r = c.join("g", member_id=mid, version=9, client_id="cli")
    assert r.response is slot and not slot.done()
    assert c.group("g").state is GroupState.PREPARING_REBALANCE
    c.advance(2999)
    assert not slot.done()
    c.advance(1)
    resp = slot.value
    assert resp.error_code == 0
    assert (resp.generation_id, resp.member_id, resp.leader) == (1, mid, mid)
    assert (resp.protocol_type, resp.protocol_name, resp.skip_assignment) == ("consumer", "range", False)
    assert resp.members == [JoinGroupResponseMember(mid, None, SUB)]
    assert c.group("g").state is GroupState.COMPLETING_REBALANCE
    assert c.log == []  # the join phase writes nothing; the leader's SyncGroup does


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_v0_to_v3_join_is_one_step(version):
    c = CoordinatorContext(initial_rebalance_delay_ms=3000)
    slot, r = c.join("g", version=version, client_id="old")
    assert r.response is slot and not slot.done()
    (mid,) = c.group("g").members
    assert mid.startswith("old-") and c.group("g").pending_members == set()
    member = c.group("g").members[mid]
    assert member.rebalance_timeout_ms == (SESSION_MS if version == 0 else REBALANCE_MS)
    c.advance(3000)
    resp = slot.value
    assert (resp.error_code, resp.generation_id, resp.member_id, resp.leader) == (0, 1, mid, mid)
    assert resp.protocol_name == "range"


def test_known_member_id_on_unknown_group_is_unknown_member_id():
    c = CoordinatorContext()
    _slot, r = c.join("nope", member_id="ghost")
    assert (r.response.error_code, r.response.member_id) == (ErrorCode.UNKNOWN_MEMBER_ID, "ghost")
    assert "nope" not in c.state.groups


# ---------------------------------------------------------------------- validation


def test_empty_group_id_is_invalid_group_id():
    c = CoordinatorContext()
    _slot, r = c.join("", member_id="m")
    assert (r.response.error_code, r.response.member_id) == (ErrorCode.INVALID_GROUP_ID, "m")
    assert c.state.groups == {}


@pytest.mark.parametrize(
    "session_ms, error",
    [
        (5999, ErrorCode.INVALID_SESSION_TIMEOUT),
        (6000, ErrorCode.MEMBER_ID_REQUIRED),
        (1_800_000, ErrorCode.MEMBER_ID_REQUIRED),
        (1_800_001, ErrorCode.INVALID_SESSION_TIMEOUT),
    ],
)
def test_session_timeout_must_lie_within_the_configured_bounds(session_ms, error):
    c = CoordinatorContext(min_session_timeout_ms=6000, max_session_timeout_ms=1_800_000)
    _slot, r = c.join("g", session_ms=session_ms)
    assert r.response.error_code == error


def test_protocol_type_mismatch_is_inconsistent_group_protocol():
    c = CoordinatorContext()
    c.stable_group("g", 1)
    _slot, r = c.join("g", protocol_type="connect")
    assert r.response.error_code == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    assert c.group("g").pending_members == set()


def test_no_protocol_in_common_is_inconsistent_group_protocol():
    c = CoordinatorContext()
    c.stable_group("g", 1)
    _slot, r = c.join("g", protocols=[("roundrobin", SUB)])
    assert r.response.error_code == ErrorCode.INCONSISTENT_GROUP_PROTOCOL


@pytest.mark.parametrize("protocol_type, protocols", [("consumer", []), ("", PROTOCOLS)])
def test_empty_protocols_or_type_are_inconsistent_even_for_a_new_group(protocol_type, protocols):
    c = CoordinatorContext()
    _slot, r = c.join("g", protocol_type=protocol_type, protocols=protocols)
    assert r.response.error_code == ErrorCode.INCONSISTENT_GROUP_PROTOCOL


def test_protocol_is_chosen_by_the_members_votes():
    c = CoordinatorContext()
    prefs = {"a": ["roundrobin", "range"], "b": ["range", "roundrobin"], "d": ["range", "roundrobin"]}
    slots = []
    for client, names in prefs.items():
        protocols = [(n, f"{n}-{client}".encode()) for n in names]
        slots.append(c.join("g", version=3, client_id=client, protocols=protocols)[0])
    c.settle(slots)
    leader = slots[0].value
    assert {s.value.protocol_name for s in slots} == {"range"}
    assert leader.leader == leader.member_id and client_of(leader.member_id) == "a"
    assert {client_of(m): meta for m, (_i, meta) in members_of(leader).items()} == {
        "a": b"range-a",
        "b": b"range-b",
        "d": b"range-d",
    }
    assert slots[1].value.members == [] and slots[2].value.members == []


# ---------------------------------------------------------------------- initial rebalance delay


def test_initial_delay_is_extended_while_new_members_arrive():
    c = CoordinatorContext(initial_rebalance_delay_ms=3000)
    kw = dict(version=3, rebalance_ms=10_000)
    a = c.join("g", client_id="a", **kw)[0]  # t=0: delay until 3000 (7000 left)
    c.advance(2000)
    b = c.join("g", client_id="b", **kw)[0]  # t=2000
    c.advance(1000)  # t=3000: a member arrived, extend to 6000 (4000 left)
    assert not a.done()
    c.advance(2000)
    d = c.join("g", client_id="d", **kw)[0]  # t=5000
    c.advance(1000)  # t=6000: extend to 9000 (1000 left)
    c.advance(2999)
    assert not any(s.done() for s in (a, b, d))
    c.advance(1)  # t=9000: nobody new, complete
    assert [s.value.generation_id for s in (a, b, d)] == [1, 1, 1]
    assert len(a.value.members) == 3


def test_initial_delay_extension_is_capped_by_the_rebalance_timeout():
    c = CoordinatorContext(initial_rebalance_delay_ms=3000)
    kw = dict(version=3, rebalance_ms=7000)
    slots = [c.join("g", client_id="a", **kw)[0]]  # t=0: 4000 left
    c.advance(2000)
    slots.append(c.join("g", client_id="b", **kw)[0])
    c.advance(3000)  # t=5000 (extended at 3000 to 6000, 1000 left)
    slots.append(c.join("g", client_id="d", **kw)[0])
    c.advance(1500)  # t=6500 (extended at 6000 by the last 1000 ms)
    slots.append(c.join("g", client_id="e", **kw)[0])
    c.advance(499)
    assert not any(s.done() for s in slots)
    c.advance(1)  # t=7000 = the rebalance timeout: complete although a member just arrived
    assert [s.value.generation_id for s in slots] == [1, 1, 1, 1]


# ---------------------------------------------------------------------- rebalances after Stable


def test_follower_rejoining_a_stable_group_with_same_metadata_gets_the_current_generation():
    c = CoordinatorContext()
    a, b = c.stable_group("g", 2)
    slot, r = c.join("g", member_id=b.member_id, client_id="c1")
    resp = r.response
    assert resp is not slot
    assert (resp.error_code, resp.generation_id, resp.member_id, resp.leader) == (
        0,
        1,
        b.member_id,
        a.member_id,
    )
    assert resp.members == [] and c.group("g").state is GroupState.STABLE


def test_leader_rejoin_rebalances_and_completion_bumps_the_generation_keeping_the_leader():
    c = CoordinatorContext()
    a, b = c.stable_group("g", 2)
    slot_a, r = c.join("g", member_id=a.member_id, client_id="c0")
    assert r.response is slot_a and not slot_a.done()
    assert c.group("g").state is GroupState.PREPARING_REBALANCE
    assert c.heartbeat("g", 1, b.member_id).error_code == ErrorCode.REBALANCE_IN_PROGRESS
    slot_b, _ = c.join("g", member_id=b.member_id, client_id="c1")
    ra, rb = slot_a.value, slot_b.value
    assert (ra.generation_id, rb.generation_id) == (2, 2)
    assert ra.leader == rb.leader == a.member_id
    assert set(members_of(ra)) == {a.member_id, b.member_id} and rb.members == []
    assert c.group("g").state is GroupState.COMPLETING_REBALANCE


def test_rejoin_during_completing_rebalance_with_same_metadata_returns_the_current_generation():
    c = CoordinatorContext()
    a, b = c.join_round("g", 2)
    _slot, r = c.join("g", member_id=a.member_id, client_id="c0")
    assert (r.response.generation_id, r.response.leader) == (1, a.member_id)
    assert set(members_of(r.response)) == {a.member_id, b.member_id}  # the leader gets them again
    assert c.group("g").state is GroupState.COMPLETING_REBALANCE


def test_rebalance_timeout_drops_members_that_did_not_rejoin_and_elects_a_joined_leader():
    c = CoordinatorContext()
    kw = dict(session_ms=30_000, rebalance_ms=10_000)
    a, b = c.stable_group("g", 2, **kw)
    # the follower rejoins with a new subscription; the leader never rejoins
    slot_b, _ = c.join("g", member_id=b.member_id, protocols=[("range", subscription(["bar"]))], **kw)
    c.advance(9_999)
    assert not slot_b.done()
    c.advance(1)
    resp = slot_b.value
    assert (resp.error_code, resp.generation_id, resp.leader) == (0, 2, b.member_id)
    assert members_of(resp) == {b.member_id: (None, subscription(["bar"]))}
    assert set(c.group("g").members) == {b.member_id}
    assert c.heartbeat("g", 1, a.member_id).error_code == ErrorCode.UNKNOWN_MEMBER_ID


def test_group_max_size_reached():
    c = CoordinatorContext(max_size=2)
    a, b = c.stable_group("g", 2)
    _slot, r = c.join("g", version=5)
    assert (r.response.error_code, r.response.member_id) == (ErrorCode.GROUP_MAX_SIZE_REACHED, "")
    _slot, r = c.join("g", version=3)
    assert r.response.error_code == ErrorCode.GROUP_MAX_SIZE_REACHED
    _slot, r = c.join("g", instance="new-static")
    assert r.response.error_code == ErrorCode.GROUP_MAX_SIZE_REACHED
    assert set(c.group("g").members) == {a.member_id, b.member_id}
    _slot, r = c.join("g", member_id=b.member_id, client_id="c1")  # existing members still rejoin
    assert r.response.error_code == 0


def test_pending_member_holds_the_join_phase_until_it_rejoins():
    c = CoordinatorContext()
    (a,) = c.stable_group("g", 1)
    _slot, r = c.join("g", client_id="p")
    pending = r.response.member_id
    slot_a, _ = c.join("g", member_id=a.member_id, client_id="c0")
    assert not slot_a.done()
    slot_p, _ = c.join("g", member_id=pending, client_id="p")
    assert slot_a.value.generation_id == slot_p.value.generation_id == 2
    assert set(members_of(slot_a.value)) == {a.member_id, pending}


def test_pending_member_survives_a_join_phase_completed_by_the_timer():
    """Kafka keeps pending members across completeClassicGroupJoin (only pending *sync* members are
    cleared), so a pending member that rejoins later is added and triggers the next rebalance."""
    c = CoordinatorContext()
    (a,) = c.stable_group("g", 1, session_ms=30_000, rebalance_ms=10_000)
    _slot, r = c.join("g", client_id="p", session_ms=30_000)
    pending = r.response.member_id
    slot_a, _ = c.join("g", member_id=a.member_id, client_id="c0", session_ms=30_000, rebalance_ms=10_000)
    c.advance(10_000)
    assert slot_a.value.generation_id == 2
    slot_p, r = c.join("g", member_id=pending, client_id="p", session_ms=30_000)
    assert r.response is slot_p, f"pending member refused: {r.response}"
    assert pending in c.group("g").members
    assert c.group("g").state is GroupState.PREPARING_REBALANCE


# ---------------------------------------------------------------------- static membership (KIP-345)


def test_static_member_rejoining_stable_group_unchanged_gets_new_id_without_rebalance():
    c = CoordinatorContext()
    a, b = c.stable_group("g", 2, instances=["ia", "ib"])
    ts = c.group("g").state_timestamp
    slot, r = c.join("g", instance="ib", client_id="c1")
    resp = r.response
    new_b = resp.member_id
    assert resp is not slot and resp.error_code == 0
    assert new_b != b.member_id
    assert (resp.generation_id, resp.leader, resp.members, resp.skip_assignment) == (
        1,
        a.member_id,
        [],
        False,
    )
    assert resp.protocol_name == "range"
    g = c.group("g")
    assert g.state is GroupState.STABLE and g.generation == 1
    assert set(g.members) == {a.member_id, new_b} and g.static_members == {"ia": a.member_id, "ib": new_b}
    assert r.records == [
        group_record(
            "g",
            1,
            [
                member_record(a.member_id, assignment=a.assignment, instance="ia", client_id="c0"),
                member_record(new_b, assignment=b.assignment, instance="ib", client_id="c1"),
            ],
            leader=a.member_id,
            state_timestamp=ts,
        )
    ]
    # the replaced id is fenced everywhere
    assert c.heartbeat("g", 1, b.member_id, instance="ib").error_code == ErrorCode.FENCED_INSTANCE_ID
    slot_s, r_s = c.sync("g", 1, b.member_id, instance="ib")
    assert r_s.response.error_code == ErrorCode.FENCED_INSTANCE_ID
    commit = c.commit("g", {("foo", 0): 5}, generation=1, member_id=b.member_id, instance="ib", version=8)
    assert commit.response.topics[0].partitions[0].error_code == ErrorCode.FENCED_INSTANCE_ID
    assert commit.records == []
    # the new id carries on with the old assignment
    assert c.heartbeat("g", 1, new_b, instance="ib").error_code == 0
    slot_s, r_s = c.sync("g", 1, new_b, instance="ib")
    assert (r_s.response.error_code, r_s.response.assignment) == (0, b.assignment)


def test_static_member_known_instance_with_wrong_member_id_is_fenced():
    c = CoordinatorContext()
    c.stable_group("g", 2, instances=["ia", "ib"])
    _slot, r = c.join("g", member_id="bogus", instance="ib")
    assert (r.response.error_code, r.response.member_id) == (ErrorCode.FENCED_INSTANCE_ID, "bogus")


def test_static_member_rejoining_with_a_protocol_change_triggers_a_rebalance():
    c = CoordinatorContext()
    both = [("range", b"r"), ("roundrobin", b"rr")]
    a, b = c.stable_group("g", 2, instances=["ia", "ib"], protocols=both)
    slot, r = c.join("g", instance="ib", client_id="c1", protocols=[("roundrobin", b"rr2")])
    assert r.response is slot and not slot.done() and r.records == []
    new_b = next(m for m in c.group("g").members if m != a.member_id)
    assert c.group("g").state is GroupState.PREPARING_REBALANCE
    assert c.heartbeat("g", 1, b.member_id, instance="ib").error_code == ErrorCode.FENCED_INSTANCE_ID
    slot_a, _ = c.join("g", member_id=a.member_id, instance="ia", client_id="c0", protocols=both)
    assert (slot_a.value.generation_id, slot_a.value.protocol_name) == (2, "roundrobin")
    assert members_of(slot_a.value)[new_b] == ("ib", b"rr2")


def test_static_member_rejoining_with_new_subscription_but_same_protocol_does_not_rebalance():
    """Kafka (updateStaticMemberThenRebalanceOrCompleteJoin): in Stable, a static member that rejoins
    without changing the group's selected protocol is persisted without a rebalance, even when its
    subscription bytes changed (the consumer's leader/follower logic detects the change itself)."""
    c = CoordinatorContext()
    a, b = c.stable_group("g", 2, instances=["ia", "ib"])
    new_sub = subscription(["foo", "bar"])
    slot, r = c.join("g", instance="ib", client_id="c1", protocols=[("range", new_sub)])
    assert r.response is not slot, "a rebalance was started"
    assert (r.response.error_code, r.response.generation_id) == (0, 1)
    assert c.group("g").state is GroupState.STABLE
    (record,) = r.records
    assert {m.member_id: m.subscription for m in record.value.members}[r.response.member_id] == new_sub


def test_static_member_that_does_not_rejoin_stays_in_the_group():
    """Kafka removes only *dynamic* members that did not rejoin when the join phase completes; static
    members stay (their session timeout is what removes them) and keep their assignment."""
    c = CoordinatorContext()
    kw = dict(session_ms=30_000, rebalance_ms=10_000)
    a, b = c.stable_group("g", 2, instances=["ia", "ib"], **kw)
    slot_a, _ = c.join("g", member_id=a.member_id, instance="ia", client_id="c0", **kw)
    c.advance(10_000)
    resp = slot_a.value
    assert (resp.error_code, resp.generation_id, resp.leader) == (0, 2, a.member_id)
    assert b.member_id in set(c.group("g").members), "the static member that did not rejoin was removed"
    assert set(members_of(resp)) == {a.member_id, b.member_id}


# ---------------------------------------------------------------------- KIP-814


def test_static_leader_rejoin_v9_skips_assignment_and_gets_all_members():
    c = CoordinatorContext()
    a, b = c.stable_group("g", 2, instances=["ia", "ib"])
    ts = c.group("g").state_timestamp
    slot, r = c.join("g", instance="ia", client_id="c0", version=9)
    resp = r.response
    new_a = resp.member_id
    assert resp is not slot and resp.error_code == 0
    assert (resp.generation_id, resp.leader, resp.skip_assignment) == (1, new_a, True)
    assert members_of(resp) == {new_a: ("ia", SUB), b.member_id: ("ib", SUB)}
    assert r.records == [
        group_record(
            "g",
            1,
            [
                member_record(b.member_id, assignment=b.assignment, instance="ib", client_id="c1"),
                member_record(new_a, assignment=a.assignment, instance="ia", client_id="c0"),
            ],
            leader=new_a,
            state_timestamp=ts,
        )
    ]
    # the leader skips the assignment: its SyncGroup gets the existing one, nothing is written
    slot_s, r_s = c.sync("g", 1, new_a, instance="ia")
    assert (r_s.response.error_code, r_s.response.assignment) == (0, a.assignment) and r_s.records == []
    assert c.group("g").members[b.member_id].assignment == b.assignment


def test_static_leader_rejoin_below_v9_does_not_skip_and_is_not_told_it_leads():
    """Kafka (v<9): skipAssignment=false, leader = the *previous* leader id and no members, so an old
    client does not compute an assignment a Stable group would ignore anyway."""
    c = CoordinatorContext()
    a, b = c.stable_group("g", 2, instances=["ia", "ib"])
    slot, r = c.join("g", instance="ia", client_id="c0", version=8)
    resp = r.response
    assert resp.error_code == 0 and resp.skip_assignment is False
    slot_s, r_s = c.sync("g", 1, resp.member_id, instance="ia")
    assert (r_s.response.error_code, r_s.response.assignment) == (0, a.assignment)
    assert resp.leader == a.member_id, (
        "a v<9 static leader is told it leads (new id) instead of the old leader id"
    )
    assert resp.members == []
