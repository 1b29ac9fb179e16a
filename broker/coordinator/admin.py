"""DescribeGroups, ListGroups and DeleteGroups over the coordinator state."""

from __future__ import annotations

from typing import TYPE_CHECKING

from broker.protocol.errors import ErrorCode
from broker.protocol.generated.delete_groups import (
    DeletableGroupResult,
    DeleteGroupsRequest,
    DeleteGroupsResponse,
)
from broker.protocol.generated.describe_groups import (
    DescribedGroup,
    DescribedGroupMember,
    DescribeGroupsRequest,
    DescribeGroupsResponse,
)
from broker.protocol.generated.list_groups import ListedGroup, ListGroupsRequest, ListGroupsResponse

from .classic.group import GroupState
from .consumer import records as crec
from .result import Result

if TYPE_CHECKING:
    from .state import CoordinatorState

CLASSIC = "classic"
CONSUMER = "consumer"


def describe(
    st: CoordinatorState, req: DescribeGroupsRequest, version: int, ops: int
) -> DescribeGroupsResponse:
    out = []
    for gid in req.groups:
        group = st.groups.get(gid)
        if group is None or group.is_in(GroupState.DEAD):
            if version >= 6:
                kind = "is not a classic group" if gid in st.consumer_groups else "not found"
                out.append(
                    DescribedGroup(
                        int(ErrorCode.GROUP_ID_NOT_FOUND),
                        f"Group {gid} {kind}.",
                        gid,
                        GroupState.DEAD.value,
                        "",
                        "",
                        [],
                        -(2**31),  # as Kafka: no authorized operations with an error
                    )
                )
            else:
                out.append(DescribedGroup(0, None, gid, GroupState.DEAD.value, "", "", [], ops))
            continue
        stable = group.is_in(GroupState.STABLE)
        preparing = group.is_in(GroupState.PREPARING_REBALANCE)
        members = [
            DescribedGroupMember(
                member_id=m.member_id,
                group_instance_id=m.group_instance_id,
                client_id=m.client_id,
                client_host=m.client_host,
                member_metadata=m.metadata(group.protocol_name) if (stable and group.protocol_name) else b"",
                # as Kafka 4.3 (checked against it in tests/differential): a rebalance that has not
                # completed its join yet still shows the members' last assignment
                member_assignment=m.assignment if stable or preparing else b"",
            )
            for m in group.members.values()
        ]
        out.append(
            DescribedGroup(
                error_code=0,
                error_message=None,
                group_id=gid,
                group_state=group.state.value,
                protocol_type=group.protocol_type or "",
                protocol_data=(group.protocol_name or "") if stable else "",
                members=members,
                authorized_operations=ops,
            )
        )
    return DescribeGroupsResponse(throttle_time_ms=0, groups=out)


def list_groups(st: CoordinatorState, req: ListGroupsRequest, version: int) -> ListGroupsResponse:
    states = {s.lower() for s in req.states_filter} if version >= 4 else set()
    types = {t.lower() for t in req.types_filter} if version >= 5 else set()
    listed = [
        (gid, g.protocol_type or "", g.state.value, CLASSIC)
        for gid, g in st.groups.items()
        if not g.is_in(GroupState.DEAD)
    ]
    listed += [(gid, "consumer", g.state.value, CONSUMER) for gid, g in st.consumer_groups.items()]
    out = []
    for gid, ptype, state, gtype in sorted(listed):
        if states and state.lower() not in states:
            continue
        if types and gtype not in types:
            continue
        out.append(ListedGroup(gid, ptype, state, gtype))
    return ListGroupsResponse(throttle_time_ms=0, error_code=0, groups=out)


def delete_groups(st: CoordinatorState, req: DeleteGroupsRequest) -> Result:
    result = Result()
    out = []
    for gid in req.groups_names:
        group = st.groups.get(gid)
        cgroup = st.consumer_groups.get(gid)
        if cgroup is not None:
            if cgroup.members:
                code = ErrorCode.NON_EMPTY_GROUP
            else:
                code = ErrorCode.NONE
                _offset_tombstones(st, gid, result)
                result.records.extend(crec.group_tombstones(gid))
            out.append(DeletableGroupResult(gid, int(code)))
            continue
        if group is None or group.is_in(GroupState.DEAD):  # "" too: a group like any other, as Kafka
            code = ErrorCode.GROUP_ID_NOT_FOUND
        elif group.members or not group.is_in(GroupState.EMPTY):
            code = ErrorCode.NON_EMPTY_GROUP
        else:
            code = ErrorCode.NONE
            _offset_tombstones(st, gid, result)
            result.records.append(st.group_tombstone(gid))
        out.append(DeletableGroupResult(gid, int(code)))
    result.response = DeleteGroupsResponse(throttle_time_ms=0, results=out)
    return result


def _offset_tombstones(st: CoordinatorState, gid: str, result: Result) -> None:
    offsets = st.offsets.get(gid)
    if offsets is not None:
        for topic, parts in offsets.by_topic.items():
            for partition in parts:
                result.records.append(st.offset_record(gid, topic, partition, None))
