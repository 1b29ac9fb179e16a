"""OffsetCommit, OffsetFetch, OffsetDelete and offset expiry, one rule per test."""

from __future__ import annotations

import uuid

import pytest

from broker.coordinator.classic.group import GroupState
from broker.protocol.errors import ErrorCode
from broker.protocol.generated.offset_commit import (
    RESPONSE_ENCODERS,
    OffsetCommitResponsePartition,
    OffsetCommitResponseTopic,
)
from broker.protocol.generated.offset_delete import (
    OffsetDeleteResponse,
    OffsetDeleteResponsePartition,
    OffsetDeleteResponseTopic,
)
from broker.protocol.generated.offset_fetch import (
    OffsetFetchResponse,
    OffsetFetchResponsePartition,
    OffsetFetchResponseTopic,
)

from .context import (
    CoordinatorContext,
    group_tombstone,
    offset_record,
    offset_tombstone,
    subscription,
)

FOO0 = ("foo", 0)


def codes(result) -> dict[tuple[str, int], int]:
    return {(t.name, p.partition_index): p.error_code for t in result.response.topics for p in t.partitions}


def fetched(resp) -> dict:
    """OffsetFetch v8+ as {group: (error, {(topic, partition): (offset, epoch, metadata, error)})}."""
    return {
        g.group_id: (
            g.error_code,
            {
                (t.name, p.partition_index): (
                    p.committed_offset,
                    p.committed_leader_epoch,
                    p.metadata,
                    p.error_code,
                )
                for t in g.topics
                for p in t.partitions
            },
        )
        for g in resp.groups
    }


# ---------------------------------------------------------------------- commits from members


def test_member_commit_writes_one_record_per_partition():
    c = CoordinatorContext()
    (a,) = c.stable_group("g", 1)
    t = c.now
    r = c.commit("g", {FOO0: 10, ("foo", 1): 11}, 1, a.member_id, version=8, metadata="m", leader_epoch=5)
    assert r.response.topics == [
        OffsetCommitResponseTopic(
            name="foo", partitions=[OffsetCommitResponsePartition(0, 0), OffsetCommitResponsePartition(1, 0)]
        )
    ]
    assert r.records == [
        offset_record("g", "foo", 0, 10, t, leader_epoch=5, metadata="m"),
        offset_record("g", "foo", 1, 11, t, leader_epoch=5, metadata="m"),
    ]


def test_member_commit_counts_as_a_heartbeat():
    c = CoordinatorContext()
    (a,) = c.stable_group("g", 1)
    for _ in range(3):
        c.advance(8_000)
        assert codes(c.commit("g", {FOO0: 1}, 1, a.member_id)) == {FOO0: 0}
    assert a.member_id in c.group("g").members


@pytest.mark.parametrize(
    "generation, member, error",
    [(2, "self", ErrorCode.ILLEGAL_GENERATION), (1, "ghost", ErrorCode.UNKNOWN_MEMBER_ID)],
)
def test_member_commit_generation_checks(generation, member, error):
    c = CoordinatorContext()
    (a,) = c.stable_group("g", 1)
    r = c.commit("g", {FOO0: 1}, generation, a.member_id if member == "self" else member)
    assert codes(r) == {FOO0: error} and r.records == []


def test_the_empty_group_id_commits_and_fetches_as_in_kafka():
    """Kafka still accepts "" for offset commits and fetches, for pre-0.9 clients."""
    c = CoordinatorContext()
    r = c.commit("", {FOO0: 1})
    assert codes(r) == {FOO0: 0} and len(r.records) == 1
    resp = c.fetch_groups({"": {"foo": [0]}}, version=8)
    assert fetched(resp) == {"": (0, {FOO0: (1, -1, "", 0)})}


def test_member_commit_to_an_unknown_group_is_illegal_generation():
    c = CoordinatorContext()
    r = c.commit("nope", {FOO0: 1}, 3, "m")
    assert codes(r) == {FOO0: ErrorCode.ILLEGAL_GENERATION} and "nope" not in c.state.groups


def test_member_commit_while_completing_a_rebalance_is_rebalance_in_progress():
    c = CoordinatorContext()
    (a,) = c.join_round("g", 1)
    r = c.commit("g", {FOO0: 1}, 1, a.member_id)
    assert codes(r) == {FOO0: ErrorCode.REBALANCE_IN_PROGRESS} and r.records == []


@pytest.mark.parametrize(
    "generation, member, error",
    [(0, "self", ErrorCode.ILLEGAL_GENERATION), (1, "ghost", ErrorCode.UNKNOWN_MEMBER_ID)],
)
def test_member_and_generation_are_checked_before_the_completing_rebalance_state(generation, member, error):
    """Kafka's validateOffsetCommit checks the member and the generation first and answers
    REBALANCE_IN_PROGRESS only to a current member of the current generation."""
    c = CoordinatorContext()
    (a,) = c.join_round("g", 1)
    r = c.commit("g", {FOO0: 1}, generation, a.member_id if member == "self" else member)
    assert codes(r) == {FOO0: error}, f"got {ErrorCode(codes(r)[FOO0]).name}"


def test_member_commit_while_preparing_a_rebalance_is_accepted():
    c = CoordinatorContext()
    a, b = c.stable_group("g", 2)
    c.join("g", member_id=a.member_id, client_id="c0")
    r = c.commit("g", {FOO0: 7}, 1, b.member_id)
    assert codes(r) == {FOO0: 0} and len(r.records) == 1


def test_commit_from_a_fenced_static_member_is_fenced_instance_id():
    c = CoordinatorContext()
    (a,) = c.stable_group("g", 1, instances=["ia"])
    new_id = c.join("g", instance="ia", client_id="c0")[1].response.member_id
    r = c.commit("g", {FOO0: 1}, 1, a.member_id, instance="ia", version=7)
    assert codes(r) == {FOO0: ErrorCode.FENCED_INSTANCE_ID}
    assert codes(c.commit("g", {FOO0: 1}, 1, new_id, instance="ia", version=7)) == {FOO0: 0}


# ---------------------------------------------------------------------- simple commits


def test_simple_commit_to_an_unknown_group_creates_an_empty_group():
    c = CoordinatorContext()
    r = c.commit("simple", {FOO0: 3})
    assert codes(r) == {FOO0: 0} and r.records == [offset_record("simple", "foo", 0, 3, c.now)]
    assert c.group("simple").state is GroupState.EMPTY
    assert [g.group_id for g in c.list_groups().groups] == ["simple"]


@pytest.mark.parametrize("version", [0, 1, 8])
def test_simple_commit_to_an_empty_group_is_accepted(version):
    c = CoordinatorContext()
    c.commit("simple", {FOO0: 3})
    r = c.commit("simple", {FOO0: 4}, version=version)
    assert codes(r) == {FOO0: 0} and r.records[0].value.offset == 4


def test_simple_commit_to_a_group_with_members_is_unknown_member_id():
    c = CoordinatorContext()
    c.stable_group("g", 1)
    r = c.commit("g", {FOO0: 3})
    assert codes(r) == {FOO0: ErrorCode.UNKNOWN_MEMBER_ID} and r.records == []


# ---------------------------------------------------------------------- partition checks


def test_metadata_larger_than_offset_metadata_max_bytes_is_rejected_per_partition():
    c = CoordinatorContext(offset_metadata_max_bytes=10)
    assert codes(c.commit("s", {FOO0: 1}, metadata="x" * 10)) == {FOO0: 0}
    r = c.commit("s", {FOO0: 2, ("foo", 1): 2}, metadata="x" * 11)
    assert codes(r) == {
        FOO0: ErrorCode.OFFSET_METADATA_TOO_LARGE,
        ("foo", 1): ErrorCode.OFFSET_METADATA_TOO_LARGE,
    }
    assert r.records == []
    r = c.commit("s", {("foo", 1): 2}, metadata=None)
    assert r.records[0].value.metadata == ""


def test_unknown_topic_or_partition_is_rejected_per_partition():
    c = CoordinatorContext()
    r = c.commit("s", {FOO0: 1, ("foo", 3): 1, ("nope", 0): 1})
    assert codes(r) == {
        FOO0: 0,
        ("foo", 3): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ("nope", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    }
    assert r.records == [offset_record("s", "foo", 0, 1, c.now)]


@pytest.mark.parametrize("version, stored", [(5, -1), (6, 9)])
def test_leader_epoch_is_kept_from_v6(version, stored):
    c = CoordinatorContext()
    r = c.commit("s", {FOO0: 1}, version=version, leader_epoch=9)
    assert r.records[0].value.leader_epoch == stored
    assert fetched(c.fetch_groups({"s": {"foo": [0]}}, version=8))["s"][1][FOO0] == (1, stored, "", 0)


# ---------------------------------------------------------------------- OffsetFetch v0-7


@pytest.mark.parametrize("version, epoch", [(1, -1), (4, -1), (5, 9), (7, 9)])
def test_offset_fetch_v0_to_v7_named_partitions(version, epoch):
    c = CoordinatorContext()
    c.commit("s", {FOO0: 10}, metadata="m", leader_epoch=9)
    resp = c.fetch("s", {"foo": [0, 2]}, version=version)
    assert resp == OffsetFetchResponse(
        topics=[
            OffsetFetchResponseTopic(
                "foo",
                [
                    OffsetFetchResponsePartition(0, 10, epoch, "m", 0),
                    OffsetFetchResponsePartition(2, -1, -1, "", 0),
                ],
            )
        ],
        error_code=0,
    )


@pytest.mark.parametrize("version", [2, 7])
def test_offset_fetch_v2_to_v7_null_topics_means_all(version):
    c = CoordinatorContext()
    c.commit("s", {FOO0: 10, ("bar", 1): 4})
    resp = c.fetch("s", None, version=version)
    assert resp == OffsetFetchResponse(
        topics=[
            OffsetFetchResponseTopic("bar", [OffsetFetchResponsePartition(1, 4, -1, "", 0)]),
            OffsetFetchResponseTopic("foo", [OffsetFetchResponsePartition(0, 10, -1, "", 0)]),
        ],
        error_code=0,
    )


def test_offset_fetch_of_an_unknown_group_gives_minus_one():
    c = CoordinatorContext()
    assert fetched(c.fetch_groups({"nope": {"foo": [0]}}, version=8)) == {
        "nope": (0, {FOO0: (-1, -1, "", 0)})
    }
    assert c.fetch_groups({"nope": None}, version=8).groups[0].topics == []


# ---------------------------------------------------------------------- OffsetFetch v8+


def test_offset_fetch_v8_several_groups():
    c = CoordinatorContext()
    c.commit("g1", {FOO0: 10, ("foo", 1): 11}, metadata="m1")
    c.commit("g2", {("bar", 0): 5}, leader_epoch=3)
    resp = c.fetch_groups({"g1": {"foo": [0, 2]}, "g2": None, "nope": {"foo": [0]}, "": None}, version=8)
    assert fetched(resp) == {
        "g1": (0, {FOO0: (10, -1, "m1", 0), ("foo", 2): (-1, -1, "", 0)}),
        "g2": (0, {("bar", 0): (5, 3, "", 0)}),
        "nope": (0, {FOO0: (-1, -1, "", 0)}),
        "": (0, {}),  # a group id like any other, as in Kafka
    }


def test_offset_commit_and_fetch_v10_use_topic_ids():
    c = CoordinatorContext()
    foo_id = c.topics.ids["foo"]
    r = c.commit("s", {FOO0: 10, ("nope", 0): 1}, version=10)
    assert [
        (t.name, t.topic_id, [(p.partition_index, p.error_code) for p in t.partitions])
        for t in r.response.topics
    ] == [
        ("", foo_id, [(0, 0)]),
        ("", uuid.UUID(int=7), [(0, ErrorCode.UNKNOWN_TOPIC_ID)]),
    ]
    assert r.records == [offset_record("s", "foo", 0, 10, c.now, topic_id=foo_id)]
    resp = c.fetch_groups({"s": {"foo": [0], "nope": [0]}}, version=10)
    topics = [
        (t.topic_id, [(p.partition_index, p.committed_offset, p.error_code) for p in t.partitions])
        for t in resp.groups[0].topics
    ]
    assert topics == [(foo_id, [(0, 10, 0)]), (uuid.UUID(int=7), [(0, -1, ErrorCode.UNKNOWN_TOPIC_ID)])]
    everything = c.fetch_groups({"s": None}, version=10).groups[0].topics
    assert [(t.topic_id, [p.committed_offset for p in t.partitions]) for t in everything] == [(foo_id, [10])]


# ---------------------------------------------------------------------- OffsetDelete


def test_offset_delete_of_an_unknown_group_is_group_id_not_found():
    c = CoordinatorContext()
    resp, r = c.delete_offsets("nope", {"foo": [0]})
    assert (
        resp == OffsetDeleteResponse(error_code=ErrorCode.GROUP_ID_NOT_FOUND, topics=[]) and r.records == []
    )


def test_offset_delete_in_an_empty_group_writes_tombstones():
    c = CoordinatorContext()
    c.commit("s", {FOO0: 10, ("foo", 1): 11})
    resp, r = c.delete_offsets("s", {"foo": [0, 2], "nope": [0]})
    assert resp == OffsetDeleteResponse(
        error_code=0,
        topics=[
            OffsetDeleteResponseTopic(
                "foo", [OffsetDeleteResponsePartition(0, 0), OffsetDeleteResponsePartition(2, 0)]
            ),
            OffsetDeleteResponseTopic(
                "nope", [OffsetDeleteResponsePartition(0, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)]
            ),
        ],
    )
    assert r.records == [offset_tombstone("s", "foo", 0)]
    assert fetched(c.fetch_groups({"s": None}, version=8))["s"][1] == {("foo", 1): (11, -1, "", 0)}


def test_offset_delete_refuses_topics_a_consumer_group_subscribes_to():
    c = CoordinatorContext()
    (a,) = c.stable_group("g", 1, protocols=[("range", subscription(["foo", "baz"]))])
    c.commit("g", {FOO0: 1, ("bar", 0): 2}, 1, a.member_id)
    resp, r = c.delete_offsets("g", {"foo": [0], "bar": [0]})
    assert resp == OffsetDeleteResponse(
        error_code=0,
        topics=[
            OffsetDeleteResponseTopic(
                "foo", [OffsetDeleteResponsePartition(0, ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC)]
            ),
            OffsetDeleteResponseTopic("bar", [OffsetDeleteResponsePartition(0, 0)]),
        ],
    )
    assert r.records == [offset_tombstone("g", "bar", 0)]


def test_offset_delete_in_a_non_consumer_group_with_members_is_non_empty_group():
    c = CoordinatorContext()
    c.stable_group("g", 1, protocol_type="connect")
    c.commit("g", {FOO0: 1}, version=0)  # refused (the group has members): nothing to delete either way
    resp, r = c.delete_offsets("g", {"bar": [0]})
    assert resp == OffsetDeleteResponse(error_code=ErrorCode.NON_EMPTY_GROUP, topics=[]) and r.records == []


# ---------------------------------------------------------------------- expiry


def expiry_context() -> CoordinatorContext:
    return CoordinatorContext(offsets_retention_ms=60_000, offsets_retention_check_interval_ms=10_000)


def test_offsets_of_a_simple_group_expire_after_retention_then_the_group_goes():
    c = expiry_context()
    t0 = c.now
    c.commit("s", {FOO0: 1})
    c.advance(30_000)
    c.commit("s", {("foo", 1): 2})
    start = len(c.log)
    c.advance(29_999)
    assert len(c.log) == start
    c.advance(1)  # t0 + 60 s: the check that runs then expires foo-0
    assert c.records(start) == [offset_tombstone("s", "foo", 0)] and c.now == t0 + 60_000
    c.advance(30_000)  # foo-1 expires at t0 + 90 s, and the group with it
    assert c.records(start + 1) == [offset_tombstone("s", "foo", 1), group_tombstone("s")]
    assert "s" not in c.state.groups and c.list_groups().groups == []


def test_offsets_of_a_group_expire_counting_from_when_it_became_empty():
    c = expiry_context()
    (a,) = c.stable_group("g", 1)
    c.commit("g", {FOO0: 1}, 1, a.member_id)
    for _ in range(20):  # 100 s of a live member: nothing expires
        c.advance(5_000)
        c.heartbeat("g", 1, a.member_id)
    c.leave("g", member_id=a.member_id)
    c.advance(0)
    emptied = c.now
    assert c.group("g").state is GroupState.EMPTY
    start = len(c.log)
    c.advance(59_000)
    assert c.log[start:] == []
    c.advance(10_000)
    assert c.records(start) == [offset_tombstone("g", "foo", 0), group_tombstone("g")]
    assert c.log[start].timestamp >= emptied + 60_000


def test_offsets_of_topics_a_stable_consumer_group_does_not_subscribe_to_expire():
    """Kafka (ClassicGroup#offsetExpirationCondition): in a Stable "consumer" group whose subscribed
    topics are known, offsets of the other topics expire by their commit timestamp."""
    c = expiry_context()
    (a,) = c.stable_group("g", 1)  # subscribes to foo
    c.commit("g", {FOO0: 1, ("bar", 0): 1}, 1, a.member_id)
    start = len(c.log)
    for _ in range(14):
        c.advance(5_000)
        c.heartbeat("g", 1, a.member_id)
    assert c.records(start) == [offset_tombstone("g", "bar", 0)]


def test_an_empty_group_without_offsets_is_deleted_at_the_next_expiry_check():
    """Kafka (cleanupGroupMetadata): a group with no offsets counts as "all offsets expired", so an
    Empty group without offsets is tombstoned by the next periodic check."""
    c = expiry_context()
    (a,) = c.stable_group("g", 1)
    c.leave("g", member_id=a.member_id)
    c.advance(0)
    start = len(c.log)
    c.advance(10_000)
    assert c.records(start) == [group_tombstone("g")]
    assert c.list_groups().groups == []


# ---------------------------------------------------------------------- the encoded answer


@pytest.mark.parametrize("version", range(11))
@pytest.mark.parametrize(
    "offsets_",
    [{FOO0: 5}, {("foo", p): 10 + p for p in (2, 0, 1)}, {FOO0: 1, ("bar", 1): 2, ("foo", 1): 3}],
    ids=["one", "three-of-one-topic", "two-topics"],
)
def test_an_all_committed_answer_may_come_encoded_as_the_same_bytes(version, offsets_):
    plain, fast = CoordinatorContext(), CoordinatorContext()
    for _ in range(2):  # the second time from the kept answer
        want = plain.commit("g", offsets_, version=version)
        got = fast.commit("g", offsets_, version=version, encoded=True)
        assert type(got.response) is bytes
        assert got.response == RESPONSE_ENCODERS[version](want.response)
        assert got.records == want.records
    assert fast.state.offsets["g"] == plain.state.offsets["g"]


@pytest.mark.parametrize("version", [2, 9, 10])
def test_an_answer_with_an_error_is_never_encoded(version):
    ctx = CoordinatorContext()
    result = ctx.commit("g", {FOO0: 1, ("foo", 99): 2}, version=version, encoded=True)
    assert type(result.response) is not bytes
    assert [p.error_code for t in result.response.topics for p in t.partitions] == [
        0,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    ]
    refused = ctx.commit("g", {FOO0: 1}, generation=4, member_id="nobody", version=version, encoded=True)
    assert type(refused.response) is not bytes
    assert codes(refused) == {(refused.response.topics[0].name, 0): ErrorCode.UNKNOWN_MEMBER_ID}
