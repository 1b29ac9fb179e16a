"""The four KIP-848 "Case Studies" (Basic, Incremental Revocation & Assignment, Member Failure,
Partition Added), replayed step by step through ConsumerGroupHeartbeat.

Every state the KIP lists is asserted: group epoch and members, target assignment epoch and
per-member targets, and each member's epoch / partitions / pending-partitions, plus what each
heartbeat response carries. The assignor is scripted: it returns exactly the KIP's target for each
epoch, so these tests check the epoch and reconciliation machinery, not an assignor.

Vocabulary. The KIP draft describes a member as ``epoch, partitions, pending-partitions``; the
released protocol (Kafka 3.7+, and this implementation) stores ``member_epoch``, ``assigned``,
``pending_revocation`` and a state. The mapping used by ``view``:

- KIP ``partitions``          = assigned | pending_revocation (everything the member still holds);
- KIP ``pending-partitions``  = target - assigned for a member already at the target epoch
  (partitions it waits for another member to release: state UNRELEASED_PARTITIONS).

Several of the KIP's steps ("bumps the group epoch", "computes the new target", "transitions the
member") happen inside one heartbeat here, as in released Kafka. Those intermediate states are
observed by replaying the heartbeat's records one at a time (``StepCtx``) and snapshotting the
group after each record.
"""

from __future__ import annotations

from broker.coordinator.consumer import records as rec
from broker.coordinator.consumer.group import ConsumerGroupState, ConsumerMember, TopicMeta
from broker.coordinator.consumer.reconcile import MemberState, Progress
from broker.coordinator.result import Result

from .context import TopicInfo
from .test_consumer_heartbeat import Ctx, T, assert_no_double_ownership, parts

STABLE = MemberState.STABLE
UNREVOKED = MemberState.UNREVOKED_PARTITIONS
UNRELEASED = MemberState.UNRELEASED_PARTITIONS


def scripted(targets: dict[int, dict[str, list[int]]]):
    """An assignor returning the KIP's target for the epoch being computed.

    The epoch being computed is the group epoch after this heartbeat's bump: when the group epoch
    is already ahead of the target (a member was removed by a timer), it is the group epoch itself.
    """
    calls: list[int] = []

    def assign(_name, group, members, topics):
        epoch = group.group_epoch if group.group_epoch > group.assignment_epoch else group.group_epoch + 1
        calls.append(epoch)
        want = targets[epoch]
        assert set(want) == set(members), f"epoch {epoch}: assignor asked for {sorted(members)}"
        return {m: ({T: frozenset(ps)} if ps else {}) for m, ps in want.items()}

    assign.calls = calls
    return assign


def _flat(a) -> list[int]:
    return sorted(a.get(T, frozenset()))


def view(c: Ctx) -> dict:
    """The group as the KIP draws it."""
    g = c.state.consumer_groups.get("g")
    if g is None:
        return {"group": (0, []), "target": (0, {}), "members": {}}
    members = {}
    for mid, m in sorted(g.members.items()):
        p = m.progress
        held = sorted(set(_flat(p.assigned)) | set(_flat(p.pending_revocation)))
        waiting = (
            sorted(set(_flat(g.target.get(mid, {}))) - set(_flat(p.assigned)))
            if p.member_epoch == g.assignment_epoch
            else []
        )
        members[mid] = (p.member_epoch, held, waiting)
    return {
        "group": (g.group_epoch, sorted(g.members)),
        "target": (g.assignment_epoch, {mid: _flat(a) for mid, a in sorted(g.target.items())}),
        "members": members,
    }


def kip(group, target, members) -> dict:
    return {"group": group, "target": target, "members": members}


def state_of(c: Ctx, mid: str) -> MemberState:
    return c.group.members[mid].progress.state


class StepCtx(Ctx):
    """Ctx that snapshots ``view`` after each record a heartbeat (or timer) writes."""

    def __init__(self, partitions: int = 3) -> None:
        super().__init__(partitions)
        self.steps: list[tuple[int, dict]] = []

    def run(self, op):
        self.steps = []
        return super().run(op)

    def replay(self, record, offset: int, timestamp: int) -> None:
        super().replay(record, offset, timestamp)
        self.steps.append((record.type, view(self)))

    def after(self, record_type: int) -> dict:
        """The snapshot right after the last record of this type in the last operation."""
        found = [snap for t, snap in self.steps if t == record_type]
        assert found, f"no record of type {record_type} in {[t for t, _ in self.steps]}"
        return found[-1]

    def fire_timers(self, until_ms: int) -> None:
        self.fire_until(until_ms)


def seed(c: StepCtx, group_epoch: int, members: dict[str, list[int]], partitions: int) -> None:
    """Start a group in a Stable state at ``group_epoch`` (the KIP's starting points are at epoch
    21/22). Reaching epoch 22 through 22 heartbeats would test nothing, so the state is written as
    the coordinator's own records and replayed, as after a coordinator fail-over; restoring the
    timers then starts every member's session timer."""
    recs = [rec.partition_metadata("g", {T: TopicMeta("t", partitions)})]
    for mid, ps in members.items():
        a = {T: frozenset(ps)} if ps else {}
        recs.append(
            rec.member_metadata(
                "g", ConsumerMember(mid, subscribed_topic_names=["t"], rebalance_timeout_ms=30000)
            )
        )
        recs.append(rec.target_member("g", mid, a))
        recs.append(rec.current_assignment("g", mid, Progress(group_epoch, group_epoch - 1, STABLE, a)))
    recs += [rec.target_epoch("g", group_epoch), rec.group_epoch("g", group_epoch)]
    c.run(lambda now: Result(records=recs))
    c.restore_timers()


# --------------------------------------------------------------------------------------------- Basic


def test_case_study_basic():
    c = StepCtx(partitions=3)
    c.assign = scripted({1: {"A": [0, 1, 2]}, 2: {"A": [0, 1], "B": [2]}, 3: {"A": [0], "B": [2], "C": [1]}})
    # Group (epoch=0) empty; no target; no members. (Released Kafka creates the group lazily.)
    assert view(c) == kip((0, []), (0, {}), {})

    # Member A joins. In one heartbeat: the epoch is bumped to 1 with A added (empty assignment),
    # the target for epoch 1 is installed, and A -- having nothing to revoke -- moves to epoch 1.
    a = c.hb("A")
    assert c.after(rec.GROUP_EPOCH) == kip((1, ["A"]), (0, {}), {"A": (0, [], [])})
    assert c.after(rec.TARGET_EPOCH) == kip((1, ["A"]), (1, {"A": [0, 1, 2]}), {"A": (0, [], [])})
    assert view(c) == kip((1, ["A"]), (1, {"A": [0, 1, 2]}), {"A": (1, [0, 1, 2], [])})
    # "replies with the new epoch 1 and all the partitions"
    assert (a.error_code, a.member_id, a.member_epoch, parts(a)) == (0, "A", 1, {0, 1, 2})
    assert c.group.state == ConsumerGroupState.STABLE

    # Member B joins: epoch 2, then the target for epoch 2. B moves to epoch 2 right away (it has
    # nothing to revoke) but cannot get foo-2 until A revokes it.
    b = c.hb("B")
    assert c.after(rec.GROUP_EPOCH) == kip(
        (2, ["A", "B"]), (1, {"A": [0, 1, 2]}), {"A": (1, [0, 1, 2], []), "B": (0, [], [])}
    )
    assert c.after(rec.TARGET_EPOCH) == kip(
        (2, ["A", "B"]), (2, {"A": [0, 1], "B": [2]}), {"A": (1, [0, 1, 2], []), "B": (0, [], [])}
    )
    assert view(c) == kip(
        (2, ["A", "B"]), (2, {"A": [0, 1], "B": [2]}), {"A": (1, [0, 1, 2], []), "B": (2, [], [2])}
    )
    assert (b.error_code, b.member_epoch, parts(b)) == (0, 2, set())
    assert state_of(c, "B") == UNRELEASED
    assert c.group.state == ConsumerGroupState.RECONCILING

    # A heartbeats: it is told to revoke foo-2 (the response carries what it may keep, at epoch 1).
    a = c.hb("A", 1, owned={0, 1, 2})
    assert (a.member_epoch, parts(a)) == (1, {0, 1})
    assert state_of(c, "A") == UNREVOKED
    assert _flat(c.group.members["A"].progress.pending_revocation) == [2]
    assert view(c)["members"]["A"] == (1, [0, 1, 2], [])  # still holds foo-2 until it acknowledges

    # A acknowledges the revocation: epoch 2, foo-2 released.
    a = c.hb("A", 1, owned={0, 1})
    assert (a.error_code, a.member_epoch) == (0, 2)
    assert parts(a) is None  # its assignment did not change: nothing to send
    assert view(c) == kip(
        (2, ["A", "B"]), (2, {"A": [0, 1], "B": [2]}), {"A": (2, [0, 1], []), "B": (2, [], [2])}
    )

    # B heartbeats and now gets foo-2.
    b = c.hb("B", 2, owned=set())
    assert (b.member_epoch, parts(b)) == (2, {2})
    assert view(c) == kip(
        (2, ["A", "B"]), (2, {"A": [0, 1], "B": [2]}), {"A": (2, [0, 1], []), "B": (2, [2], [])}
    )
    assert c.group.state == ConsumerGroupState.STABLE

    # Member C joins: epoch 3, then the target for epoch 3.
    cr = c.hb("C")
    assert c.after(rec.GROUP_EPOCH) == kip(
        (3, ["A", "B", "C"]),
        (2, {"A": [0, 1], "B": [2]}),
        {"A": (2, [0, 1], []), "B": (2, [2], []), "C": (0, [], [])},
    )
    target3 = (3, {"A": [0], "B": [2], "C": [1]})
    assert c.after(rec.TARGET_EPOCH) == kip(
        (3, ["A", "B", "C"]), target3, {"A": (2, [0, 1], []), "B": (2, [2], []), "C": (0, [], [])}
    )
    # The KIP then has B heartbeat before C does. Here C's join heartbeat already reconciles C
    # (released Kafka does the same), so C is at epoch 3 waiting for foo-1 before B heartbeats.
    assert (cr.member_epoch, parts(cr)) == (3, set())
    assert state_of(c, "C") == UNRELEASED

    # B heartbeats: nothing to revoke, straight to epoch 3.
    b = c.hb("B", 2, owned={2})
    assert (b.member_epoch, parts(b)) == (3, None)
    assert view(c) == kip(
        (3, ["A", "B", "C"]), target3, {"A": (2, [0, 1], []), "B": (3, [2], []), "C": (3, [], [1])}
    )
    # C heartbeats: at epoch 3, still cannot get foo-1.
    cr = c.hb("C", 3, owned=set())
    assert (cr.member_epoch, parts(cr)) == (3, None)
    assert view(c) == kip(
        (3, ["A", "B", "C"]), target3, {"A": (2, [0, 1], []), "B": (3, [2], []), "C": (3, [], [1])}
    )

    # A heartbeats: told to revoke foo-1. Then it acknowledges and moves to epoch 3.
    a = c.hb("A", 2, owned={0, 1})
    assert (a.member_epoch, parts(a)) == (2, {0})
    assert state_of(c, "A") == UNREVOKED
    a = c.hb("A", 2, owned={0})
    assert (a.member_epoch, parts(a)) == (3, None)
    # The KIP's last picture shows C with foo-1 already; here C picks it up on its next heartbeat.
    assert view(c)["members"]["C"] == (3, [], [1])
    cr = c.hb("C", 3, owned=set())
    assert (cr.member_epoch, parts(cr)) == (3, {1})
    assert view(c) == kip(
        (3, ["A", "B", "C"]), target3, {"A": (3, [0], []), "B": (3, [2], []), "C": (3, [1], [])}
    )
    # "All the members have eventually advanced to the group epoch (3)."
    assert c.group.state == ConsumerGroupState.STABLE
    assert c.assign.calls == [1, 2, 3]
    assert_no_double_ownership(c)


# ------------------------------------------------------------ Incremental Revocation & Assignment


def test_case_study_incremental_revocation_and_assignment():
    c = StepCtx(partitions=6)
    c.assign = scripted({22: {"A": [0, 1], "B": [3, 4], "C": [2, 5]}})
    seed(c, 21, {"A": [0, 1, 2], "B": [3, 4, 5]}, partitions=6)
    assert view(c) == kip(
        (21, ["A", "B"]),
        (21, {"A": [0, 1, 2], "B": [3, 4, 5]}),
        {"A": (21, [0, 1, 2], []), "B": (21, [3, 4, 5], [])},
    )
    assert c.group.state == ConsumerGroupState.STABLE
    target22 = (22, {"A": [0, 1], "B": [3, 4], "C": [2, 5]})

    # C joins: epoch 22, member created, target computed...
    cr = c.hb("C")
    assert c.after(rec.GROUP_EPOCH)["group"] == (22, ["A", "B", "C"])
    assert c.after(rec.TARGET_EPOCH) == kip(
        (22, ["A", "B", "C"]),
        target22,
        {"A": (21, [0, 1, 2], []), "B": (21, [3, 4, 5], []), "C": (0, [], [])},
    )
    # ...and (same heartbeat, see test_case_study_basic) C moves to epoch 22 without partitions,
    # because foo-2 and foo-5 are not revoked yet.
    assert (cr.member_epoch, parts(cr)) == (22, set())
    assert view(c) == kip(
        (22, ["A", "B", "C"]),
        target22,
        {"A": (21, [0, 1, 2], []), "B": (21, [3, 4, 5], []), "C": (22, [], [2, 5])},
    )

    # A is told to revoke foo-2, B to revoke foo-5; C heartbeats with no change.
    a = c.hb("A", 21, owned={0, 1, 2})
    assert (a.member_epoch, parts(a)) == (21, {0, 1})
    b = c.hb("B", 21, owned={3, 4, 5})
    assert (b.member_epoch, parts(b)) == (21, {3, 4})
    assert (state_of(c, "A"), state_of(c, "B")) == (UNREVOKED, UNREVOKED)
    cr = c.hb("C", 22, owned=set())
    assert (cr.member_epoch, parts(cr)) == (22, None)
    assert view(c)["members"]["C"] == (22, [], [2, 5])

    # A acknowledges: epoch 22, foo-2 released.
    a = c.hb("A", 21, owned={0, 1})
    assert (a.member_epoch, parts(a)) == (22, None)
    # The KIP's picture here already lists foo-2 under C; in the released protocol foo-2 is only
    # free now, and C gets it on its next heartbeat (the KIP's next sentence).
    assert view(c) == kip(
        (22, ["A", "B", "C"]),
        target22,
        {"A": (22, [0, 1], []), "B": (21, [3, 4, 5], []), "C": (22, [], [2, 5])},
    )
    assert c.group.owner_of(T, 2) is None

    # C heartbeats: gets foo-2, still waits for foo-5.
    cr = c.hb("C", 22, owned=set())
    assert (cr.member_epoch, parts(cr)) == (22, {2})
    assert state_of(c, "C") == UNRELEASED
    assert view(c) == kip(
        (22, ["A", "B", "C"]),
        target22,
        {"A": (22, [0, 1], []), "B": (21, [3, 4, 5], []), "C": (22, [2], [5])},
    )

    # B acknowledges: epoch 22, foo-5 released.
    b = c.hb("B", 21, owned={3, 4})
    assert (b.member_epoch, parts(b)) == (22, None)
    assert view(c)["members"]["B"] == (22, [3, 4], [])

    # C heartbeats: it now has foo-2 and foo-5.
    cr = c.hb("C", 22, owned={2})
    assert (cr.member_epoch, parts(cr)) == (22, {2, 5})
    assert view(c) == kip(
        (22, ["A", "B", "C"]),
        target22,
        {"A": (22, [0, 1], []), "B": (22, [3, 4], []), "C": (22, [2, 5], [])},
    )
    assert c.group.state == ConsumerGroupState.STABLE
    assert c.assign.calls == [22]
    assert_no_double_ownership(c)


# ----------------------------------------------------------------------------------- Member Failure


def test_case_study_member_failure():
    c = StepCtx(partitions=6)
    c.assign = scripted({23: {"B": [3, 4, 0], "C": [2, 5, 1]}})
    seed(c, 22, {"A": [0, 1], "B": [3, 4], "C": [2, 5]}, partitions=6)
    assert view(c) == kip(
        (22, ["A", "B", "C"]),
        (22, {"A": [0, 1], "B": [3, 4], "C": [2, 5]}),
        {"A": (22, [0, 1], []), "B": (22, [3, 4], []), "C": (22, [2, 5], [])},
    )
    assert c.group.state == ConsumerGroupState.STABLE

    # A fails to heartbeat; B and C keep heartbeating (no change for them).
    c.clock.ms += 30_000
    for mid, owned in (("B", {3, 4}), ("C", {2, 5})):
        r = c.hb(mid, 22, owned=owned)
        assert (r.error_code, r.member_epoch, parts(r)) == (0, 22, None)
    # A's session (45 s from the start) expires before B's and C's (45 s from now).
    c.fire_timers(c.clock.ms + 20_000)
    # The KIP keeps A in the target assignment of epoch 22 until the next one is computed; the
    # released protocol (and this implementation) tombstones A's target with the member.
    assert view(c) == kip(
        (23, ["B", "C"]),
        (22, {"B": [3, 4], "C": [2, 5]}),
        {"B": (22, [3, 4], []), "C": (22, [2, 5], [])},
    )
    assert c.group.state == ConsumerGroupState.ASSIGNING
    assert c.assign.calls == []  # the target is computed on the next heartbeat, not by the timer

    # B heartbeats: the target for epoch 23 is computed, then B transitions (foo-0 is free).
    target23 = (23, {"B": [0, 3, 4], "C": [1, 2, 5]})
    b = c.hb("B", 22, owned={3, 4})
    assert c.after(rec.TARGET_EPOCH) == kip(
        (23, ["B", "C"]), target23, {"B": (22, [3, 4], []), "C": (22, [2, 5], [])}
    )
    assert (b.member_epoch, parts(b)) == (23, {0, 3, 4})
    assert view(c)["members"] == {"B": (23, [0, 3, 4], []), "C": (22, [2, 5], [])}
    # C heartbeats and transitions too.
    cr = c.hb("C", 22, owned={2, 5})
    assert (cr.member_epoch, parts(cr)) == (23, {1, 2, 5})
    assert view(c) == kip((23, ["B", "C"]), target23, {"B": (23, [0, 3, 4], []), "C": (23, [1, 2, 5], [])})
    assert c.group.state == ConsumerGroupState.STABLE
    assert c.assign.calls == [23]
    assert_no_double_ownership(c)


# ---------------------------------------------------------------------------------- Partition Added


def test_case_study_partition_added():
    c = StepCtx(partitions=1)
    c.assign = scripted({23: {"A": [0], "B": [1]}})
    seed(c, 22, {"A": [0], "B": []}, partitions=1)
    assert view(c) == kip(
        (22, ["A", "B"]), (22, {"A": [0], "B": []}), {"A": (22, [0], []), "B": (22, [], [])}
    )
    assert c.group.state == ConsumerGroupState.STABLE

    # foo-1 is created. The coordinator notices it on the next heartbeat (as released Kafka does,
    # comparing the subscribed topics' metadata), updates the group and bumps the epoch.
    c.topics.registry.topics["t"] = TopicInfo(T, 2)
    a = c.hb("A", 22, owned={0})
    assert c.after(rec.PARTITION_METADATA)["group"] == (22, ["A", "B"])
    assert c.group.topics[T].partitions == 2
    assert c.after(rec.GROUP_EPOCH) == kip(
        (23, ["A", "B"]), (22, {"A": [0], "B": []}), {"A": (22, [0], []), "B": (22, [], [])}
    )
    target23 = (23, {"A": [0], "B": [1]})
    assert c.after(rec.TARGET_EPOCH) == kip(
        (23, ["A", "B"]), target23, {"A": (22, [0], []), "B": (22, [], [])}
    )
    # A and B heartbeat and transition to epoch 23 (the KIP says "B and C": a typo for A and B).
    assert (a.member_epoch, parts(a)) == (23, None)  # A's partitions did not change
    b = c.hb("B", 22, owned=set())
    assert (b.member_epoch, parts(b)) == (23, {1})
    assert view(c) == kip((23, ["A", "B"]), target23, {"A": (23, [0], []), "B": (23, [1], [])})
    assert c.group.state == ConsumerGroupState.STABLE
    assert c.assign.calls == [23]
    assert_no_double_ownership(c)
