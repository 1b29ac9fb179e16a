"""Online migration between classic and consumer groups (KIP-848 "Supporting Online Consumer Group
Upgrade" and the "Online Migration" case study), on the coordinator state machine with a manual
clock: no sockets, no sleeping.

Classic members speak the real consumer embedded protocol here (ConsumerProtocolSubscription with
owned partitions, ConsumerProtocolAssignment), as Java and librdkafka classic consumers do.
"""

from __future__ import annotations

import pytest

from broker.coordinator import groups, offsets
from broker.coordinator.classic.group import ClassicGroup, GroupState, Member
from broker.coordinator.consumer.classic_members import rebalance_state
from broker.coordinator.consumer.group import ConsumerGroupState
from broker.coordinator.consumer.reconcile import MemberState
from broker.coordinator.embedded import decode_assignment, encode_assignment, encode_subscription
from broker.coordinator.records import GROUP_METADATA
from broker.coordinator.result import Result
from broker.coordinator.runtime import Slot
from broker.coordinator.state import ConsumerGroupConfig
from broker.protocol.errors import ErrorCode
from broker.protocol.generated.heartbeat import HeartbeatRequest
from broker.protocol.generated.join_group import JoinGroupRequest, JoinGroupRequestProtocol
from broker.protocol.generated.leave_group import LeaveGroupRequest, MemberIdentity
from broker.protocol.generated.offset_commit import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from broker.protocol.generated.sync_group import SyncGroupRequest, SyncGroupRequestAssignment

from .context import TopicInfo
from .test_consumer_heartbeat import Ctx, T, assert_no_double_ownership, parts
from .test_kip848_case_studies import scripted

SESSION_MS = 10_000
REBALANCE_MS = 30_000
STABLE = MemberState.STABLE
UNREVOKED = MemberState.UNREVOKED_PARTITIONS
UNRELEASED = MemberState.UNRELEASED_PARTITIONS


def sub(
    owned: list[int] | None = None, version: int = 1, topics: tuple[str, ...] = ("foo",), generation: int = -1
) -> bytes:
    return encode_subscription(
        topics, {"foo": owned} if owned else {}, version=version, generation=generation
    )


class MigCtx(Ctx):
    """The consumer-heartbeat test context plus classic requests, over topic ``foo`` (6 partitions)."""

    def __init__(self, policy: str = "bidirectional", partitions: int = 6, **config) -> None:
        super().__init__(partitions, ConsumerGroupConfig(migration_policy=policy), **config)
        self.topics.registry.topics.clear()
        self.topics.registry.topics["foo"] = TopicInfo(T, partitions)

    def hb(self, member_id="", epoch=0, owned=None, subscribe=("foo",), **kw):
        return super().hb(member_id, epoch, owned=owned, subscribe=subscribe, **kw)

    # ------------------------------------------------------------------ classic requests

    def cjoin(self, member_id="", owned=None, protocols=None, instance=None, version=9, session=SESSION_MS):
        slot = Slot()
        protos = protocols or [("range", sub(owned))]
        req = JoinGroupRequest(
            group_id="g",
            session_timeout_ms=session,
            rebalance_timeout_ms=REBALANCE_MS,
            member_id=member_id,
            group_instance_id=instance,
            protocol_type="consumer",
            protocols=[JoinGroupRequestProtocol(n, m) for n, m in protos],
        )
        result = self.run(lambda now: groups.join_group(self.state, req, version, "c", "/h", slot, now))
        return result.response  # a Slot while the join is parked in a classic rebalance

    def csync(self, member_id, generation, protocol_name="range", version=5, assignments=None):
        slot = Slot()
        req = SyncGroupRequest(
            group_id="g",
            generation_id=generation,
            member_id=member_id,
            group_instance_id=None,
            protocol_type="consumer",
            protocol_name=protocol_name,
            assignments=assignments or [],
        )
        result = self.run(lambda now: groups.sync_group(self.state, req, version, slot, now))
        return result.response

    def cheartbeat(self, member_id, generation, version=4) -> int:
        req = HeartbeatRequest("g", generation, member_id, None)
        return self.run(lambda now: groups.heartbeat(self.state, req, version, now)).response.error_code

    def cleave(self, *member_ids: str):
        req = LeaveGroupRequest(group_id="g", members=[MemberIdentity(m, None) for m in member_ids])
        return self.run(lambda now: groups.leave_group(self.state, req, 5, now)).response

    def commit(self, member_id: str, generation: int, version: int = 8) -> int:
        req = OffsetCommitRequest(
            group_id="g",
            generation_id_or_member_epoch=generation,
            member_id=member_id,
            group_instance_id=None,
            topics=[OffsetCommitRequestTopic("foo", T, [OffsetCommitRequestPartition(0, 5, -1, "")])],
        )
        resp = self.run(lambda now: offsets.commit(self.state, req, version, now)).response
        return resp.topics[0].partitions[0].error_code

    # ------------------------------------------------------------------ seeding and views

    def seed_classic(self, generation: int, assignment: dict[str, list[int]], protocol="range", version=1):
        """A Stable classic group as a GroupMetadata record left it (e.g. before a restart)."""
        group = ClassicGroup("g", generation=generation, protocol_type="consumer", protocol_name=protocol)
        for mid, ps in assignment.items():
            group.add(
                Member(
                    member_id=mid,
                    group_instance_id=None,
                    client_id="c",
                    client_host="/h",
                    rebalance_timeout_ms=REBALANCE_MS,
                    session_timeout_ms=SESSION_MS,
                    protocol_type="consumer",
                    protocols=[(protocol, sub(version=version))],
                    assignment=encode_assignment({"foo": ps}, version),
                )
            )
        self.run(lambda now: Result(records=[self.state.group_record(group)]))
        self.restore_timers()

    def members(self) -> dict[str, tuple]:
        """member -> (kind, epoch, state, assigned, pending revocation)."""
        g = self.state.consumer_groups["g"]
        return {
            m.member_id: (
                "classic" if m.classic is not None else "consumer",
                m.member_epoch,
                m.progress.state,
                sorted(m.assigned.get(T, ())),
                sorted(m.progress.pending_revocation.get(T, ())),
            )
            for m in g.members.values()
        }

    def targets(self) -> tuple[int, dict[str, list[int]]]:
        g = self.state.consumer_groups["g"]
        return g.assignment_epoch, {m: sorted(a.get(T, ())) for m, a in g.target.items()}

    def classic_state(self, member_id: str) -> str:
        g = self.state.consumer_groups["g"]
        return rebalance_state(g, g.members[member_id], self.timers)


def assigned(sync_response) -> list[int]:
    return sorted(decode_assignment(sync_response.assignment).get("foo", []))


# ---------------------------------------------------------------------- the KIP's case study


def test_case_study_online_migration():
    """KIP-848 "Online Migration", every state the KIP lists.

    Where the KIP's steps merge in released Kafka (and here), the merged state is asserted and
    said so: the target for epoch 23 is computed by C's JoinGroup (a classic Heartbeat writes
    nothing), a joining member moves to the group epoch in its own join heartbeat, and a released
    partition reaches its new owner on that owner's next heartbeat.
    """
    c = MigCtx()
    c.assign = scripted({23: {"A": [0, 1, 3], "C": [2, 5, 4]}, 24: {"A": [0, 1], "B": [3, 4], "C": [2, 5]}})
    # Generic group (generation=22): A [foo-0, foo-1], B [foo-3, foo-4], C [foo-2, foo-5]
    c.seed_classic(22, {"A": [0, 1], "B": [3, 4], "C": [2, 5]})
    assert c.state.groups["g"].generation == 22

    # A leaves and rejoins with the new protocol enabled: the group is converted; the generation
    # becomes the group epoch; target and member assignments come from the current assignment.
    start = len(c.log)
    a = c.hb("A", 0, subscribe=("foo",))
    assert (a.error_code, a.member_epoch, parts(a)) == (0, 22, {0, 1})
    assert "g" not in c.state.groups
    first = c.records(start)[0]
    assert (first.type, first.value) == (GROUP_METADATA, None), "the classic group's tombstone comes first"
    g = c.state.consumer_groups["g"]
    assert (g.group_epoch, c.targets()) == (22, (22, {"A": [0, 1], "B": [3, 4], "C": [2, 5]}))
    assert c.members() == {
        "A": ("consumer", 22, STABLE, [0, 1], []),
        "B": ("classic", 22, STABLE, [3, 4], []),
        "C": ("classic", 22, STABLE, [2, 5], []),
    }
    assert c.assign.calls == [], "no new target: nothing changed"

    # B leaves the group: removed, group epoch 23; the target is still the one of epoch 22.
    assert c.cleave("B").members[0].error_code == 0
    assert (c.state.consumer_groups["g"].group_epoch, c.targets()[0]) == (23, 22)
    assert set(c.members()) == {"A", "C"}

    # C heartbeats and is told to rebalance (PreparingRebalance).
    assert c.cheartbeat("C", 22) == ErrorCode.REBALANCE_IN_PROGRESS
    assert c.classic_state("C") == "PreparingRebalance"

    # C revokes everything (eager) and rejoins: the target of epoch 23 is installed and C, owning
    # nothing, moves to epoch 23 at once; the JoinGroup's generation is 23 (CompletingRebalance).
    join_c = c.cjoin("C", owned=[])
    assert (join_c.error_code, join_c.generation_id, join_c.protocol_name, join_c.leader) == (
        0,
        23,
        "range",
        "",
    )
    assert c.targets() == (23, {"A": [0, 1, 3], "C": [2, 4, 5]})
    assert c.members() == {
        "A": ("consumer", 22, STABLE, [0, 1], []),
        "C": ("classic", 23, STABLE, [2, 4, 5], []),
    }
    assert c.classic_state("C") == "CompletingRebalance"

    # In the meantime, A heartbeats and transitions to epoch 23.
    a = c.hb("A", 22, owned=[0, 1])
    assert (a.member_epoch, parts(a)) == (23, {0, 1, 3})

    # C syncs and collects its new assignment: all free. C is Stable.
    s = c.csync("C", 23)
    assert (s.error_code, assigned(s)) == (0, [2, 4, 5])
    assert c.classic_state("C") == "Stable"
    assert c.cheartbeat("C", 23) == 0
    assert c.state.consumer_groups["g"].state == ConsumerGroupState.STABLE

    # B rejoins with the new protocol: group epoch 24, new target; B holds nothing yet because
    # foo-3 (A) and foo-4 (C) are not free.
    b = c.hb("B", 0, subscribe=("foo",))
    assert (b.member_epoch, parts(b)) == (24, set())
    assert c.targets() == (24, {"A": [0, 1], "B": [3, 4], "C": [2, 5]})
    assert c.members()["B"] == ("consumer", 24, UNRELEASED, [], [])
    # ... and a rebalance is triggered for C to revoke foo-4.
    assert c.classic_state("C") == "PreparingRebalance"

    # A heartbeats and is told to revoke foo-3.
    a = c.hb("A", 23, owned=[0, 1, 3])
    assert (a.member_epoch, parts(a)) == (23, {0, 1})
    assert c.members()["A"] == ("consumer", 23, UNREVOKED, [0, 1], [3])
    # B heartbeats: still waiting.
    assert parts(c.hb("B", 24, owned=[])) is None
    # C heartbeats, is told to rebalance, revokes everything and rejoins: epoch 24 at once,
    # foo-4 is released.
    assert c.cheartbeat("C", 23) == ErrorCode.REBALANCE_IN_PROGRESS
    join_c = c.cjoin("C", owned=[])
    assert join_c.generation_id == 24
    assert c.members()["C"] == ("classic", 24, STABLE, [2, 5], [])
    assert c.classic_state("C") == "CompletingRebalance"
    # C syncs: Stable.
    s = c.csync("C", 24)
    assert (s.error_code, assigned(s)) == (0, [2, 5])
    assert c.classic_state("C") == "Stable"
    # B heartbeats and gets foo-4, the partition C released (the KIP shows this at C's join).
    b = c.hb("B", 24, owned=[])
    assert (b.member_epoch, parts(b)) == (24, {4})
    assert c.members()["B"] == ("consumer", 24, UNRELEASED, [4], [])
    # A heartbeats, confirms the revocation of foo-3, transitions to epoch 24; foo-3 is released.
    a = c.hb("A", 23, owned=[0, 1])
    assert (a.member_epoch, parts(a)) == (24, None), "same partitions: no assignment in the answer"
    # B heartbeats and gets its whole assignment.
    b = c.hb("B", 24, owned=[4])
    assert (b.member_epoch, parts(b)) == (24, {3, 4})
    assert c.members() == {
        "A": ("consumer", 24, STABLE, [0, 1], []),
        "B": ("consumer", 24, STABLE, [3, 4], []),
        "C": ("classic", 24, STABLE, [2, 5], []),
    }
    assert c.state.consumer_groups["g"].state == ConsumerGroupState.STABLE
    assert_no_double_ownership(c)
    # a restart replays the same group, classic member included
    again = c.restarted()
    assert again.members() == c.members() and again.targets() == c.targets()
    assert (
        again.state.consumer_groups["g"].members["C"].classic
        == c.state.consumer_groups["g"].members["C"].classic
    )


# ---------------------------------------------------------------------- upgrade


def test_upgrade_keeps_every_assignment_and_answers_parked_requests():
    c = MigCtx()
    c.seed_classic(5, {"x": [0, 1, 2], "y": [3, 4, 5]})
    # x rejoins (a classic rebalance starts; x's JoinGroup is parked)
    parked = c.cjoin("x", owned=[])
    assert isinstance(parked, Slot) and not parked.done()
    assert c.state.groups["g"].state == GroupState.PREPARING_REBALANCE
    n = c.hb("n", 0, subscribe=("foo",))
    assert n.error_code == 0 and n.member_epoch == 6
    assert parked.done() and parked.value.error_code == ErrorCode.REBALANCE_IN_PROGRESS
    m = c.members()
    assert m["x"][3] == [0, 1, 2] and m["y"][3] == [3, 4, 5], "members keep what they had"
    assert m["n"] == ("consumer", 6, UNRELEASED, [], [])
    assert_no_double_ownership(c)
    # the classic members rejoin and the group converges
    for mid in ("x", "y"):
        assert c.cheartbeat(mid, 5) == ErrorCode.REBALANCE_IN_PROGRESS
    for _round in range(3):
        for mid in ("x", "y"):
            epoch = c.members()[mid][1]
            owned = c.members()[mid][3]
            if c.cheartbeat(mid, epoch) == ErrorCode.REBALANCE_IN_PROGRESS:
                j = c.cjoin(mid, owned=owned)  # cooperative: rejoin with what it owns
                s = c.csync(mid, j.generation_id)
                assert s.error_code == 0
        nm = c.members()["n"]
        c.hb("n", nm[1], owned=nm[3])
        assert_no_double_ownership(c)
    assert c.state.consumer_groups["g"].state == ConsumerGroupState.STABLE
    assert sorted(p for m in c.members().values() for p in m[3]) == [0, 1, 2, 3, 4, 5]


@pytest.mark.parametrize("policy", ["downgrade", "disabled"])
def test_upgrade_refused_by_policy(policy):
    c = MigCtx(policy)
    c.seed_classic(3, {"x": [0, 1, 2], "y": [3, 4, 5]})
    before = len(c.log)
    r = c.hb("n", 0, subscribe=("foo",))
    assert (r.error_code, r.error_message) == (
        ErrorCode.GROUP_ID_NOT_FOUND,
        "Group g is not a consumer group.",
    )
    assert len(c.log) == before and "g" in c.state.groups and "g" not in c.state.consumer_groups


def test_upgrade_refused_for_other_protocol_types_and_bad_subscriptions():
    c = MigCtx()
    c.seed_classic(3, {"x": [0, 1, 2]})
    c.state.groups["g"].protocol_type = "connect"
    assert c.hb("n", 0, subscribe=("foo",)).error_code == ErrorCode.GROUP_ID_NOT_FOUND
    c.state.groups["g"].protocol_type = "consumer"
    c.state.groups["g"].members["x"].protocols = [("range", b"\x00")]
    assert c.hb("n", 0, subscribe=("foo",)).error_code == ErrorCode.GROUP_ID_NOT_FOUND
    assert "g" in c.state.groups
    # a non-zero epoch never converts
    c.state.groups["g"].members["x"].protocols = [("range", sub())]
    assert c.hb("n", 3, subscribe=("foo",)).error_code == ErrorCode.GROUP_ID_NOT_FOUND


# ---------------------------------------------------------------------- classic members inside


def _mixed(c: MigCtx) -> None:
    """Group g: consumer member n (epoch 2) plus classic members x and y, all converged."""
    c.seed_classic(1, {"x": [0, 1, 2], "y": [3, 4, 5]})
    c.hb("n", 0, subscribe=("foo",))
    for _ in range(4):
        for mid in ("x", "y"):
            epoch, owned = c.members()[mid][1], c.members()[mid][3]
            if c.cheartbeat(mid, epoch) == ErrorCode.REBALANCE_IN_PROGRESS:
                j = c.cjoin(mid, owned=owned)
                assert c.csync(mid, j.generation_id).error_code == 0
        nm = c.members()["n"]
        c.hb("n", nm[1], owned=nm[3])
    assert c.state.consumer_groups["g"].state == ConsumerGroupState.STABLE


def test_cooperative_classic_member_revokes_then_collects():
    c = MigCtx()
    _mixed(c)
    before = c.members()
    assert all(len(m[3]) == 2 for m in before.values())
    # a new consumer member joins: x and y must give something up
    c.hb("z", 0, subscribe=("foo",))
    x_epoch, x_owned = c.members()["x"][1], c.members()["x"][3]
    assert c.cheartbeat("x", x_epoch) == ErrorCode.REBALANCE_IN_PROGRESS
    j = c.cjoin("x", owned=x_owned)  # cooperative: still owns everything
    if c.members()["x"][2] == UNREVOKED:
        assert j.generation_id == x_epoch, "revoking: the generation stays the member's epoch"
        s = c.csync("x", j.generation_id)
        kept = assigned(s)
        assert set(kept) < set(x_owned), "SyncGroup gives current & target while revoking"
        assert c.cheartbeat("x", x_epoch) == ErrorCode.REBALANCE_IN_PROGRESS
        j = c.cjoin("x", owned=kept)
    assert j.generation_id == c.state.consumer_groups["g"].group_epoch
    assert c.csync("x", j.generation_id).error_code == 0
    assert_no_double_ownership(c)


def test_heartbeat_asks_for_a_rejoin_once_waited_partitions_are_free():
    c = MigCtx()
    c.assign = scripted({3: {"n": [0, 1, 2], "x": [3, 4, 5]}})
    c.seed_classic(2, {"x": [0, 3]})  # x holds foo-0, which the target gives n
    c.hb("n", 0, subscribe=("foo",))
    assert c.members()["n"] == ("consumer", 3, UNRELEASED, [1, 2], [])
    # x rejoins owning foo-0 and foo-3: it revokes foo-0 and keeps foo-3 (UNREVOKED at epoch 2)
    assert c.cheartbeat("x", 2) == ErrorCode.REBALANCE_IN_PROGRESS
    j = c.cjoin("x", owned=[0, 3])
    assert j.generation_id == 2 and c.members()["x"][2] == UNREVOKED
    assert assigned(c.csync("x", 2)) == [3]
    # it revoked foo-0 and rejoins: epoch 3; foo-4 and foo-5 are free, so it gets them at once
    j = c.cjoin("x", owned=[3])
    assert j.generation_id == 3 and c.members()["x"] == ("classic", 3, STABLE, [3, 4, 5], [])
    assert assigned(c.csync("x", 3)) == [3, 4, 5]
    # now n can have foo-0
    assert parts(c.hb("n", 3, owned=[1, 2])) == {0, 1, 2}


def test_classic_member_waiting_on_a_partition_is_told_when_it_is_released():
    c = MigCtx()
    c.assign = scripted({3: {"x": [0, 1, 2, 3], "y": [4, 5], "z": []}})
    c.seed_classic(2, {"x": [0, 1, 2], "y": [3, 4, 5]})
    assert c.hb("y", 0, subscribe=("foo",)).member_epoch == 2, "y switches protocol in place"
    c.hb("z", 0, subscribe=("foo",))  # epoch 3: x should get foo-3, which y holds
    assert c.cheartbeat("x", 2) == ErrorCode.REBALANCE_IN_PROGRESS
    j = c.cjoin("x", owned=[0, 1, 2])
    assert j.generation_id == 3 and c.members()["x"] == ("classic", 3, UNRELEASED, [0, 1, 2], [])
    assert assigned(c.csync("x", 3)) == [0, 1, 2]
    assert c.cheartbeat("x", 3) == 0, "foo-3 is still y's: nothing to rejoin for"
    c.hb("y", 2, owned=[3, 4, 5])  # y is told to revoke foo-3
    assert c.members()["y"][2] == UNREVOKED
    assert c.cheartbeat("x", 3) == 0, "y has not confirmed the revocation yet"
    c.hb("y", 2, owned=[4, 5])  # y confirms: foo-3 is free
    assert c.cheartbeat("x", 3) == ErrorCode.REBALANCE_IN_PROGRESS
    j = c.cjoin("x", owned=[0, 1, 2])
    assert j.generation_id == 3 and c.members()["x"] == ("classic", 3, STABLE, [0, 1, 2, 3], [])
    assert assigned(c.csync("x", 3)) == [0, 1, 2, 3]
    assert c.cheartbeat("x", 3) == 0
    assert_no_double_ownership(c)


def test_offset_commit_and_fetch_of_classic_members():
    c = MigCtx()
    _mixed(c)
    epoch = c.members()["x"][1]
    assert c.commit("x", epoch) == 0
    assert c.commit("x", epoch - 1) == ErrorCode.ILLEGAL_GENERATION
    assert c.commit("x", epoch, version=9) == 0
    assert c.commit("x", epoch - 1, version=9) == ErrorCode.ILLEGAL_GENERATION, "classic: generation"
    assert c.commit("nobody", epoch) == ErrorCode.UNKNOWN_MEMBER_ID


def test_classic_errors_inside_a_consumer_group():
    c = MigCtx()
    _mixed(c)
    epoch = c.members()["x"][1]
    assert c.cheartbeat("x", epoch + 5) == ErrorCode.ILLEGAL_GENERATION
    assert c.cheartbeat("n", c.members()["n"][1]) == ErrorCode.UNKNOWN_MEMBER_ID, "n is not classic"
    assert c.csync("x", epoch, protocol_name="roundrobin").error_code == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    assert c.csync("x", epoch + 1).error_code == ErrorCode.ILLEGAL_GENERATION
    # v4+: a member without id is told its id first
    r = c.cjoin("")
    assert r.error_code == ErrorCode.MEMBER_ID_REQUIRED and r.member_id
    # no protocol in common with the classic members
    r = c.cjoin("q", protocols=[("roundrobin", sub())])
    assert r.error_code == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    # a ConsumerGroupHeartbeat for a classic member that is not a join
    assert c.hb("x", epoch).error_code == ErrorCode.UNKNOWN_MEMBER_ID


def test_classic_member_timeouts():
    c = MigCtx()
    _mixed(c)
    # x stops heartbeating: removed after its own session timeout (10 s), not the group's 45 s
    for _ in range(3):
        c.advance(4000)
        c.cheartbeat("y", c.members()["y"][1])
        c.hb("n", c.members()["n"][1], owned=c.members()["n"][3])
    assert "x" not in c.members()
    # y joins but never syncs: removed after its rebalance timeout
    y_epoch = c.members()["y"][1]
    c.cheartbeat("y", y_epoch)
    c.cjoin("y", owned=c.members()["y"][3])
    for _ in range(9):
        c.advance(4000)
        if "y" in c.members():
            c.cheartbeat("y", c.members()["y"][1])
        c.hb("n", c.members()["n"][1], owned=c.members()["n"][3])
    assert "y" not in c.members(), "no SyncGroup within the rebalance timeout"


# ---------------------------------------------------------------------- downgrade


def test_downgrade_when_the_last_consumer_member_leaves():
    c = MigCtx()
    _mixed(c)
    g = c.state.consumer_groups["g"]
    epoch = g.group_epoch
    current = {mid: m[3] for mid, m in c.members().items()}
    left = c.hb("n", -1, owned=None)
    assert left.error_code == 0 and left.member_epoch == -1
    assert "g" not in c.state.consumer_groups
    classic = c.state.groups["g"]
    assert (classic.generation, classic.protocol_type, classic.protocol_name) == (epoch, "consumer", "range")
    assert classic.state == GroupState.PREPARING_REBALANCE, "a rebalance starts, as in Kafka"
    for mid in ("x", "y"):
        assert sorted(decode_assignment(classic.members[mid].assignment)["foo"]) == current[mid]
    # the remaining members finish a classic rebalance
    assert c.cheartbeat("x", epoch) == ErrorCode.REBALANCE_IN_PROGRESS
    jx = c.cjoin("x", owned=current["x"])
    jy = c.cjoin("y", owned=current["y"])
    assert jx.done() and jy.done()
    leader = jx.value.leader
    gen = jx.value.generation_id
    assert gen == epoch + 1
    asg = [
        SyncGroupRequestAssignment("x", encode_assignment({"foo": [0, 1, 2]})),
        SyncGroupRequestAssignment("y", encode_assignment({"foo": [3, 4, 5]})),
    ]
    other = "y" if leader == "x" else "x"
    follower = c.csync(other, gen)
    c.csync(leader, gen, assignments=asg)
    assert follower.done() and follower.value.error_code == 0
    assert c.state.groups["g"].state == GroupState.STABLE
    # the conversion survives a restart
    again = c.restarted()
    assert again.state.groups["g"].generation == gen and "g" not in again.state.consumer_groups


def test_downgrade_on_session_expiry_of_the_consumer_member():
    c = MigCtx()
    _mixed(c)
    for _ in range(13):  # n is silent for > 45 s; x and y keep heartbeating
        c.advance(4000)
        if "g" in c.state.consumer_groups:
            for mid in ("x", "y"):
                c.cheartbeat(mid, c.members()[mid][1])
    assert "g" in c.state.groups and "g" not in c.state.consumer_groups


def test_downgrade_refused_by_policy_keeps_a_consumer_group_of_classic_members():
    c = MigCtx("upgrade")
    _mixed(c)
    c.hb("n", -1)
    assert "g" in c.state.consumer_groups and "g" not in c.state.groups
    assert {m[0] for m in c.members().values()} == {"classic"}
    assert c.state.consumer_groups["g"].group_epoch == c.members()["x"][1] + 1


def test_restart_in_the_middle_of_a_migration():
    c = MigCtx()
    c.seed_classic(7, {"x": [0, 1, 2], "y": [3, 4, 5]})
    c.hb("n", 0, subscribe=("foo",))
    again = c.restarted()
    assert again.members() == c.members() and again.targets() == c.targets()
    # the classic members carry on against the restarted coordinator
    assert again.cheartbeat("x", 7) == ErrorCode.REBALANCE_IN_PROGRESS
    j = again.cjoin("x", owned=[])
    assert j.error_code == 0 and j.generation_id == 8


def test_join_checks_the_generation_in_the_embedded_protocol():
    c = MigCtx()
    _mixed(c)
    epoch, owned = c.members()["x"][1], c.members()["x"][3]
    stale = c.cjoin("x", protocols=[("range", sub(owned, version=3, generation=epoch - 1))])
    assert stale.error_code == ErrorCode.ILLEGAL_GENERATION
    ok = c.cjoin("x", protocols=[("range", sub(owned, version=3, generation=epoch))])
    assert ok.error_code == 0 and ok.generation_id == epoch
    reset = c.cjoin("x", protocols=[("range", sub([], version=3, generation=-1))])
    assert reset.error_code == 0, "a member that reset its generation may rejoin"


def test_classic_members_keep_their_session_timeout_across_a_restart():
    c = MigCtx()
    c.seed_classic(7, {"x": [0, 1, 2], "y": [3, 4, 5]})
    c.hb("n", 0)
    again = c.restarted()
    for _ in range(3):  # y and n keep heartbeating, x is silent for 12 s (its session is 10 s)
        again.advance(4000)
        again.cheartbeat("y", again.members()["y"][1])
        again.hb("n", again.members()["n"][1], owned=again.members()["n"][3])
    assert "x" not in again.members() and "y" in again.members()
