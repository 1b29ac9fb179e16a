"""Reconciliation of one member towards its target assignment (KIP-848), as a pure function.

A member moves from its current assignment to its target in steps, each visible to the member in
a heartbeat response:

1. UNREVOKED_PARTITIONS: it must first give up what is not in its target; it keeps
   ``current & target`` and stays at its epoch until a heartbeat shows it no longer owns the
   revoked partitions (or its rebalance timeout fences it). A member that already says it does
   not own them (an eager classic member rejoins having revoked everything) skips this step.
2. Then it moves to the target epoch. Partitions of its target that another member still owns
   (assigned or pending revocation) are held back: UNRELEASED_PARTITIONS, until their owner
   releases them. So no partition is ever owned by two members.
3. STABLE: it owns its whole target at the target epoch.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import IntEnum
from uuid import UUID

Assignment = dict[UUID, frozenset[int]]


class MemberState(IntEnum):
    STABLE = 0
    UNREVOKED_PARTITIONS = 1
    UNRELEASED_PARTITIONS = 2
    UNKNOWN = 3


@dataclass
class Progress:
    """The reconciliation-relevant part of a member."""

    member_epoch: int
    previous_member_epoch: int
    state: MemberState
    assigned: Assignment = field(default_factory=dict)
    pending_revocation: Assignment = field(default_factory=dict)


def _minus(a: Mapping[UUID, frozenset[int]], b: Mapping[UUID, frozenset[int]]) -> Assignment:
    out = {}
    for t, ps in a.items():
        rest = ps - b.get(t, frozenset())
        if rest:
            out[t] = frozenset(rest)
    return out


def _and(a: Mapping[UUID, frozenset[int]], b: Mapping[UUID, frozenset[int]]) -> Assignment:
    out = {}
    for t, ps in a.items():
        both = ps & b.get(t, frozenset())
        if both:
            out[t] = frozenset(both)
    return out


def _union(a: Mapping[UUID, frozenset[int]], b: Mapping[UUID, frozenset[int]]) -> Assignment:
    out = dict(a)
    for t, ps in b.items():
        out[t] = frozenset(out.get(t, frozenset()) | ps)
    return {t: ps for t, ps in out.items() if ps}


def owns_any(owned: Mapping[UUID, frozenset[int]] | None, partitions: Mapping[UUID, frozenset[int]]) -> bool:
    if owned is None:
        return True
    return any(owned.get(t, frozenset()) & ps for t, ps in partitions.items())


def subset(a: Mapping[UUID, frozenset[int]], b: Mapping[UUID, frozenset[int]]) -> bool:
    return all(ps <= b.get(t, frozenset()) for t, ps in a.items())


def reconcile(
    current: Progress,
    target_epoch: int,
    target: Assignment,
    owned_by_client: Mapping[UUID, frozenset[int]] | None,
    owner_of: Callable[[UUID, int], bool],
) -> Progress:
    """The member's next step.

    ``owned_by_client`` is what the heartbeat says the member still owns (None when the request
    did not say); ``owner_of(topic, partition)`` tells whether *another* member still holds it.
    """
    if current.state == MemberState.UNREVOKED_PARTITIONS:
        if owns_any(owned_by_client, current.pending_revocation):
            return current  # still revoking
        # revocation acknowledged: fall through and move on towards the target
        current = Progress(
            current.member_epoch, current.previous_member_epoch, MemberState.STABLE, current.assigned, {}
        )
    if (
        current.member_epoch == target_epoch
        and current.state == MemberState.STABLE
        and not _minus(target, current.assigned)
    ):
        return current
    keep = _and(current.assigned, target)
    revoke = _minus(current.assigned, target)
    if revoke and owns_any(owned_by_client, revoke):
        return Progress(
            current.member_epoch,
            current.previous_member_epoch,
            MemberState.UNREVOKED_PARTITIONS,
            keep,
            revoke,
        )
    wanted = _minus(target, keep)
    free: Assignment = {}
    held_back = False
    for t, ps in wanted.items():
        ok = frozenset(p for p in ps if not owner_of(t, p))
        if ok:
            free[t] = ok
        if len(ok) < len(ps):
            held_back = True
    assigned = _union(keep, free)
    state = MemberState.UNRELEASED_PARTITIONS if held_back else MemberState.STABLE
    previous = current.member_epoch if current.member_epoch != target_epoch else current.previous_member_epoch
    return Progress(target_epoch, previous, state, assigned, {})
