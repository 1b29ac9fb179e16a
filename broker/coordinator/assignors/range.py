"""The ``range`` assignor (Kafka's server-side RangeAssignor, as rewritten for Kafka 3.9 / 4.x).

For every topic, the members subscribed to it, in a fixed order, get consecutive ranges of its
partitions: ``P // N`` each, the first ``P % N`` members one more; with more members than
partitions the last members get nothing of that topic.

The order is Kafka's: static members (with a ``group.instance.id``) first, by instance id, then
dynamic members by member id (ties by member id). Because every topic uses the same order, members
subscribed to the same set of topics with equal partition counts get the same partition numbers of
each (co-partitioning, for joins); in a homogeneous group this holds across all topics of equal
size.

The assignor is **not sticky**: the current assignment is ignored and the ranges are recomputed
each time, as Kafka does since KAFKA-16944 (the 3.7/3.8 server-side range assignor kept current
partitions within the per-topic quota, which could break co-partitioning). Static membership is
what keeps it stable across restarts. Partition racks are not used.
"""

from __future__ import annotations

from collections.abc import Mapping
from uuid import UUID

from . import (
    GroupAssignment,
    MemberSpec,
    TopicInfo,
    effective_subscriptions,
    partition_counts,
    sorted_member_ids,
    topic_sort_key,
)

__all__ = ["RangeAssignor", "assign_range"]


class RangeAssignor:
    """Kafka's ``range`` server-side assignor."""

    name = "range"

    def assign(self, members: Mapping[str, MemberSpec], topics: Mapping[UUID, TopicInfo]) -> GroupAssignment:
        return assign_range(members, topics)

    __call__ = assign

    def __repr__(self) -> str:
        return "RangeAssignor()"


def member_order(members: Mapping[str, MemberSpec], member_ids: list[str]) -> list[str]:
    """Static members by instance id first, then dynamic members by member id."""
    static = [m for m in member_ids if members[m].instance_id is not None]
    if not static:
        return member_ids
    static.sort(key=lambda m: (members[m].instance_id, m))
    return static + [m for m in member_ids if members[m].instance_id is None]


def assign_range(members: Mapping[str, MemberSpec], topics: Mapping[UUID, TopicInfo]) -> GroupAssignment:
    if not members:
        return {}
    counts = partition_counts(topics)
    member_ids = sorted_member_ids(members)
    result: GroupAssignment = {m: {} for m in member_ids}
    ordered = member_order(members, member_ids)
    subscriptions, homogeneous = effective_subscriptions(ordered, members, counts)
    cache: dict[tuple[int, int], list[frozenset[int]]] = {}
    if homogeneous:
        outs = [result[m] for m in ordered]
        for topic_id in sorted(subscriptions[0], key=topic_sort_key):
            _ranges(topic_id, counts[topic_id], outs, cache)
        return result

    subscribers: dict[UUID, list[dict[UUID, frozenset[int]]]] = {}
    for member_id, subscription in zip(ordered, subscriptions, strict=True):
        out = result[member_id]
        for topic_id in subscription:
            lst = subscribers.get(topic_id)
            if lst is None:
                subscribers[topic_id] = [out]
            else:
                lst.append(out)
    for topic_id in sorted(subscribers, key=topic_sort_key):
        _ranges(topic_id, counts[topic_id], subscribers[topic_id], cache)
    return result


def _ranges(
    topic_id: UUID,
    n: int,
    outs: list[dict[UUID, frozenset[int]]],
    cache: dict[tuple[int, int], list[frozenset[int]]],
) -> None:
    """Gives the subscribers ``outs`` (in order) consecutive ranges of the topic's ``n`` partitions.

    The range sets only depend on ``n`` and the number of subscribers, so topics of the same size
    share them (they are immutable).
    """
    key = (n, len(outs))
    ranges = cache.get(key)
    if ranges is None:
        base, extra = divmod(n, len(outs))
        ranges = []
        start = 0
        for k in range(min(n, len(outs))):
            end = start + base + 1 if k < extra else start + base
            ranges.append(frozenset(range(start, end)))
            start = end
        cache[key] = ranges
    for out, parts in zip(outs, ranges, strict=False):
        out[topic_id] = parts
