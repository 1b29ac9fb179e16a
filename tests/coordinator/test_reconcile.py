"""Member reconciliation steps (KIP-848 'Basic' and 'Incremental' case studies, per member)."""

from __future__ import annotations

import uuid

from broker.coordinator.consumer.reconcile import MemberState, Progress, reconcile

T = uuid.UUID(int=1)
U = uuid.UUID(int=2)


def fs(*ps: int) -> frozenset[int]:
    return frozenset(ps)


def test_revoke_first_then_wait_for_release_then_stable():
    a = Progress(1, 0, MemberState.STABLE, {T: fs(0, 1, 2)})
    b = Progress(0, 0, MemberState.STABLE, {})
    owners = {(T, 0): "a", (T, 1): "a", (T, 2): "a"}

    def other_than(me):
        return lambda t, p: owners.get((t, p)) not in (None, me)

    # group epoch 2: target A={0,1}, B={2}
    a = reconcile(a, 2, {T: fs(0, 1)}, {T: fs(0, 1, 2)}, other_than("a"))
    assert (a.member_epoch, a.state, a.assigned, a.pending_revocation) == (
        1,
        MemberState.UNREVOKED_PARTITIONS,
        {T: fs(0, 1)},
        {T: fs(2)},
    )
    b = reconcile(b, 2, {T: fs(2)}, {}, other_than("b"))
    assert (b.member_epoch, b.state, b.assigned) == (2, MemberState.UNRELEASED_PARTITIONS, {})
    # A still says it owns 2: nothing moves
    assert reconcile(a, 2, {T: fs(0, 1)}, {T: fs(0, 1, 2)}, other_than("a")) == a
    # A acknowledges the revocation
    a = reconcile(a, 2, {T: fs(0, 1)}, {T: fs(0, 1)}, other_than("a"))
    assert (a.member_epoch, a.previous_member_epoch, a.state, a.assigned) == (
        2,
        1,
        MemberState.STABLE,
        {T: fs(0, 1)},
    )
    del owners[(T, 2)]
    b = reconcile(b, 2, {T: fs(2)}, {}, other_than("b"))
    assert (b.member_epoch, b.state, b.assigned) == (2, MemberState.STABLE, {T: fs(2)})


def test_member_with_nothing_to_revoke_advances_at_once():
    m = Progress(3, 2, MemberState.STABLE, {T: fs(0)})
    m = reconcile(m, 4, {T: fs(0), U: fs(1)}, None, lambda t, p: False)
    assert (m.member_epoch, m.previous_member_epoch, m.state, m.assigned) == (
        4,
        3,
        MemberState.STABLE,
        {T: fs(0), U: fs(1)},
    )


def test_stable_member_at_target_is_unchanged():
    m = Progress(4, 3, MemberState.STABLE, {T: fs(0, 1)})
    assert reconcile(m, 4, {T: fs(0, 1)}, {T: fs(0, 1)}, lambda t, p: False) is m


def test_unreleased_partitions_arrive_when_freed():
    m = Progress(5, 4, MemberState.UNRELEASED_PARTITIONS, {T: fs(0)})
    held = {(T, 1)}
    m = reconcile(m, 5, {T: fs(0, 1)}, {T: fs(0)}, lambda t, p: (t, p) in held)
    assert m.state == MemberState.UNRELEASED_PARTITIONS and m.assigned == {T: fs(0)}
    held.clear()
    m = reconcile(m, 5, {T: fs(0, 1)}, {T: fs(0)}, lambda t, p: (t, p) in held)
    assert (m.state, m.assigned) == (MemberState.STABLE, {T: fs(0, 1)})


def test_revocation_acknowledged_when_request_omits_owned_partitions_is_not_assumed():
    m = Progress(1, 0, MemberState.UNREVOKED_PARTITIONS, {T: fs(0)}, {T: fs(1)})
    # a heartbeat without TopicPartitions says nothing about what it owns: keep waiting
    assert reconcile(m, 2, {T: fs(0)}, None, lambda t, p: False) == m
