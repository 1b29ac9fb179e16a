"""Server-side assignors (broker/coordinator/assignors): validity, balance, stickiness, range
co-partitioning, determinism and edge cases, mostly as hypothesis properties."""

from __future__ import annotations

import uuid
from collections import defaultdict

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker.coordinator.assignors import (
    ASSIGNORS,
    DEFAULT_ASSIGNORS,
    AssignorError,
    MemberSpec,
    TopicInfo,
    assign,
)
from broker.coordinator.assignors.range import RangeAssignor, assign_range
from broker.coordinator.assignors.uniform import UniformAssignor, assign_uniform

TOPIC_IDS = [uuid.UUID(int=(i + 1) * 0x9E3779B97F4A7C15F39CC0605CEDC835 % (1 << 128)) for i in range(6)]
MISSING = uuid.UUID(int=0xDEAD)  # subscribed to, but not in the metadata

PROPS = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
FEW = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# ---------------------------------------------------------------------------------------------
# Helpers


def effective(members, topics):
    return {m: frozenset(t for t in spec.subscribed_topic_ids if t in topics) for m, spec in members.items()}


def sizes_of(result):
    return {m: sum(map(len, d.values())) for m, d in result.items()}


def total_partitions(members, topics):
    subscribed = set().union(*effective(members, topics).values()) if members else set()
    return sum(topics[t].num_partitions for t in subscribed)


def check_valid(result, members, topics):
    """Every member present; every partition of a subscribed, existing topic assigned exactly once,
    to a subscriber of the topic; nothing else assigned; no empty sets."""
    assert set(result) == set(members)
    subs = effective(members, topics)
    owners = defaultdict(list)
    for m, assignment in result.items():
        assert isinstance(assignment, dict)
        for t, parts in assignment.items():
            assert type(parts) is frozenset and parts, (m, t, parts)
            assert t in subs[m], f"{m} got unsubscribed or missing topic {t}"
            for p in parts:
                assert type(p) is int and 0 <= p < topics[t].num_partitions
                owners[(t, p)].append(m)
    expected = {(t, p) for s in subs.values() for t in s for p in range(topics[t].num_partitions)}
    assert set(owners) == expected
    assert all(len(v) == 1 for v in owners.values()), {k: v for k, v in owners.items() if len(v) > 1}


def check_local_balance(result, members, topics):
    """No partition could move to a subscriber of its topic having two or more partitions fewer
    than its member. Implies: members with the same subscription are within one of each other."""
    sizes = sizes_of(result)
    subs = effective(members, topics)
    for t in topics:
        subscribers = [m for m in members if t in subs[m]]
        if not subscribers:
            continue
        low = min(sizes[m] for m in subscribers)
        for m in subscribers:
            if result[m].get(t):
                assert sizes[m] <= low + 1, (t, m, sizes)
    by_subscription = defaultdict(list)
    for m, s in subs.items():
        by_subscription[s].append(sizes[m])
    for s, group_sizes in by_subscription.items():
        if s:
            assert max(group_sizes) - min(group_sizes) <= 1, (s, group_sizes)


def with_current(members, result):
    """The members again, each carrying ``result`` as its current target assignment."""
    return {
        m: MemberSpec(spec.rack_id, spec.subscribed_topic_ids, result.get(m, {}), spec.instance_id)
        for m, spec in members.items()
    }


def valid_current(members, topics):
    """The current partitions each member may keep: subscribed, existing, first claim wins (member id order)."""
    subs = effective(members, topics)
    claimed = defaultdict(set)
    out = {}
    for m in sorted(members):
        mine = {}
        for t, parts in members[m].assignment.items():
            if t not in subs[m]:
                continue
            ok = {p for p in parts if 0 <= p < topics[t].num_partitions} - claimed[t]
            claimed[t] |= ok
            if ok:
                mine[t] = ok
        out[m] = mine
    return out


def kept_count(result, valid):
    return sum(len(result[m].get(t, frozenset()) & parts) for m, d in valid.items() for t, parts in d.items())


def moved_count(before, after):
    """Partitions whose owner changed (or which had none) between two results."""
    owner = {(t, p): m for m, d in before.items() for t, ps in d.items() for p in ps}
    return sum(1 for m, d in after.items() for t, ps in d.items() for p in ps if owner.get((t, p)) != m)


def range_oracle(members, topics):
    """Kafka's range assignment, written plainly."""
    order = sorted(
        members,
        key=lambda m: (0, members[m].instance_id, m) if members[m].instance_id is not None else (1, "", m),
    )
    out = {m: {} for m in members}
    for t, info in topics.items():
        subscribers = [m for m in order if t in members[m].subscribed_topic_ids]
        if not subscribers:
            continue
        base, extra = divmod(info.num_partitions, len(subscribers))
        start = 0
        for k, m in enumerate(subscribers):
            size = base + (1 if k < extra else 0)
            if size:
                out[m][t] = frozenset(range(start, start + size))
            start += size
    return out


# ---------------------------------------------------------------------------------------------
# Strategies

member_names = st.lists(st.text(alphabet="abcdefgh", min_size=1, max_size=3), unique=True, max_size=8)


@st.composite
def groups(draw, homogeneous=None, current=True, max_partitions=12):
    n_topics = draw(st.integers(0, len(TOPIC_IDS)))
    topic_ids = TOPIC_IDS[:n_topics]
    topics = {
        t: TopicInfo(f"topic-{i}", draw(st.integers(0, max_partitions))) for i, t in enumerate(topic_ids)
    }
    universe = [*topic_ids, MISSING]
    names = draw(member_names)
    homo = draw(st.booleans()) if homogeneous is None else homogeneous
    shared = frozenset(draw(st.sets(st.sampled_from(universe))))
    members = {}
    for name in names:
        subscription = shared if homo else frozenset(draw(st.sets(st.sampled_from(universe))))
        assignment = {}
        if current:
            for t in draw(st.sets(st.sampled_from(universe), max_size=4)):
                assignment[t] = frozenset(draw(st.sets(st.integers(-1, max_partitions + 2), max_size=6)))
        members[name] = MemberSpec(
            rack_id=draw(st.none() | st.sampled_from(["rack-a", "rack-b"])),
            subscribed_topic_ids=subscription,
            assignment=assignment,
            instance_id=draw(st.none() | st.sampled_from(["i1", "i2", "i3", "i4"])),
        )
    return members, topics


def homogeneous_members(names, subscription):
    return {m: MemberSpec(subscribed_topic_ids=subscription) for m in names}


# ---------------------------------------------------------------------------------------------
# Registry and interface


def test_registry():
    assert DEFAULT_ASSIGNORS == ["uniform", "range"]
    assert set(ASSIGNORS) == {"uniform", "range"}
    assert isinstance(ASSIGNORS["uniform"], UniformAssignor)
    assert isinstance(ASSIGNORS["range"], RangeAssignor)
    for name, assignor in ASSIGNORS.items():
        assert assignor.name == name
    t = TOPIC_IDS[0]
    members = {"a": MemberSpec(subscribed_topic_ids=frozenset({t}))}
    topics = {t: TopicInfo("t", 2)}
    expected = {"a": {t: frozenset({0, 1})}}
    for name in DEFAULT_ASSIGNORS:
        assert ASSIGNORS[name](members, topics) == expected
        assert ASSIGNORS[name].assign(members, topics) == expected
        assert assign(name, members, topics) == expected
    with pytest.raises(KeyError):
        assign("cooperative-sticky", members, topics)
    assert MemberSpec().current_assignment == {}


@pytest.mark.parametrize("fn", [assign_uniform, assign_range])
def test_invalid_input_raises(fn):
    t = TOPIC_IDS[0]
    members = {"a": MemberSpec(subscribed_topic_ids=frozenset({t}))}
    with pytest.raises(AssignorError):
        fn(members, {t: TopicInfo("t", -1)})
    with pytest.raises(AssignorError):
        fn({"a": {"subscribed_topic_ids": {t}}}, {t: TopicInfo("t", 1)})


# ---------------------------------------------------------------------------------------------
# Edge cases


@pytest.mark.parametrize("fn", [assign_uniform, assign_range])
def test_edge_cases(fn):
    t0, t1 = TOPIC_IDS[:2]
    assert fn({}, {}) == {}
    assert fn({}, {t0: TopicInfo("t0", 3)}) == {}
    # Members but no topics / no subscriptions.
    assert fn({"a": MemberSpec(), "b": MemberSpec()}, {}) == {"a": {}, "b": {}}
    assert fn({"a": MemberSpec()}, {t0: TopicInfo("t0", 3)}) == {"a": {}}
    # Only topics with zero partitions.
    zero = {t0: TopicInfo("t0", 0)}
    both = frozenset({t0})
    assert fn({"a": MemberSpec(subscribed_topic_ids=both)}, zero) == {"a": {}}
    # A subscribed topic missing from the metadata is ignored (also for homogeneity).
    members = {
        "a": MemberSpec(subscribed_topic_ids=frozenset({t0, MISSING})),
        "b": MemberSpec(subscribed_topic_ids=frozenset({t0})),
    }
    result = fn(members, {t0: TopicInfo("t0", 4)})
    assert result == {"a": {t0: frozenset({0, 1})}, "b": {t0: frozenset({2, 3})}}
    # More members than partitions: some members get nothing.
    members = homogeneous_members([f"m{i}" for i in range(7)], frozenset({t0, t1}))
    topics = {t0: TopicInfo("t0", 2), t1: TopicInfo("t1", 1)}
    result = fn(members, topics)
    check_valid(result, members, topics)
    if fn is assign_uniform:
        assert sorted(sizes_of(result).values()) == [0, 0, 0, 0, 1, 1, 1]


def test_range_more_members_than_partitions_goes_to_first_members():
    t0, t1 = TOPIC_IDS[:2]
    members = homogeneous_members(["a", "b", "c", "d"], frozenset({t0, t1}))
    result = assign_range(members, {t0: TopicInfo("t0", 2), t1: TopicInfo("t1", 3)})
    assert result == {
        "a": {t0: frozenset({0}), t1: frozenset({0})},
        "b": {t0: frozenset({1}), t1: frozenset({1})},
        "c": {t1: frozenset({2})},
        "d": {},
    }


def test_uniform_homogeneous_example():
    t0, t1 = TOPIC_IDS[:2]
    topics = {t0: TopicInfo("t0", 3), t1: TopicInfo("t1", 4)}
    members = homogeneous_members(["m1", "m2", "m3"], frozenset(topics))
    result = assign_uniform(members, topics)
    check_valid(result, members, topics)
    # Quotas 3, 2, 2 in member id order, filled with consecutive runs of the partitions taken in
    # topic id order.
    first, second = sorted(topics, key=lambda t: t.int)
    runs = [(first, p) for p in range(topics[first].num_partitions)]
    runs += [(second, p) for p in range(topics[second].num_partitions)]
    expected = {}
    for m, (lo, hi) in zip(["m1", "m2", "m3"], [(0, 3), (3, 5), (5, 7)], strict=True):
        expected[m] = {}
        for t, p in runs[lo:hi]:
            expected[m][t] = expected[m].get(t, frozenset()) | {p}
    assert result == expected


def test_uniform_heterogeneous_example():
    t1, t2, t3 = TOPIC_IDS[:3]
    topics = {t1: TopicInfo("t1", 6), t2: TopicInfo("t2", 6), t3: TopicInfo("t3", 2)}
    members = {
        "a": MemberSpec(subscribed_topic_ids=frozenset({t1})),
        "b": MemberSpec(subscribed_topic_ids=frozenset({t1, t2})),
        "c": MemberSpec(subscribed_topic_ids=frozenset({t2, t3})),
    }
    result = assign_uniform(members, topics)
    check_valid(result, members, topics)
    check_local_balance(result, members, topics)
    assert sorted(sizes_of(result).values()) == [4, 5, 5]
    # Stable: fed back, nothing changes.
    assert assign_uniform(with_current(members, result), topics) == result
    # c leaves: t3 has no subscriber left, b takes c's t2 partitions and then, to balance, gives
    # its t1 partition to a.
    rest = with_current({m: spec for m, spec in members.items() if m != "c"}, result)
    after = assign_uniform(rest, topics)
    assert after == {"a": {t1: frozenset(range(6))}, "b": {t2: frozenset(range(6))}}


def test_uniform_drops_unsubscribed_and_invalid_current_partitions():
    t0, t1 = TOPIC_IDS[:2]
    topics = {t0: TopicInfo("t0", 4), t1: TopicInfo("t1", 2)}
    sub = frozenset({t0})
    members = {
        "a": MemberSpec(subscribed_topic_ids=sub, assignment={t0: frozenset({0, 1, 9}), t1: frozenset({0})}),
        "b": MemberSpec(
            subscribed_topic_ids=sub, assignment={t0: frozenset({1, 2}), MISSING: frozenset({0})}
        ),
    }
    result = assign_uniform(members, topics)
    check_valid(result, members, topics)
    # a keeps 0 and 1 (9 does not exist, t1 is no longer subscribed); 1 is a's, so b keeps 2.
    assert result == {"a": {t0: frozenset({0, 1})}, "b": {t0: frozenset({2, 3})}}


def test_uniform_large_group_is_valid_and_balanced():
    topic_ids = [uuid.UUID(int=i + 1) for i in range(200)]
    topics = {t: TopicInfo(f"t{i}", 1 + i % 7) for i, t in enumerate(topic_ids)}
    members = homogeneous_members([f"m{i:04d}" for i in range(300)], frozenset(topic_ids))
    result = assign_uniform(members, topics)
    check_valid(result, members, topics)
    sizes = sizes_of(result).values()
    assert max(sizes) - min(sizes) <= 1
    del members["m0150"]
    again = assign_uniform(with_current(members, result), topics)
    check_valid(again, members, topics)
    assert moved_count(result, again) == sum(map(len, result["m0150"].values()))


# ---------------------------------------------------------------------------------------------
# Properties: validity


@PROPS
@given(groups())
def test_uniform_valid(group):
    members, topics = group
    check_valid(assign_uniform(members, topics), members, topics)


@PROPS
@given(groups())
def test_range_valid(group):
    members, topics = group
    check_valid(assign_range(members, topics), members, topics)


# ---------------------------------------------------------------------------------------------
# Properties: uniform balance


@PROPS
@given(groups(homogeneous=True))
def test_uniform_homogeneous_within_one(group):
    members, topics = group
    result = assign_uniform(members, topics)
    sizes = list(sizes_of(result).values())
    if sizes:
        assert max(sizes) - min(sizes) <= 1
        total = total_partitions(members, topics)
        assert sum(sizes) == total


@PROPS
@given(groups(homogeneous=False))
def test_uniform_heterogeneous_balanced_as_subscriptions_allow(group):
    members, topics = group
    result = assign_uniform(members, topics)
    check_valid(result, members, topics)
    check_local_balance(result, members, topics)


# ---------------------------------------------------------------------------------------------
# Properties: uniform stickiness


@PROPS
@given(groups(homogeneous=True))
def test_uniform_homogeneous_keeps_as_much_as_balance_allows(group):
    """With quotas P // M (+1 for P % M members), a member can keep at most its quota of its valid
    current partitions; the assignor keeps exactly the most any balanced assignment could."""
    members, topics = group
    result = assign_uniform(members, topics)
    if not members:
        return
    valid = valid_current(members, topics)
    total = total_partitions(members, topics)
    base, extra = divmod(total, len(members))
    valid_sizes = [sum(map(len, d.values())) for d in valid.values()]
    best = sum(min(v, base) for v in valid_sizes) + min(extra, sum(1 for v in valid_sizes if v > base))
    assert kept_count(result, valid) == best


@PROPS
@given(groups(homogeneous=True, current=False), st.text(alphabet="abcdefgh", min_size=1, max_size=3))
def test_uniform_homogeneous_join_moves_only_to_the_new_member(group, newcomer):
    """One member joins a balanced group: the old members only give partitions up, all of them to
    the newcomer, which gets exactly P // (M + 1) partitions (the least any balanced assignment
    moves)."""
    members, topics = group
    if not members or newcomer in members:
        return
    before = assign_uniform(members, topics)
    subscription = next(iter(members.values())).subscribed_topic_ids
    grown = with_current(members, before)
    grown[newcomer] = MemberSpec(subscribed_topic_ids=subscription)
    after = assign_uniform(grown, topics)
    check_valid(after, grown, topics)
    for m in members:
        for t, parts in after[m].items():
            assert parts <= before[m].get(t, frozenset()), (m, t)
    total = total_partitions(members, topics)
    new_size = sum(map(len, after[newcomer].values()))
    assert new_size == total // (len(members) + 1)
    assert moved_count(before, after) == new_size


@PROPS
@given(groups(homogeneous=True, current=False), st.data())
def test_uniform_homogeneous_leave_moves_only_the_leavers_partitions(group, data):
    members, topics = group
    if len(members) < 2:
        return
    before = assign_uniform(members, topics)
    leaver = data.draw(st.sampled_from(sorted(members)))
    rest = with_current({m: s for m, s in members.items() if m != leaver}, before)
    after = assign_uniform(rest, topics)
    check_valid(after, rest, topics)
    for m in rest:
        for t, parts in before[m].items():
            assert parts <= after[m].get(t, frozenset()), (m, t)
    assert moved_count(before, after) == sum(map(len, before[leaver].values()))


@PROPS
@given(groups())
def test_uniform_stable_assignment_is_a_fixpoint(group):
    """Feeding the result back as the current assignment changes nothing (both paths)."""
    members, topics = group
    first = assign_uniform(members, topics)
    again = assign_uniform(with_current(members, first), topics)
    assert again == first


@FEW
@given(groups(homogeneous=False, current=False), st.data())
def test_uniform_heterogeneous_membership_changes_stay_valid_and_balanced(group, data):
    """Heterogeneous: after a member joins or leaves, still valid and balanced as far as the
    subscriptions allow. (Balancing may then move more than the leaver's or joiner's share: balance
    comes before stickiness, as in Kafka; the moves are minimal only for homogeneous groups.)"""
    members, topics = group
    before = assign_uniform(members, topics)
    changed = with_current(members, before)
    if members and data.draw(st.booleans()):
        del changed[data.draw(st.sampled_from(sorted(members)))]
    else:
        name = data.draw(st.text(alphabet="xyz", min_size=1, max_size=2))
        subscription = frozenset(data.draw(st.sets(st.sampled_from([*topics, MISSING]))))
        changed[name] = MemberSpec(subscribed_topic_ids=subscription)
    after = assign_uniform(changed, topics)
    check_valid(after, changed, topics)
    check_local_balance(after, changed, topics)


# ---------------------------------------------------------------------------------------------
# Properties: range


@PROPS
@given(groups())
def test_range_matches_kafka_range(group):
    """Per topic, consecutive ranges over its subscribers (static members by instance id first, then
    member id), P // N each and one more for the first P % N; the current assignment is ignored."""
    members, topics = group
    assert assign_range(members, topics) == range_oracle(members, topics)


@PROPS
@given(groups())
def test_range_co_partitions(group):
    members, topics = group
    result = assign_range(members, topics)
    subs = effective(members, topics)
    subscribers = {t: frozenset(m for m in members if t in subs[m]) for t in topics}
    for t1 in topics:
        for t2 in topics:
            if t1 == t2 or not subscribers[t1]:
                continue
            if subscribers[t1] == subscribers[t2] and topics[t1].num_partitions == topics[t2].num_partitions:
                for m in subscribers[t1]:
                    assert result[m].get(t1) == result[m].get(t2)
    # Each member's partitions of a topic are one consecutive range; per topic sizes within one.
    for t in topics:
        got = [result[m].get(t, frozenset()) for m in subscribers[t]]
        for parts in got:
            if parts:
                assert max(parts) - min(parts) + 1 == len(parts)
        if got:
            assert max(map(len, got)) - min(map(len, got)) <= 1


def test_range_static_members_first():
    t0 = TOPIC_IDS[0]
    topics = {t0: TopicInfo("t0", 5)}
    sub = frozenset({t0})
    members = {
        "a": MemberSpec(subscribed_topic_ids=sub),
        "b": MemberSpec(subscribed_topic_ids=sub, instance_id="z"),
        "c": MemberSpec(subscribed_topic_ids=sub, instance_id="y"),
    }
    assert assign_range(members, topics) == {
        "c": {t0: frozenset({0, 1})},
        "b": {t0: frozenset({2, 3})},
        "a": {t0: frozenset({4})},
    }


def test_range_is_not_sticky():
    """Like Kafka since KAFKA-16944: the ranges are recomputed, the current assignment is ignored."""
    t0 = TOPIC_IDS[0]
    topics = {t0: TopicInfo("t0", 4)}
    sub = frozenset({t0})
    members = {
        "a": MemberSpec(subscribed_topic_ids=sub, assignment={t0: frozenset({2, 3})}),
        "b": MemberSpec(subscribed_topic_ids=sub, assignment={t0: frozenset({0, 1})}),
    }
    assert assign_range(members, topics) == {"a": {t0: frozenset({0, 1})}, "b": {t0: frozenset({2, 3})}}


# ---------------------------------------------------------------------------------------------
# Properties: determinism


def scrambled(members, topics):
    """The same input with every dict and set rebuilt in reverse order and fresh topic id objects."""
    fresh = {t: uuid.UUID(int=t.int) for t in [*TOPIC_IDS, MISSING]}
    new_topics = {fresh[t]: TopicInfo(info.name, info.num_partitions) for t, info in reversed(topics.items())}
    new_members = {}
    for m, spec in reversed(members.items()):
        new_members[m] = MemberSpec(
            spec.rack_id,
            frozenset(fresh[t] for t in reversed(sorted(spec.subscribed_topic_ids, key=lambda t: t.int))),
            {fresh[t]: frozenset(sorted(p, reverse=True)) for t, p in reversed(spec.assignment.items())},
            spec.instance_id,
        )
    return new_members, new_topics


@PROPS
@given(groups())
def test_deterministic(group):
    members, topics = group
    for fn in (assign_uniform, assign_range):
        first = fn(members, topics)
        assert fn(members, topics) == first
        assert fn(*scrambled(members, topics)) == first
