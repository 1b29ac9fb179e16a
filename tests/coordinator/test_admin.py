"""DescribeGroups, ListGroups and DeleteGroups, one rule per test."""

from __future__ import annotations

import pytest

from broker.protocol.errors import ErrorCode
from broker.protocol.generated.delete_groups import DeletableGroupResult, DeleteGroupsResponse
from broker.protocol.generated.describe_groups import DescribedGroup, DescribedGroupMember
from broker.protocol.generated.list_groups import ListedGroup

from .context import (
    CLIENT_HOST,
    PROTOCOLS,
    CoordinatorContext,
    group_tombstone,
    offset_tombstone,
    persisted_view,
)

SUB = PROTOCOLS[0][1]


def client_of(member_id: str) -> str:
    return member_id.split("-", 1)[0]


# ---------------------------------------------------------------------- DescribeGroups


def test_describe_a_stable_group_shows_metadata_and_assignments():
    c = CoordinatorContext()
    a, b = c.stable_group("g", 2, instances=[None, "ib"])
    (d,) = c.describe(["g"], version=5, ops=123).groups
    assert d == DescribedGroup(
        error_code=0,
        error_message=None,
        group_id="g",
        group_state="Stable",
        protocol_type="consumer",
        protocol_data="range",
        members=[
            DescribedGroupMember(a.member_id, None, "c0", CLIENT_HOST, SUB, a.assignment),
            DescribedGroupMember(b.member_id, "ib", "c1", CLIENT_HOST, SUB, b.assignment),
        ],
        authorized_operations=123,
    )


def test_describe_a_rebalancing_group_hides_metadata_and_assignments():
    c = CoordinatorContext()
    a, b = c.stable_group("g", 2)
    before = {m.member_id: m.member_assignment for m in c.describe(["g"]).groups[0].members}
    assert all(before.values())
    c.join("g", member_id=a.member_id, client_id="c0")
    (d,) = c.describe(["g"]).groups
    assert (d.group_state, d.protocol_type, d.protocol_data) == ("PreparingRebalance", "consumer", "")
    # no metadata, but the last assignment (as Kafka 4.3 answers; tests/differential/test_groups.py)
    assert [(m.member_id, m.member_metadata, m.member_assignment) for m in d.members] == [
        (a.member_id, b"", before[a.member_id]),
        (b.member_id, b"", before[b.member_id]),
    ]
    c.join("g", member_id=b.member_id, client_id="c1")
    (d,) = c.describe(["g"]).groups
    assert (d.group_state, d.protocol_data) == ("CompletingRebalance", "")
    assert all(m.member_metadata == m.member_assignment == b"" for m in d.members)


def test_describe_an_empty_group():
    c = CoordinatorContext()
    c.commit("s", {("foo", 0): 1})
    (d,) = c.describe(["s"]).groups
    assert (d.error_code, d.group_state, d.protocol_type, d.protocol_data, d.members) == (
        0,
        "Empty",
        "",
        "",
        [],
    )


@pytest.mark.parametrize("version", [0, 5])
def test_describe_an_unknown_group_before_v6_is_dead(version):
    c = CoordinatorContext()
    (d,) = c.describe(["nope"], version=version).groups
    assert (d.error_code, d.group_id, d.group_state, d.members) == (0, "nope", "Dead", [])


def test_describe_an_unknown_group_v6_is_group_id_not_found():
    c = CoordinatorContext()
    (d,) = c.describe(["nope"], version=6).groups
    assert (d.error_code, d.group_id, d.members) == (ErrorCode.GROUP_ID_NOT_FOUND, "nope", [])


def test_the_empty_group_id_is_described_like_any_other_group():
    """Kafka keeps DescribeGroups (and commits and fetches) working for "" (pre-0.9 clients)."""
    c = CoordinatorContext()
    (unknown,) = c.describe([""], version=6).groups
    assert (unknown.error_code, unknown.group_id) == (ErrorCode.GROUP_ID_NOT_FOUND, "")
    c.commit("", {("foo", 0): 4})
    (d,) = c.describe([""], version=6).groups
    assert (d.error_code, d.group_id, d.group_state, d.members) == (0, "", "Empty", [])


def test_describe_keeps_the_protocol_type_of_a_group_whose_members_left():
    """Kafka's initNextGeneration keeps protocolType when the group becomes Empty (only the protocol
    name is cleared), and the Empty GroupMetadata record carries it."""
    c = CoordinatorContext()
    (a,) = c.stable_group("g", 1)
    c.leave("g", member_id=a.member_id)
    c.advance(0)
    (d,) = c.describe(["g"]).groups
    assert (d.group_state, d.protocol_data, d.members) == ("Empty", "", [])
    assert d.protocol_type == "consumer"
    assert c.records()[-1].value.protocol_type == "consumer"


# ---------------------------------------------------------------------- ListGroups


def three_groups() -> CoordinatorContext:
    c = CoordinatorContext()
    c.stable_group("a-stable", 1)
    c.commit("b-empty", {("foo", 0): 1})
    c.join("c-preparing", version=3)  # waits for the initial delay
    return c


def test_list_groups_lists_every_group_with_type_and_state():
    c = three_groups()
    assert c.list_groups(version=5).groups == [
        ListedGroup("a-stable", "consumer", "Stable", "classic"),
        ListedGroup("b-empty", "", "Empty", "classic"),
        ListedGroup("c-preparing", "consumer", "PreparingRebalance", "classic"),
    ]


def test_list_groups_v4_states_filter_is_case_insensitive():
    c = three_groups()
    listed = c.list_groups(states=["stable", "EMPTY"], version=4).groups
    assert [(g.group_id, g.group_state) for g in listed] == [("a-stable", "Stable"), ("b-empty", "Empty")]
    assert [g.group_id for g in c.list_groups(states=["Dead"], version=4).groups] == []


def test_list_groups_ignores_filters_below_their_version():
    c = three_groups()
    assert len(c.list_groups(states=["stable"], types=["consumer"], version=3).groups) == 3
    assert len(c.list_groups(types=["consumer"], version=4).groups) == 3


def test_list_groups_v5_types_filter():
    c = three_groups()
    assert len(c.list_groups(types=["Classic"], version=5).groups) == 3
    assert c.list_groups(types=["consumer"], version=5).groups == []
    assert len(c.list_groups(types=["consumer", "classic"], states=["stable"], version=5).groups) == 1


# ---------------------------------------------------------------------- DeleteGroups


def test_delete_groups_outcomes_and_tombstones():
    c = three_groups()
    c.commit("b-empty", {("foo", 1): 2, ("bar", 0): 3})
    start = len(c.log)
    resp, r = c.delete_groups(["a-stable", "b-empty", "c-preparing", "nope", ""])
    assert resp == DeleteGroupsResponse(
        results=[
            DeletableGroupResult("a-stable", ErrorCode.NON_EMPTY_GROUP),
            DeletableGroupResult("b-empty", 0),
            DeletableGroupResult("c-preparing", ErrorCode.NON_EMPTY_GROUP),
            DeletableGroupResult("nope", ErrorCode.GROUP_ID_NOT_FOUND),
            DeletableGroupResult("", ErrorCode.GROUP_ID_NOT_FOUND),  # "" is a group id like any other
        ]
    )
    assert (
        r.records
        == c.records(start)
        == [
            offset_tombstone("b-empty", "foo", 0),
            offset_tombstone("b-empty", "foo", 1),
            offset_tombstone("b-empty", "bar", 0),
            group_tombstone("b-empty"),
        ]
    )
    assert "b-empty" not in c.state.groups and "b-empty" not in c.state.offsets
    fetched = c.fetch_groups({"b-empty": {"foo": [0]}}, version=8).groups[0].topics[0].partitions[0]
    assert fetched.committed_offset == -1
    assert persisted_view(c.replayed_state())["offsets"] == {}


def test_delete_a_group_whose_members_left():
    c = CoordinatorContext()
    (a,) = c.stable_group("g", 1)
    c.commit("g", {("foo", 0): 1}, 1, a.member_id)
    c.leave("g", member_id=a.member_id)
    c.advance(0)
    resp, r = c.delete_groups(["g"])
    assert resp.results == [DeletableGroupResult("g", 0)]
    assert r.records == [offset_tombstone("g", "foo", 0), group_tombstone("g")]
    assert c.describe(["g"], version=6).groups[0].error_code == ErrorCode.GROUP_ID_NOT_FOUND
    assert "g" not in c.replayed_state().groups
