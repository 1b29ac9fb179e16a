"""The ``uniform`` assignor (Kafka's UniformAssignor): balanced first, then sticky.

Two paths, as in Kafka:

* **Homogeneous** (every member subscribes to the same existing topics): the ``P`` partitions are
  split into quotas of ``P // M`` partitions, ``P % M`` members getting one more. Every member keeps
  its current partitions up to its quota and the rest of the partitions fill the members below
  quota. The extra partitions go first to members which already hold more than ``P // M``
  (Kafka hands them out in member iteration order instead), so no partition moves that need not:
  when a member joins, the old members only give up partitions, all of them to the new member;
  when a member leaves, the others only gain its partitions. Sizes are always within one.
* **Heterogeneous**: every member keeps its current partitions of the topics it still subscribes
  to; the unassigned partitions are spread over the least loaded subscribers of their topic,
  topics with the most partitions per subscriber first; then partitions move, one topic at a time,
  from the most loaded subscriber holding one of the topic's partitions to the least loaded
  subscriber, newly handed out partitions first, until no partition can move to a subscriber of
  its topic which holds at least two partitions fewer than its member. Members with the same
  subscription thus end within one of each other. Kafka stops this balancing after 16 rounds;
  here it runs until it converges, which it must, since every move lowers the sum of the squared
  member sizes.

The result depends only on the content of the input: members are taken in member id order and
topics in topic id order; every tie is broken by those orders. Partition racks are not used (nor
are they by Kafka's uniform assignor).
"""

from __future__ import annotations

from collections.abc import Mapping
from heapq import heapify, heappop, heappush, heapreplace
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

__all__ = ["UniformAssignor", "assign_uniform"]


class UniformAssignor:
    """Kafka's ``uniform`` server-side assignor."""

    name = "uniform"

    def assign(self, members: Mapping[str, MemberSpec], topics: Mapping[UUID, TopicInfo]) -> GroupAssignment:
        return assign_uniform(members, topics)

    __call__ = assign

    def __repr__(self) -> str:
        return "UniformAssignor()"


def assign_uniform(members: Mapping[str, MemberSpec], topics: Mapping[UUID, TopicInfo]) -> GroupAssignment:
    if not members:
        return {}
    counts = partition_counts(topics)
    member_ids = sorted_member_ids(members)
    subscriptions, homogeneous = effective_subscriptions(member_ids, members, counts)
    if homogeneous:
        return _homogeneous(member_ids, members, subscriptions[0], counts)
    return _heterogeneous(member_ids, members, subscriptions, counts)


def _valid(
    parts: frozenset[int], n: int, topic_id: UUID, claimed: dict[UUID, set[int]]
) -> frozenset[int] | None:
    """The partitions of ``parts`` that exist and nobody claimed before; claims them."""
    if type(parts) is not frozenset:
        parts = frozenset(parts)
    if min(parts) < 0 or max(parts) >= n:
        parts = frozenset(p for p in parts if 0 <= p < n)
        if not parts:
            return None
    seen = claimed.get(topic_id)
    if seen is None:
        claimed[topic_id] = set(parts)
    elif seen.isdisjoint(parts):
        seen |= parts
    else:
        parts = parts - seen
        if not parts:
            return None
        seen |= parts
    return parts


def _homogeneous(
    member_ids: list[str],
    members: Mapping[str, MemberSpec],
    subscribed: frozenset[UUID],
    counts: Mapping[UUID, int],
) -> GroupAssignment:
    num_members = len(member_ids)
    topic_ids = sorted(subscribed, key=topic_sort_key)
    total = sum(map(counts.__getitem__, topic_ids))
    if total == 0:
        return {m: {} for m in member_ids}

    # 1. What every member may keep: its valid current partitions (claims in member id order).
    claimed: dict[UUID, set[int]] = {}
    kept: list[dict[UUID, frozenset[int]]] = []
    sizes: list[int] = []
    for member_id in member_ids:
        mine: dict[UUID, frozenset[int]] = {}
        size = 0
        current = members[member_id].assignment
        if current:
            for topic_id, parts in current.items():
                if not parts or topic_id not in subscribed:
                    continue
                valid = _valid(parts, counts[topic_id], topic_id, claimed)
                if valid is not None:
                    mine[topic_id] = valid
                    size += len(valid)
        kept.append(mine)
        sizes.append(size)

    # 2. Quotas: total // M each, one more for total % M members, those already holding more
    #    than the base first (each such extra saves a move), then in member id order.
    base, extra = divmod(total, num_members)
    quotas = [base] * num_members
    if extra:
        for i, size in enumerate(sizes):
            if size > base:
                quotas[i] = base + 1
                extra -= 1
                if not extra:
                    break
        if extra:
            for i in range(num_members):
                if quotas[i] == base:
                    quotas[i] = base + 1
                    extra -= 1
                    if not extra:
                        break

    # 3. Revoke what exceeds a quota: the highest partitions of the last topics (topic id order).
    for i in range(num_members):
        excess = sizes[i] - quotas[i]
        if excess <= 0:
            continue
        mine = kept[i]
        for topic_id in sorted(mine, key=topic_sort_key, reverse=True):
            parts = mine[topic_id]
            seen = claimed[topic_id]
            if len(parts) <= excess:
                del mine[topic_id]
                seen -= parts
                excess -= len(parts)
            else:
                ordered = sorted(parts)
                keep = len(parts) - excess
                mine[topic_id] = frozenset(ordered[:keep])
                seen.difference_update(ordered[keep:])
                excess = 0
            if not excess:
                break
        sizes[i] = quotas[i]

    # 4. The unassigned partitions, in topic id then partition order, as runs per topic.
    pool: list[tuple[UUID, range | list[int]]] = []
    for topic_id in topic_ids:
        n = counts[topic_id]
        if not n:
            continue
        seen = claimed.get(topic_id)
        if seen is None:
            pool.append((topic_id, range(n)))
        elif len(seen) < n:
            pool.append((topic_id, sorted(set(range(n)).difference(seen))))

    # 5. Fill the members below quota, in member id order, with consecutive runs of the pool.
    run = 0
    offset = 0
    for i in range(num_members):
        need = quotas[i] - sizes[i]
        if need <= 0:
            continue
        mine = kept[i]
        while need:
            topic_id, seq = pool[run]
            available = len(seq) - offset
            if need < available:
                piece = seq[offset : offset + need]
                offset += need
                need = 0
            else:
                piece = seq[offset:] if offset else seq
                run += 1
                offset = 0
                need -= available
            old = mine.get(topic_id)
            mine[topic_id] = frozenset(piece) if old is None else old.union(piece)

    return dict(zip(member_ids, kept, strict=True))


def _heterogeneous(
    member_ids: list[str],
    members: Mapping[str, MemberSpec],
    subscriptions: list[frozenset[UUID]],
    counts: Mapping[UUID, int],
) -> GroupAssignment:
    num_members = len(member_ids)

    # Subscribers of every topic, as member indices in ascending order.
    subscribers: dict[UUID, list[int]] = {}
    for i, subscription in enumerate(subscriptions):
        for topic_id in subscription:
            lst = subscribers.get(topic_id)
            if lst is None:
                subscribers[topic_id] = [i]
            else:
                lst.append(i)

    # 1. Keep every valid current partition. held[t][i]: member i's partitions of topic t, the
    #    kept ones first (ascending), the ones handed out in this round appended after them.
    held: dict[UUID, dict[int, list[int]]] = {t: {} for t in subscribers}
    claimed: dict[UUID, set[int]] = {}
    sizes = [0] * num_members
    for i, member_id in enumerate(member_ids):
        current = members[member_id].assignment
        if not current:
            continue
        subscription = subscriptions[i]
        for topic_id, parts in current.items():
            if not parts or topic_id not in subscription:
                continue
            valid = _valid(parts, counts[topic_id], topic_id, claimed)
            if valid is not None:
                held[topic_id][i] = sorted(valid)
                sizes[i] += len(valid)

    # Topics by partitions per subscriber (descending), then subscriber count, then topic id.
    topic_order = sorted(
        subscribers,
        key=lambda t: (-counts[t] / len(subscribers[t]), len(subscribers[t]), topic_sort_key(t)),
    )

    # 2. Spread the unassigned partitions of each topic over its least loaded subscribers.
    for topic_id in topic_order:
        n = counts[topic_id]
        if not n:
            continue
        seen = claimed.get(topic_id)
        if seen is None:
            free: range | list[int] = range(n)
        elif len(seen) < n:
            free = sorted(set(range(n)).difference(seen))
        else:
            continue
        _spread(free, subscribers[topic_id], sizes, held[topic_id])

    # 3. Balance, topic by topic, round and round until a whole round moves nothing.
    movable = [t for t in topic_order if counts[t] and len(subscribers[t]) >= 2]
    if movable:
        # Stop on coming back to the last topic which moved something (or to the first topic if
        # none did): every topic has been balanced since the last move.
        last_moved = -1
        index = 0
        while index != last_moved:
            topic_id = movable[index]
            if _balance_topic(subscribers[topic_id], sizes, held[topic_id]) or last_moved == -1:
                last_moved = index
            index += 1
            if index == len(movable):
                index = 0

    result: GroupAssignment = {m: {} for m in member_ids}
    for topic_id in sorted(subscribers, key=topic_sort_key):
        for i, parts in held[topic_id].items():
            if parts:
                result[member_ids[i]][topic_id] = frozenset(parts)
    return result


def _spread(free: range | list[int], subs: list[int], sizes: list[int], held: dict[int, list[int]]) -> None:
    """Hands ``free`` out to the least loaded of ``subs`` (water filling), in consecutive runs.

    Equivalent, in the sizes it produces, to giving the partitions one at a time to the member with
    the fewest partitions (ties: lowest index).
    """
    order = sorted(subs, key=sizes.__getitem__)  # stable: ties stay in index order
    num = len(order)
    remaining = len(free)
    level = sizes[order[0]]
    j = 1
    while j < num and sizes[order[j]] == level:
        j += 1
    while j < num:
        step = sizes[order[j]]
        need = j * (step - level)
        if need > remaining:
            break
        remaining -= need
        level = step
        while j < num and sizes[order[j]] == level:
            j += 1
    rise, rest = divmod(remaining, j)
    level += rise
    pos = 0
    for x in range(j):
        i = order[x]
        give = level - sizes[i] + (1 if x < rest else 0)
        if give:
            piece = free[pos : pos + give]
            pos += give
            lst = held.get(i)
            if lst is None:
                held[i] = list(piece)
            else:
                lst.extend(piece)
            sizes[i] += give


def _balance_topic(subs: list[int], sizes: list[int], held: dict[int, list[int]]) -> int:
    """Moves partitions of one topic from its most to its least loaded subscribers.

    Stops when the most loaded subscriber holding a partition of the topic has at most one more
    partition than the least loaded subscriber. Returns the number of partitions moved.
    """
    low = min(map(sizes.__getitem__, subs))
    high = -1
    for i, parts in held.items():
        if parts and sizes[i] > high:
            high = sizes[i]
    if high - low <= 1:
        return 0

    # Lazy heaps: an entry is current when its size matches the member's size (and, for givers,
    # the member still holds a partition of the topic); stale entries are skipped.
    takers = [(sizes[i], i) for i in subs]
    heapify(takers)
    givers = [(-sizes[i], -i) for i, parts in held.items() if parts]
    heapify(givers)
    moved = 0
    while givers:
        neg_size, neg_giver = givers[0]
        giver = -neg_giver
        giver_parts = held.get(giver)
        if -neg_size != sizes[giver] or not giver_parts:
            heappop(givers)
            continue
        taker_size, taker = takers[0]
        if taker_size != sizes[taker]:
            heappop(takers)
            continue
        if sizes[giver] - taker_size <= 1:
            break
        # Give away the partition handed out last (a new one before a kept one).
        partition = giver_parts.pop()
        taker_parts = held.get(taker)
        if taker_parts is None:
            held[taker] = [partition]
        else:
            taker_parts.append(partition)
        sizes[giver] -= 1
        sizes[taker] += 1
        moved += 1
        if giver_parts:
            heapreplace(givers, (-sizes[giver], neg_giver))
        else:
            heappop(givers)
        heappush(givers, (-sizes[taker], -taker))
        heapreplace(takers, (sizes[taker], taker))
        heappush(takers, (sizes[giver], giver))
    return moved
