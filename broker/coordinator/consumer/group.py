"""A KIP-848 consumer group: group epoch, target assignment with its epoch, members with their
current assignment and epoch. The group state is derived, never stored:

- Empty:       no members;
- Assigning:   the group epoch is ahead of the target assignment's epoch;
- Reconciling: some member is not yet at the assignment epoch, or not Stable;
- Stable:      every member owns its whole target at the assignment epoch.

Persisted fields change only through ``apply_*`` called from ``CoordinatorState.replay``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from uuid import UUID

from .reconcile import Assignment, MemberState, Progress

#: member epoch of a static member that left with epoch -2 and may come back
STATIC_LEFT_EPOCH = -2


class ConsumerGroupState(Enum):
    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass(frozen=True)
class ClassicMeta:
    """A member that speaks the classic protocol inside a consumer group (online migration): its
    JoinGroup session timeout and protocols, most preferred first."""

    session_timeout_ms: int
    protocols: tuple[tuple[str, bytes], ...]

    @property
    def protocol_name(self) -> str:
        """The protocol named in its JoinGroup/SyncGroup responses: its first, as Kafka does."""
        return self.protocols[0][0]


@dataclass
class ConsumerMember:
    """A member of a consumer group (KIP-848's ConsumerGroupHeartbeat protocol)."""

    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: list[str] = field(default_factory=list)
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    rebalance_timeout_ms: int = -1
    progress: Progress = field(default_factory=lambda: Progress(0, 0, MemberState.STABLE))
    #: set while the member uses JoinGroup/SyncGroup/Heartbeat (a classic consumer)
    classic: ClassicMeta | None = None

    @property
    def member_epoch(self) -> int:
        return self.progress.member_epoch

    @property
    def assigned(self) -> Assignment:
        return self.progress.assigned


@dataclass
class TopicMeta:
    """A subscribed topic's metadata as the group's assignment saw it."""

    name: str
    partitions: int


@dataclass
class ConsumerGroup:
    """A consumer group (KIP-848): epochs, members, target assignment and subscribed topics."""

    group_id: str
    group_epoch: int = 0
    assignment_epoch: int = 0
    members: dict[str, ConsumerMember] = field(default_factory=dict)
    target: dict[str, Assignment] = field(default_factory=dict)
    topics: dict[UUID, TopicMeta] = field(default_factory=dict)  # subscribed topics' metadata
    static_members: dict[str, str] = field(default_factory=dict)  # instance id -> member id
    dead: bool = False

    @property
    def state(self) -> ConsumerGroupState:
        if self.dead:
            return ConsumerGroupState.DEAD
        if not self.members:
            return ConsumerGroupState.EMPTY
        if self.group_epoch > self.assignment_epoch:
            return ConsumerGroupState.ASSIGNING
        for m in self.members.values():
            if m.member_epoch != self.assignment_epoch or m.progress.state != MemberState.STABLE:
                return ConsumerGroupState.RECONCILING
        return ConsumerGroupState.STABLE

    def owner_of(self, topic: UUID, partition: int) -> str | None:
        """The member that currently holds a partition (assigned or still revoking it)."""
        for m in self.members.values():
            if partition in m.progress.assigned.get(
                topic, ()
            ) or partition in m.progress.pending_revocation.get(topic, ()):
                return m.member_id
        return None

    def classic_members(self) -> list[ConsumerMember]:
        return [m for m in self.members.values() if m.classic is not None]

    def all_classic_except(self, member_id: str) -> bool:
        """Every member but ``member_id`` speaks the classic protocol (a downgrade candidate)."""
        return all(m.classic is not None for mid, m in self.members.items() if mid != member_id)

    def supports_classic(self, protocol_type: str, names: set[str]) -> bool:
        """Whether a classic member with these protocols may join: type "consumer" and a protocol
        every classic member supports (any, when it would be the first classic member)."""
        if not self.members:
            return bool(protocol_type) and bool(names)
        if protocol_type != "consumer" or not names:
            return False
        for m in self.classic_members():
            names = names & {n for n, _ in m.classic.protocols}  # type: ignore[union-attr]
        return bool(names)

    def waiting_on_unreleased(self, member: ConsumerMember, target: dict) -> bool:
        """Whether some partition of the member's target is still held by another member."""
        for t, ps in target.items():
            have = member.progress.assigned.get(t, frozenset())
            for p in ps - have:
                owner = self.owner_of(t, p)
                if owner is not None and owner != member.member_id:
                    return True
        return False

    def subscribed_names(self) -> set[str]:
        names: set[str] = set()
        for m in self.members.values():
            names.update(m.subscribed_topic_names)
        return names

    def put_member(self, member: ConsumerMember) -> None:
        old = self.members.get(member.member_id)
        if old is not None and old.instance_id and self.static_members.get(old.instance_id) == old.member_id:
            del self.static_members[old.instance_id]
        self.members[member.member_id] = member
        if member.instance_id:
            self.static_members[member.instance_id] = member.member_id

    def remove_member(self, member_id: str) -> ConsumerMember | None:
        m = self.members.pop(member_id, None)
        if m is not None and m.instance_id and self.static_members.get(m.instance_id) == member_id:
            del self.static_members[m.instance_id]
        return m
