"""A classic group and its members: the state machine of the JoinGroup/SyncGroup protocol.

States and the transitions Kafka allows (the previous states each state may be entered from)::

    PreparingRebalance  <- Empty, Stable, CompletingRebalance
    CompletingRebalance <- PreparingRebalance
    Stable              <- CompletingRebalance
    Empty               <- PreparingRebalance
    Dead                <- any

As in Kafka, a classic group's rebalance runs in memory: JoinGroup and the join phase (join.py) add
and update members and set the generation, protocol and leader on this object directly. Those
persisted fields are written to the log (a GroupMetadata record) when the group becomes Stable or
Empty, and ``CoordinatorState.replay`` of that record sets them again, so after a restart the record
is the truth. The transient fields (parked JoinGroup/SyncGroup requests, pending members, the
in-flight rebalance) live only here and are lost on restart, as in Kafka.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

from ..result import Waiter
from ..timers import session_key

_new = object.__new__
_setattr = object.__setattr__


class GroupState(Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


_VALID_PREVIOUS: dict[GroupState, set[GroupState]] = {
    GroupState.PREPARING_REBALANCE: {GroupState.EMPTY, GroupState.STABLE, GroupState.COMPLETING_REBALANCE},
    GroupState.COMPLETING_REBALANCE: {GroupState.PREPARING_REBALANCE},
    GroupState.STABLE: {GroupState.COMPLETING_REBALANCE},
    GroupState.EMPTY: {GroupState.PREPARING_REBALANCE},
    GroupState.DEAD: set(GroupState),
}


class IllegalTransition(RuntimeError):
    pass


@dataclass
class Member:
    """A member of a classic group (JoinGroup's protocol)."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    assignment: bytes = b""
    #: parked JoinGroup / SyncGroup: (future, api version) while waiting
    join: tuple[Waiter, int] | None = None
    sync: tuple[Waiter, int] | None = None
    is_new: bool = False
    _session_key: str | None = field(default=None, repr=False, compare=False)

    def session_key(self, group_id: str) -> str:
        """The key of this member's session timer (built once)."""
        key = self._session_key
        if key is None:
            key = self._session_key = session_key(group_id, self.member_id)
        return key

    def metadata(self, protocol: str) -> bytes:
        for name, meta in self.protocols:
            if name == protocol:
                return meta
        raise KeyError(protocol)

    def protocol_names(self) -> list[str]:
        return [name for name, _ in self.protocols]

    def matches(self, protocols: list[tuple[str, bytes]]) -> bool:
        return list(self.protocols) == list(protocols)

    @property
    def awaiting_join(self) -> bool:
        return self.join is not None

    @property
    def awaiting_sync(self) -> bool:
        return self.sync is not None


#: the containers of a group made on the fly on first use (``ClassicGroup.__getattr__``)
_LAZY: dict[str, type] = {
    "members": dict,
    "static_members": dict,
    "pending_members": set,
    "pending_sync": set,
}


@dataclass
class ClassicGroup:
    """A classic group. A group made by ``replayed`` (start-up replay: one per group of the log, most
    of them Empty) has no ``members``, ``static_members``, ``pending_members`` or ``pending_sync`` until
    one is first read: ``__getattr__`` makes it empty then (two dicts and two sets are ~560 bytes a
    group, most of a restart's memory for the groups), so every reader sees the same group as one
    made by ``ClassicGroup(group_id)``; ``has_members`` asks without making one."""

    group_id: str
    state: GroupState = GroupState.EMPTY
    generation: int = 0
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str | None = None
    state_timestamp: int = -1
    members: dict[str, Member] = field(default_factory=dict)
    static_members: dict[str, str] = field(default_factory=dict)  # instance id -> member id
    pending_members: set[str] = field(default_factory=set)  # told MEMBER_ID_REQUIRED (v4+)
    pending_sync: set[str] = field(default_factory=set)  # must SyncGroup this generation
    initial_delay_phase: bool = False  # joining out of Empty: wait group.initial.rebalance.delay.ms
    new_member_added: bool = False  # a member arrived during the current initial delay
    initial_delay_remaining_ms: int = 0

    @classmethod
    def replayed(
        cls,
        group_id: str,
        generation: int = 0,
        protocol_type: str | None = None,
        protocol_name: str | None = None,
        leader_id: str | None = None,
        state_timestamp: int = -1,
    ) -> ClassicGroup:
        """An Empty group with these fields, as replay of its GroupMetadata record (or of offsets
        alone) makes it: equal to ``ClassicGroup(group_id, GroupState.EMPTY, ...)``, its containers
        made on first use. The fields are set in ``__init__``'s order (the instances share their
        attribute keys); the last three keep their class defaults until set; ``_no_members_yet``
        marks the members' dict as not made."""
        group = _new(cls)
        group.group_id = group_id
        group.state = GroupState.EMPTY
        group.generation = generation
        group.protocol_type = protocol_type
        group.protocol_name = protocol_name
        group.leader_id = leader_id
        group.state_timestamp = state_timestamp
        group._no_members_yet = True
        return group

    def __getattr__(self, name: str) -> dict | set:
        # only called for an attribute the instance does not have: a container ``replayed`` left out
        factory = _LAZY.get(name)
        if factory is None:
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        value = factory()
        # set as any attribute is (reading ``__dict__`` would turn the instance's inline attribute
        # values into a dict object of their own)
        _setattr(self, name, value)
        if name == "members":
            self._no_members_yet = False
        return value

    #: True on a replayed group until its members' dict is made (``has_members`` asks it first)
    _no_members_yet = False

    @property
    def has_members(self) -> bool:
        """Whether the group has members (without making the members' dict of a replayed group)."""
        return not self._no_members_yet and bool(self.members)

    # ------------------------------------------------------------------ state

    def transition(self, to: GroupState, now_ms: int) -> None:
        if self.state not in _VALID_PREVIOUS[to]:
            raise IllegalTransition(f"group {self.group_id}: {self.state.value} -> {to.value} is not allowed")
        self.state = to
        self.state_timestamp = now_ms

    def is_in(self, *states: GroupState) -> bool:
        return self.state in states

    # ------------------------------------------------------------------ members

    def add(self, member: Member) -> None:
        if not self.members:
            self.protocol_type = member.protocol_type
        self.members[member.member_id] = member
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        if self.leader_id is None:
            self.leader_id = member.member_id

    def remove(self, member_id: str) -> Member | None:
        member = self.members.pop(member_id, None)
        if member is None:
            return None
        if (
            member.group_instance_id is not None
            and self.static_members.get(member.group_instance_id) == member_id
        ):
            del self.static_members[member.group_instance_id]
        self.pending_sync.discard(member_id)
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        return member

    def static_member_id(self, instance_id: str | None) -> str | None:
        return None if instance_id is None else self.static_members.get(instance_id)

    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def all_joined(self) -> bool:
        return not self.pending_members and all(m.awaiting_join for m in self.members.values())

    def not_yet_rejoined(self) -> list[Member]:
        return [m for m in self.members.values() if not m.awaiting_join]

    # ------------------------------------------------------------------ protocols

    def supports(self, protocol_type: str, protocols: list[tuple[str, bytes]]) -> bool:
        """Whether a member with these protocols may join (same type, a protocol in common)."""
        if not protocols or not protocol_type:
            return False
        if not self.members:
            return True
        if protocol_type != self.protocol_type:
            return False
        names = {n for n, _ in protocols}
        return bool(names & self.candidate_protocols())

    def candidate_protocols(self) -> set[str]:
        sets = [set(m.protocol_names()) for m in self.members.values()]
        return set.intersection(*sets) if sets else set()

    def select_protocol(self) -> str:
        """Each member votes for its most preferred candidate; most votes wins, ties broken by the
        leader's preference order (then by name), so the choice is deterministic."""
        candidates = self.candidate_protocols()
        votes: dict[str, int] = {}
        for m in self.members.values():
            choice = next(n for n in m.protocol_names() if n in candidates)
            votes[choice] = votes.get(choice, 0) + 1
        leader = self.members.get(self.leader_id) if self.leader_id else None
        order = {n: i for i, n in enumerate(leader.protocol_names())} if leader else {}
        return max(votes, key=lambda n: (votes[n], -order.get(n, len(order)), n))
