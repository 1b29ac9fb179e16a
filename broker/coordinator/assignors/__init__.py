"""Server-side partition assignors for consumer groups (KIP-848): ``uniform`` and ``range``.

Pure functions over plain data, no I/O. The group coordinator calls an assignor whenever the group
epoch moves past the assignment epoch::

    from broker.coordinator.assignors import ASSIGNORS, MemberSpec, TopicInfo

    target = ASSIGNORS["uniform"].assign(members, topics)   # or ASSIGNORS["uniform"](members, topics)

Inputs

* ``members``: member id -> :class:`MemberSpec`: the member's rack, its subscribed topic ids and its
  *current target* assignment (topic id -> partitions), which the sticky assignors try to keep.
* ``topics``: topic id -> :class:`TopicInfo`: the metadata of (at least) the subscribed topics.

Output: member id -> (topic id -> frozenset of partitions), with **every** member present (an
empty dict when it gets nothing) and no empty partition sets. The returned dicts are fresh; the
frozensets may be the very objects passed in as the current assignment when they are kept as is.

Input handling, shared by every assignor:

* A subscribed topic id missing from ``topics`` is ignored (the topic does not exist, or not yet).
  Kafka's coordinator only hands the assignor topics that resolve in the metadata image, so this is
  the same outcome; Kafka's assignors themselves would throw.
* Partitions in a current assignment that are not valid any more (topic not subscribed by that
  member, topic gone, partition number outside ``[0, num_partitions)``) are dropped; a partition
  claimed by two members is kept by the first one in member id order.
* Invalid input (a negative partition count, a member spec of the wrong type) raises
  :class:`AssignorError`; the coordinator should then keep the previous target assignment.

Speed: subscriptions are compared as frozensets, which is fast when the topic id objects are
shared (equal sets then compare by identity), as they are when the coordinator resolves topic
names through one registry; sharing one frozenset between members is faster still.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol
from uuid import UUID

__all__ = [
    "ASSIGNORS",
    "DEFAULT_ASSIGNORS",
    "AssignorError",
    "GroupAssignment",
    "MemberSpec",
    "PartitionAssignor",
    "RangeAssignor",
    "TopicInfo",
    "UniformAssignor",
    "assign",
]


class AssignorError(Exception):
    """The assignor could not compute an assignment from its input (Kafka's PartitionAssignorException)."""


@dataclass(frozen=True, slots=True)
class MemberSpec:
    """What an assignor knows about one member (Kafka's MemberSubscription + current target)."""

    rack_id: str | None = None
    subscribed_topic_ids: frozenset[UUID] = frozenset()
    # The member's current *target* assignment (not what it owns right now): topic id -> partitions.
    assignment: Mapping[UUID, frozenset[int]] = field(default_factory=dict)
    # group.instance.id of a static member; the range assignor orders static members by it.
    instance_id: str | None = None

    @property
    def current_assignment(self) -> Mapping[UUID, frozenset[int]]:
        return self.assignment


@dataclass(frozen=True, slots=True)
class TopicInfo:
    """Metadata of one topic (Kafka's SubscribedTopicDescriber, for one topic)."""

    name: str
    num_partitions: int
    # partition -> racks of its replicas; optional, and not used by either assignor (nor by Kafka's
    # uniform one; only recent Kafka versions made the range assignor rack-aware).
    partition_racks: Mapping[int, frozenset[str]] | None = None


GroupAssignment = dict[str, dict[UUID, frozenset[int]]]


class PartitionAssignor(Protocol):
    """A server-side assignor: a name and a pure ``assign`` function."""

    name: str

    def assign(self, members: Mapping[str, MemberSpec], topics: Mapping[UUID, TopicInfo]) -> GroupAssignment:
        """Computes the new target assignment of the group; raises AssignorError on invalid input."""
        ...

    def __call__(
        self, members: Mapping[str, MemberSpec], topics: Mapping[UUID, TopicInfo]
    ) -> GroupAssignment: ...


def partition_counts(topics: Mapping[UUID, TopicInfo]) -> dict[UUID, int]:
    """topic id -> partition count, validated."""
    counts: dict[UUID, int] = {}
    for topic_id, info in topics.items():
        n = info.num_partitions
        if type(n) is not int or n < 0:
            raise AssignorError(f"topic {topic_id} ({info.name!r}) has an invalid partition count {n!r}")
        counts[topic_id] = n
    return counts


def sorted_member_ids(members: Mapping[str, MemberSpec]) -> list[str]:
    """Member ids in sorted order, checking the specs on the way."""
    for member_id, spec in members.items():
        if not isinstance(spec, MemberSpec):
            raise AssignorError(f"member {member_id!r}: expected a MemberSpec, got {type(spec).__name__}")
    return sorted(members)


def effective_subscriptions(
    member_ids: list[str], members: Mapping[str, MemberSpec], counts: Mapping[UUID, int]
) -> tuple[list[frozenset[UUID]], bool]:
    """Each member's subscription restricted to existing topics, and whether they are all equal.

    The existing-topic filter is computed once per distinct subscription.
    """
    cache: dict[frozenset[UUID], frozenset[UUID]] = {}
    out: list[frozenset[UUID]] = []
    for member_id in member_ids:
        s = members[member_id].subscribed_topic_ids
        if type(s) is not frozenset:
            s = frozenset(s)
        # Keyed by value: the hash of a frozenset is cached and equal sets of the same topic id
        # objects compare by identity, so this stays cheap for large groups.
        eff = cache.get(s)
        if eff is None:
            eff = s if all(t in counts for t in s) else frozenset(t for t in s if t in counts)
            cache[s] = eff
        out.append(eff)
    homogeneous = len(cache) <= 1 or len(set(cache.values())) == 1
    return out, homogeneous


def topic_sort_key(topic_id: UUID) -> int:
    return topic_id.int


from .range import RangeAssignor  # noqa: E402
from .uniform import UniformAssignor  # noqa: E402

ASSIGNORS: dict[str, PartitionAssignor] = {
    UniformAssignor.name: UniformAssignor(),
    RangeAssignor.name: RangeAssignor(),
}

# Kafka's default group.consumer.assignors: the first one is used when a member names none.
DEFAULT_ASSIGNORS: list[str] = ["uniform", "range"]


def assign(name: str, members: Mapping[str, MemberSpec], topics: Mapping[UUID, TopicInfo]) -> GroupAssignment:
    """Runs the assignor called ``name``; KeyError if there is no such assignor."""
    return ASSIGNORS[name].assign(members, topics)
