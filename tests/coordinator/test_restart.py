"""Coordinator fail-over: a new coordinator replays the log and the members carry on (seed 000,
case 4). Persisted state comes back exactly; transient state (rebalances in flight, parked requests)
is lost, as in Kafka."""

from __future__ import annotations

from broker.coordinator.classic.group import GroupState
from broker.protocol.errors import ErrorCode

from .context import (
    SESSION_MS,
    CoordinatorContext,
    persisted_view,
    record_view,
    subscription,
)


def client_of(member_id: str) -> str:
    return member_id.split("-", 1)[0]


def stable_with_offsets() -> tuple[CoordinatorContext, list]:
    c = CoordinatorContext()
    members = c.stable_group("g", 2, instances=[None, "ib"])
    c.commit("g", {("foo", 0): 10, ("foo", 1): 11}, 1, members[0].member_id, metadata="m", leader_epoch=2)
    c.commit("simple", {("bar", 0): 5})
    return c, members


def test_restart_reproduces_the_persisted_view():
    c, _members = stable_with_offsets()
    before = persisted_view(c.state)
    c.restart()
    assert persisted_view(c.state) == before
    g = c.group("g")
    assert g.state is GroupState.STABLE and g.static_members == {"ib": _members[1].member_id}


def test_members_get_session_timers_again_after_restart():
    c, (a, b) = stable_with_offsets()
    c.advance(3_000)
    c.restart()
    due = dict(c.timers.due())
    assert due == {
        f"session:g:{a.member_id}": c.now + SESSION_MS,
        f"session:g:{b.member_id}": c.now + SESSION_MS,
        "offsets:expire": c.now + c.config.offsets_retention_check_interval_ms,
    }


def test_members_that_keep_heartbeating_carry_on_in_the_same_generation():
    c, (a, b) = stable_with_offsets()
    start = len(c.log)
    c.restart()
    for _ in range(6):
        c.advance(SESSION_MS // 2)
        assert c.heartbeat("g", 1, a.member_id).error_code == 0
        assert c.heartbeat("g", 1, b.member_id, instance="ib").error_code == 0
    slot, r = c.sync("g", 1, b.member_id, instance="ib")
    assert (r.response.error_code, r.response.assignment) == (0, b.assignment)
    assert c.group("g").generation == 1 and c.group("g").state is GroupState.STABLE
    assert c.log[start:] == []


def test_a_member_that_stops_heartbeating_after_restart_expires_and_triggers_a_rebalance():
    c, (a, b) = stable_with_offsets()
    c.restart()
    c.advance(SESSION_MS // 2)
    assert c.heartbeat("g", 1, a.member_id).error_code == 0
    c.advance(SESSION_MS // 2)  # b's fresh session timer (armed by the restart) expires
    assert set(c.group("g").members) == {a.member_id}
    assert c.heartbeat("g", 1, a.member_id).error_code == ErrorCode.REBALANCE_IN_PROGRESS
    slot, _ = c.join("g", member_id=a.member_id, client_id="c0")
    assert (slot.value.generation_id, slot.value.leader) == (2, a.member_id)


def test_a_rebalance_in_flight_is_lost_and_redone():
    c, (a, b) = stable_with_offsets()
    pairs = [
        c.join("g", member_id=a.member_id, client_id="c0"),
        c.join("g", member_id=b.member_id, instance="ib", client_id="c1"),
    ]
    assert all(s.value.generation_id == 2 for s, _ in pairs)
    c.restart()  # generation 2 was never written
    assert c.group("g").generation == 1 and c.group("g").state is GroupState.STABLE
    assert c.sync("g", 2, a.member_id)[1].response.error_code == ErrorCode.ILLEGAL_GENERATION
    assert c.heartbeat("g", 2, b.member_id, instance="ib").error_code == ErrorCode.ILLEGAL_GENERATION
    slot_a, _ = c.join("g", member_id=a.member_id, client_id="c0")
    slot_b, _ = c.join("g", member_id=b.member_id, instance="ib", client_id="c1")
    assert slot_a.value.generation_id == slot_b.value.generation_id == 2


def test_replaced_static_member_id_survives_restart():
    c, (a, b) = stable_with_offsets()
    new_b = c.join("g", instance="ib", client_id="c1")[1].response.member_id
    c.restart()
    assert c.group("g").static_members == {"ib": new_b}
    assert c.heartbeat("g", 1, b.member_id, instance="ib").error_code == ErrorCode.FENCED_INSTANCE_ID
    assert c.heartbeat("g", 1, new_b, instance="ib").error_code == 0


def test_offsets_and_empty_groups_survive_restart_and_keep_expiring():
    c = CoordinatorContext(offsets_retention_ms=60_000, offsets_retention_check_interval_ms=10_000)
    c.commit("s", {("foo", 0): 1})
    c.advance(30_000)
    c.restart()
    assert c.fetch_groups({"s": None}, version=8).groups[0].topics[0].partitions[0].committed_offset == 1
    c.advance(40_000)
    assert "s" not in c.state.groups and "s" not in c.state.offsets


def test_replay_applies_member_metadata_that_changed_under_the_same_member_id():
    """Every GroupMetadata record fully describes its group (Kafka's replay builds a new group from
    it); a member that rejoined with a new subscription and session timeout under the same id must
    come back with them, as a compacted log (only the last record) would give."""
    c = CoordinatorContext()
    (a,) = c.stable_group("g", 1)
    new_sub = subscription(["foo", "bar"])
    slot, _ = c.join(
        "g", member_id=a.member_id, client_id="c0", session_ms=20_000, protocols=[("range", new_sub)]
    )
    c.sync("g", slot.value.generation_id, a.member_id, {a.member_id: b"\x00"})
    live = persisted_view(c.state)
    assert live["groups"]["g"] == record_view(c.records()[-1].value)
    replayed = persisted_view(c.replayed_state())["groups"]["g"]["members"][a.member_id]
    expected = live["groups"]["g"]["members"][a.member_id]
    assert (
        (replayed["session_timeout"], replayed["subscription"])
        == (20_000, new_sub)
        == (
            expected["session_timeout"],
            expected["subscription"],
        )
    )


def test_describe_after_restart_when_the_protocol_changed_across_generations():
    """Same cause as above: after a protocol switch, replayed members keep only the first
    generation's protocol and DescribeGroups / the next SyncGroup look up the new one (KeyError)."""
    c = CoordinatorContext()
    both = [("range", b"r"), ("roundrobin", b"rr")]
    a, b = c.stable_group("g", 2, protocols=both)
    switched = [("roundrobin", b"rr"), ("range", b"r")]
    members = c.rejoin_all("g", [a, b], protocols=switched)
    c.sync_round("g", members)
    assert c.group("g").protocol_name == "roundrobin"
    c.restart()
    (d,) = c.describe(["g"]).groups
    assert d.protocol_data == "roundrobin"
    assert {m.member_metadata for m in d.members} == {b"rr"}
