"""The design documents' coordinator failure points on the pure coordinator (the test context's
``restart``: a new coordinator replays the log, parked requests are lost, as a coordinator move
does: broker/coordinator GroupCoordinator.reload_groups, where the old node answers those parked
requests NOT_COORDINATOR first -- tests/server/test_cluster_failover.py,
tests/integration/test_cluster_failover_clients.py). The client-side assignment proposal's four
points, each with the outcome it states:

(a) before the join phase completes (JoinGroups parked): the new coordinator has the persisted
    generation; the members rejoin there and the rebalance completes in the next generation;
(b) after the join phase completed but before every member has its JoinGroup answer: the new
    generation was never persisted (a classic generation is written with its assignment), so
    SyncGroup and Heartbeat with it are ILLEGAL_GENERATION and the members rejoin;
(c) before the assignment is persisted (followers' SyncGroups parked, the leader's not yet in): the
    same as (b);
(d) after the assignment is persisted but before every SyncGroup answer: the new coordinator has
    the generation and every assignment; a member that missed its answer syncs again and gets it,
    and everybody heartbeats on in that generation: no rebalance, nothing written.

The proposal persists the generation on its own (its step 2) and so has (b) end with the members
that got their answer syncing and (c) with everybody re-sending SyncGroup; Kafka's classic
coordinator (and this one) writes a generation only with its assignment (step 4), so at (b) and (c)
the new coordinator has the previous generation and the proposal's case 1 applies: every member
rejoins (ILLEGAL_GENERATION tells those that try to sync).
"""

from __future__ import annotations

from broker.coordinator.classic.group import GroupState
from broker.protocol.errors import ErrorCode

from .context import CoordinatorContext, assignment, decode_assignment


def stable() -> tuple[CoordinatorContext, list]:
    c = CoordinatorContext()
    members = c.stable_group("g", 2)
    assert c.group("g").generation == 1
    return c, members


def rejoin(c: CoordinatorContext, m, client: str):
    return c.join("g", member_id=m.member_id, client_id=client)


def test_a_parked_joins_lost_the_members_rejoin_at_the_persisted_generation():
    c, (a, b) = stable()
    slot_a, _ = rejoin(c, a, "c0")  # a rebalance starts; a's join is parked waiting for b
    assert not slot_a.done() and c.group("g").state is GroupState.PREPARING_REBALANCE
    c.restart()
    g = c.group("g")
    assert (g.state, g.generation, set(g.members)) == (GroupState.STABLE, 1, {a.member_id, b.member_id})
    # a (told NOT_COORDINATOR) rejoins at the new coordinator: b hears of it through its heartbeat
    slot_a, _ = rejoin(c, a, "c0")
    assert not slot_a.done()
    assert c.heartbeat("g", 1, b.member_id).error_code == ErrorCode.REBALANCE_IN_PROGRESS
    slot_b, _ = rejoin(c, b, "c1")
    assert slot_a.value.generation_id == slot_b.value.generation_id == 2


def test_b_join_answers_lost_the_unpersisted_generation_is_illegal_and_the_members_rejoin():
    c, (a, b) = stable()
    slots = [rejoin(c, a, "c0")[0], rejoin(c, b, "c1")[0]]
    assert [s.value.generation_id for s in slots] == [2, 2]  # a got its answer; say b's was lost
    written = len(c.log)
    c.restart()
    assert len(c.log) == written and c.group("g").generation == 1
    assert c.sync("g", 2, a.member_id)[1].response.error_code == ErrorCode.ILLEGAL_GENERATION
    assert c.heartbeat("g", 2, a.member_id).error_code == ErrorCode.ILLEGAL_GENERATION
    slot_a, _ = rejoin(c, a, "c0")
    slot_b, _ = rejoin(c, b, "c1")
    assert slot_a.value.generation_id == slot_b.value.generation_id == 2


def test_c_sync_before_the_assignment_is_persisted_is_lost_and_the_generation_refused():
    c, (a, b) = stable()
    joined = {s.value.member_id: s.value for s in (rejoin(c, a, "c0")[0], rejoin(c, b, "c1")[0])}
    leader = joined[a.member_id].leader
    follower = b.member_id if leader == a.member_id else a.member_id
    slot, _ = c.sync("g", 2, follower)  # parked until the leader's assignment comes
    assert not slot.done()
    c.restart()  # the leader's SyncGroup never arrived: generation 2 was never persisted
    assert c.group("g").generation == 1
    assert c.sync("g", 2, follower)[1].response.error_code == ErrorCode.ILLEGAL_GENERATION
    plan = {a.member_id: assignment([0, 1, 2]), b.member_id: assignment([3, 4, 5])}
    assert c.sync("g", 2, leader, plan)[1].response.error_code == ErrorCode.ILLEGAL_GENERATION


def test_d_sync_answer_lost_after_the_assignment_is_persisted_the_member_syncs_again():
    c, (a, b) = stable()
    joined = {s.value.member_id: s.value for s in (rejoin(c, a, "c0")[0], rejoin(c, b, "c1")[0])}
    leader = joined[a.member_id].leader
    follower = b.member_id if leader == a.member_id else a.member_id
    plan = {leader: assignment([0, 1, 2]), follower: assignment([3, 4, 5])}
    c.sync("g", 2, follower)  # parked; its answer is the one lost
    answered = c.answer(*c.sync("g", 2, leader, plan))  # persisted with generation 2
    assert answered is not None and answered.error_code == 0
    written = len(c.log)
    c.restart()
    g = c.group("g")
    assert (g.state, g.generation) == (GroupState.STABLE, 2)
    again = c.answer(*c.sync("g", 2, follower))
    assert again.error_code == 0 and decode_assignment(again.assignment) == {3, 4, 5}
    for m in (leader, follower):
        assert c.heartbeat("g", 2, m).error_code == 0
    assert len(c.log) == written and c.group("g").generation == 2  # no rebalance, nothing written
