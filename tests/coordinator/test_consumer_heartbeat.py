"""ConsumerGroupHeartbeat through the pure coordinator (KIP-848 case studies and validation).

A deterministic round-robin assignor is injected so each step's target is known; the real
server-side assignors are tested in test_assignors.py.
"""

from __future__ import annotations

import uuid

import pytest

from broker.coordinator import admin, offsets
from broker.coordinator.classic.group import ClassicGroup, Member
from broker.coordinator.consumer import describe as cdesc
from broker.coordinator.consumer.group import ConsumerGroupState
from broker.coordinator.consumer.reconcile import MemberState
from broker.coordinator.consumer.regex import matching
from broker.coordinator.state import ConsumerGroupConfig
from broker.protocol.errors import ErrorCode
from broker.protocol.generated.consumer_group_describe import ConsumerGroupDescribeRequest
from broker.protocol.generated.consumer_group_heartbeat import (
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatRequestTopicPartitions,
)
from broker.protocol.generated.delete_groups import DeleteGroupsRequest
from broker.protocol.generated.list_groups import ListGroupsRequest
from broker.protocol.generated.offset_commit import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from broker.protocol.generated.offset_fetch import OffsetFetchRequest, OffsetFetchRequestGroup

from .context import CoordinatorContext, TopicInfo

T = uuid.UUID(int=0xA)


def _subscribes(member, name: str) -> bool:
    regex = member.subscribed_topic_regex
    return name in member.subscribed_topic_names or bool(regex and matching(regex, [name]))


def round_robin(assignor, group, members, topics):
    """Members sorted by id take partitions in turn (deterministic)."""
    ids = sorted(members)
    out = {m: {} for m in ids}
    k = 0
    for tid, meta in sorted(topics.items()):
        subs = [m for m in ids if _subscribes(members[m], meta.name) and members[m].member_epoch != -2]
        for p in range(meta.partitions):
            if not subs:
                break
            m = subs[k % len(subs)]
            k += 1
            out[m][tid] = out[m].get(tid, frozenset()) | {p}
    return {m: {t: frozenset(ps) for t, ps in a.items()} for m, a in out.items()}


class Ctx(CoordinatorContext):
    """The coordinator test context over one topic ``t`` (id T) and the round-robin assignor."""

    def __init__(
        self, partitions: int = 6, consumer_config: ConsumerGroupConfig | None = None, **config
    ) -> None:
        super().__init__({}, 1_700_000_000_000, consumer_config, round_robin, **config)
        self.topics.registry.topics["t"] = TopicInfo(T, partitions)

    def hb(self, member_id="", epoch=0, owned=None, version=1, instance=None, subscribe=("t",), **kw):
        req = ConsumerGroupHeartbeatRequest(
            group_id=kw.pop("group", "g"),
            member_id=member_id,
            member_epoch=epoch,
            instance_id=instance,
            rebalance_timeout_ms=kw.pop("rebalance", 30000 if epoch == 0 else -1),
            subscribed_topic_names=list(subscribe) if subscribe is not None else None,
            server_assignor=kw.pop("assignor", None),
            topic_partitions=(
                [ConsumerGroupHeartbeatRequestTopicPartitions(T, sorted(owned))]
                if owned is not None
                else ([] if epoch == 0 else None)
            ),
            **kw,
        )
        return self.consumer_heartbeat(req, version)

    @property
    def group(self):
        return self.state.consumer_groups["g"]


def parts(resp) -> set[int] | None:
    if resp.assignment is None:
        return None
    return {p for tp in resp.assignment.topic_partitions for p in tp.partitions}


def test_basic_case_study_revocation_then_release():
    c = Ctx()
    a = c.hb("A")
    assert (a.error_code, a.member_id, a.member_epoch, parts(a)) == (0, "A", 1, {0, 1, 2, 3, 4, 5})
    assert c.group.state == ConsumerGroupState.STABLE
    # B joins: group epoch 2; target A={0,2,4}, B={1,3,5}
    b = c.hb("B")
    assert (b.member_epoch, parts(b)) == (2, set()), "B must wait until A releases its partitions"
    assert c.group.members["B"].progress.state == MemberState.UNRELEASED_PARTITIONS
    assert c.group.state == ConsumerGroupState.RECONCILING
    # A heartbeats at epoch 1 still owning everything: it is told to keep only its target part
    a = c.hb("A", 1, owned={0, 1, 2, 3, 4, 5})
    assert (a.member_epoch, parts(a)) == (1, {0, 2, 4})
    assert c.group.members["A"].progress.state == MemberState.UNREVOKED_PARTITIONS
    # B asks again: still held back
    b = c.hb("B", 2, owned=set())
    assert (b.member_epoch, parts(b)) == (2, None)
    # A confirms the revocation and moves to epoch 2
    a = c.hb("A", 1, owned={0, 2, 4})
    assert (a.member_epoch, a.error_code) == (2, 0)
    b = c.hb("B", 2, owned=set())
    assert (b.member_epoch, parts(b)) == (2, {1, 3, 5})
    assert c.group.state == ConsumerGroupState.STABLE
    # no partition was ever owned twice: the log's current assignments never overlap
    assert_no_double_ownership(c)


def assert_no_double_ownership(c: Ctx) -> None:
    owned: dict[str, set[int]] = {}
    for r in c.records():
        if r.type == 8:
            mid = r.key.member_id
            owned[mid] = (
                set()
                if r.value is None
                else {
                    p
                    for tp in r.value.assigned_partitions + r.value.partitions_pending_revocation
                    for p in tp.partitions
                }
            )
            flat = [p for ps in owned.values() for p in ps]
            assert len(flat) == len(set(flat)), f"a partition is owned twice: {owned}"


def test_member_failure_case_study_session_expiry_reassigns():
    c = Ctx()
    c.hb("A")
    c.hb("B")
    c.hb("A", 1, owned={0, 1, 2, 3, 4, 5})
    c.hb("A", 1, owned={0, 2, 4})
    c.hb("B", 2, owned=set())
    assert c.group.state == ConsumerGroupState.STABLE
    # B stops heartbeating: after the session timeout it is removed and the epoch bumps
    c.clock.ms += 10_000
    c.hb("A", 2, owned={0, 2, 4})
    horizon = c.clock.ms + 40_000  # past B's deadline (45 s after its last heartbeat), before A's
    c.fire_until(horizon)
    assert set(c.group.members) == {"A"}
    a = c.hb("A", 2, owned={0, 2, 4})
    assert (a.member_epoch, parts(a)) == (3, {0, 1, 2, 3, 4, 5})  # one removal, one epoch bump
    assert_no_double_ownership(c)


def test_leave_bumps_epoch_and_frees_partitions():
    c = Ctx()
    c.hb("A")
    c.hb("B")
    c.hb("A", 1, owned={0, 1, 2, 3, 4, 5})
    c.hb("A", 1, owned={0, 2, 4})
    c.hb("B", 2, owned=set())
    left = c.hb("B", -1)
    assert (left.error_code, left.member_epoch) == (0, -1)
    a = c.hb("A", 2, owned={0, 2, 4})
    assert (a.member_epoch, parts(a)) == (3, {0, 1, 2, 3, 4, 5})


def test_fenced_epoch_changes_nothing_and_unknown_member():
    c = Ctx()
    c.hb("A")
    epoch = c.group.group_epoch
    r = c.hb("A", 7, owned=set())
    assert r.error_code == ErrorCode.FENCED_MEMBER_EPOCH
    # as in Kafka 4.x a fenced heartbeat writes nothing: no rebalance for the others
    assert "A" in c.group.members and c.group.group_epoch == epoch
    # the fenced member rejoins with epoch 0 under its id and starts over
    r = c.hb("A", 0)
    assert (r.error_code, r.member_epoch) == (0, epoch + 1)
    r = c.hb("Z", 1, owned=set())
    assert r.error_code == ErrorCode.UNKNOWN_MEMBER_ID


def test_lost_response_previous_epoch_is_accepted_when_owned_is_a_subset():
    c = Ctx()
    c.hb("A")
    c.hb("B")
    c.hb("A", 1, owned={0, 1, 2, 3, 4, 5})
    c.hb("A", 1, owned={0, 2, 4})  # response (epoch 2) lost: the client still says epoch 1
    r = c.hb("A", 1, owned={0, 2, 4})
    assert (r.error_code, r.member_epoch) == (0, 2)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(group="", member_id="A"), "GroupId can't be empty."),
        (dict(member_id="", epoch=0), "MemberId can't be empty."),
        (dict(member_id="A", epoch=0, rebalance=-1), "RebalanceTimeoutMs must be provided in first request."),
        (
            dict(member_id="A", epoch=0, subscribe=None),
            "SubscribedTopicNames or SubscribedTopicRegex must be set",
        ),
        (dict(member_id="A", epoch=-2), "InstanceId can't be null."),
        (dict(member_id="A", epoch=-3), "MemberEpoch is invalid."),
        (dict(member_id="A", epoch=0, instance=""), "InstanceId can't be empty."),
    ],
)
def test_invalid_requests(kwargs, message):
    c = Ctx()
    r = c.hb(**kwargs)
    assert r.error_code == ErrorCode.INVALID_REQUEST
    assert r.error_message.startswith(message)


def test_unsupported_assignor():
    r = Ctx().hb("A", assignor="sticky-ish")
    assert r.error_code == ErrorCode.UNSUPPORTED_ASSIGNOR and "uniform" in r.error_message


def test_v0_join_gets_a_generated_member_id():
    r = Ctx().hb("", version=0)
    assert r.error_code == 0 and len(r.member_id) >= 32


def test_static_member_leaves_with_minus_two_and_takes_over_on_rejoin():
    c = Ctx()
    c.hb("A", instance="i1")
    c.hb("B")
    c.hb("A", 1, owned={0, 1, 2, 3, 4, 5}, instance="i1")
    c.hb("A", 1, owned={0, 2, 4}, instance="i1")
    c.hb("B", 2, owned=set())
    epoch_before = c.group.group_epoch
    r = c.hb("A", -2, instance="i1")
    assert (r.error_code, r.member_epoch) == (0, -2)
    # the same instance rejoins under a new member id: same epoch and assignment, no rebalance
    r = c.hb("A2", 0, instance="i1")
    assert (r.error_code, r.member_epoch, parts(r)) == (0, 2, {0, 2, 4})
    assert c.group.group_epoch == epoch_before
    assert set(c.group.members) == {"A2", "B"}
    # an active static member's instance id cannot be taken
    r = c.hb("A3", 0, instance="i1")
    assert r.error_code == ErrorCode.UNRELEASED_INSTANCE_ID


def test_partition_added_case_study_bumps_the_epoch():
    c = Ctx()
    c.hb("A")
    c.topics.registry.topics["t"] = TopicInfo(T, 8)
    r = c.hb("A", 1, owned={0, 1, 2, 3, 4, 5})
    assert (r.member_epoch, parts(r)) == (2, set(range(8)))


def test_group_max_size():
    c = Ctx()
    c.state.consumer_config = ConsumerGroupConfig(max_size=1)
    c.hb("A")
    assert c.hb("B").error_code == ErrorCode.GROUP_MAX_SIZE_REACHED


def test_restart_replays_to_the_same_group():
    c = Ctx()
    c.hb("A")
    c.hb("B")
    c.hb("A", 1, owned={0, 1, 2, 3, 4, 5})
    again = c.restarted()
    g, h = c.group, again.group
    assert (g.group_epoch, g.assignment_epoch, g.target, g.topics) == (
        h.group_epoch,
        h.assignment_epoch,
        h.target,
        h.topics,
    )
    assert {m: x.progress for m, x in g.members.items()} == {m: x.progress for m, x in h.members.items()}
    # members carry on at their epochs after the restart
    r = again.hb("A", 1, owned={0, 2, 4})
    assert (r.error_code, r.member_epoch) == (0, 2)


def test_classic_group_with_members_is_not_a_consumer_group():
    c = Ctx()
    g = ClassicGroup("g")
    g.add(Member("m", None, "c", "/h", 1000, 10000, "consumer", [("range", b"")]))
    c.state.groups["g"] = g
    assert c.hb("A").error_code == ErrorCode.GROUP_ID_NOT_FOUND


# ---------------------------------------------------------------------- offsets and admin


def _commit(c: Ctx, member_id: str, epoch: int, version: int = 9) -> int:
    req = OffsetCommitRequest(
        group_id="g",
        generation_id_or_member_epoch=epoch,
        member_id=member_id,
        topics=[
            OffsetCommitRequestTopic(
                "t", partitions=[OffsetCommitRequestPartition(0, 5, committed_metadata="")]
            )
        ],
    )
    return (
        c.run(lambda now: offsets.commit(c.state, req, version, now))
        .response.topics[0]
        .partitions[0]
        .error_code
    )


def _fetch(c: Ctx, member_id, epoch) -> tuple[int, list]:
    req = OffsetFetchRequest(groups=[OffsetFetchRequestGroup("g", member_id, epoch, None)])
    g = offsets.fetch(c.state, req, 9).groups[0]
    return g.error_code, [(p.partition_index, p.committed_offset) for t in g.topics for p in t.partitions]


def test_offset_commit_and_fetch_check_member_epochs():
    c = Ctx()
    c.hb("A")
    assert _commit(c, "A", 1) == 0
    assert _commit(c, "A", 0) == ErrorCode.STALE_MEMBER_EPOCH
    # as Kafka: a consumer-protocol member must commit with v9+ (classic members: test_migration)
    assert _commit(c, "A", 1, version=8) == ErrorCode.UNSUPPORTED_VERSION
    assert _commit(c, "nobody", 1) == ErrorCode.UNKNOWN_MEMBER_ID
    assert _commit(c, "", -1) == ErrorCode.UNKNOWN_MEMBER_ID, "admin commits only while the group is empty"
    assert _fetch(c, "A", 1) == (0, [(0, 5)])
    assert _fetch(c, "A", 3)[0] == ErrorCode.STALE_MEMBER_EPOCH
    assert _fetch(c, None, -1) == (0, [(0, 5)]), "an admin fetch needs no member"
    c.hb("A", -1)
    assert _commit(c, "", -1) == 0


def test_list_delete_and_describe_consumer_groups():
    c = Ctx()
    c.hb("A")
    c.hb("B")
    listed = admin.list_groups(c.state, ListGroupsRequest(types_filter=["Consumer"]), 5).groups
    assert [(g.group_id, g.protocol_type, g.group_type, g.group_state) for g in listed] == [
        ("g", "consumer", "consumer", "Reconciling")
    ]
    assert admin.list_groups(c.state, ListGroupsRequest(types_filter=["classic"]), 5).groups == []
    d = cdesc.describe(c.state, ConsumerGroupDescribeRequest(["g", "nope"]), 1, -(2**31)).groups
    assert (d[0].error_code, d[0].group_epoch, d[0].assignment_epoch, d[0].assignor_name) == (
        0,
        2,
        2,
        "uniform",
    )
    assert {m.member_id: m.member_epoch for m in d[0].members} == {"A": 1, "B": 2}
    assert sorted(p for tp in d[0].members[1].target_assignment.topic_partitions for p in tp.partitions) == [
        1,
        3,
        5,
    ]
    assert d[1].error_code == ErrorCode.GROUP_ID_NOT_FOUND
    _commit(c, "A", 1)
    res = c.run(lambda now: admin.delete_groups(c.state, DeleteGroupsRequest(["g"])))
    assert res.response.results[0].error_code == ErrorCode.NON_EMPTY_GROUP
    c.hb("A", -1)
    c.hb("B", -1)
    res = c.run(lambda now: admin.delete_groups(c.state, DeleteGroupsRequest(["g"])))
    assert res.response.results[0].error_code == 0
    assert "g" not in c.state.consumer_groups and "g" not in c.state.offsets
    assert "g" not in c.restarted().state.consumer_groups


def test_regex_subscription_matches_topics_and_new_ones_bump_the_epoch():
    c = Ctx()
    c.topics.registry.topics = {"orders-eu": TopicInfo(T, 2), "other": TopicInfo(uuid.UUID(int=0xB), 2)}
    r = c.hb("A", subscribe=[], subscribed_topic_regex="orders-.*")
    assert (r.error_code, parts(r)) == (0, {0, 1})
    assert {m.name for m in c.group.topics.values()} == {"orders-eu"}
    c.topics.registry.topics["orders-us"] = TopicInfo(uuid.UUID(int=0xC), 1)
    epoch = c.group.group_epoch
    r = c.hb("A", r.member_epoch, owned={0, 1}, subscribe=None)
    assert c.group.group_epoch == epoch + 1
    assert {m.name for m in c.group.topics.values()} == {"orders-eu", "orders-us"}


def test_invalid_regex_is_refused():
    r = Ctx().hb("A", subscribe=[], subscribed_topic_regex="(?<=a)b")
    assert r.error_code == ErrorCode.INVALID_REGULAR_EXPRESSION
    assert "not a valid regular expression" in r.error_message
