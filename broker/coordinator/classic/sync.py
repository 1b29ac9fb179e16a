"""SyncGroup, Heartbeat and LeaveGroup of the classic protocol.

- SyncGroup: followers park until the leader's SyncGroup brings the assignment; the leader's
  assignment is written as a GroupMetadata record, and once it is durable every parked member gets
  its part and the group is Stable. v5 checks the protocol type and name (INCONSISTENT_GROUP_PROTOCOL).
- Heartbeat: REBALANCE_IN_PROGRESS while the group prepares a rebalance (the member must rejoin),
  ILLEGAL_GENERATION / UNKNOWN_MEMBER_ID / FENCED_INSTANCE_ID as Kafka returns them; each accepted
  heartbeat restarts the member's session timer.
- LeaveGroup: v0-2 one member id; v3+ a batch of members by member id and/or instance id (KIP-345),
  v5 with reasons (KIP-800). Each departure triggers a rebalance.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from broker.protocol.errors import ErrorCode
from broker.protocol.generated.heartbeat import HeartbeatRequest, HeartbeatResponse
from broker.protocol.generated.leave_group import LeaveGroupRequest, LeaveGroupResponse, MemberResponse
from broker.protocol.generated.sync_group import SyncGroupRequest, SyncGroupResponse

from ..result import Result
from ..timers import pending_key, sync_key
from .group import ClassicGroup, GroupState
from .join import maybe_complete_join, remove_member_and_rebalance, schedule_session
from .responses import sync_error

if TYPE_CHECKING:
    from ..state import CoordinatorState

log = logging.getLogger(__name__)


def _sync_ok(group: ClassicGroup, assignment: bytes) -> SyncGroupResponse:
    return SyncGroupResponse(
        error_code=0,
        protocol_type=group.protocol_type,
        protocol_name=group.protocol_name,
        assignment=assignment,
    )


def _check_member(group: ClassicGroup | None, member_id: str, instance_id: str | None) -> ErrorCode:
    if group is None:
        return ErrorCode.UNKNOWN_MEMBER_ID
    if group.is_in(GroupState.DEAD):
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    if instance_id is not None:
        owner = group.static_member_id(instance_id)
        if owner is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if owner != member_id:
            return ErrorCode.FENCED_INSTANCE_ID
    if member_id not in group.members:
        return ErrorCode.UNKNOWN_MEMBER_ID
    return ErrorCode.NONE


def sync_group(st: CoordinatorState, req: SyncGroupRequest, version: int, waiter: Any, now: int) -> Result:
    group = st.groups.get(req.group_id)
    instance = req.group_instance_id if version >= 3 else None
    code = _check_member(group, req.member_id, instance)
    if code:
        return Result(sync_error(version, code))
    if req.generation_id != group.generation:
        return Result(sync_error(version, ErrorCode.ILLEGAL_GENERATION))
    if version >= 5 and (
        (
            req.protocol_type is not None
            and group.protocol_type is not None
            and req.protocol_type != group.protocol_type
        )
        or (
            req.protocol_name is not None
            and group.protocol_name is not None
            and req.protocol_name != group.protocol_name
        )
    ):
        return Result(sync_error(version, ErrorCode.INCONSISTENT_GROUP_PROTOCOL))
    member = group.members[req.member_id]
    if group.is_in(GroupState.EMPTY):
        return Result(sync_error(version, ErrorCode.UNKNOWN_MEMBER_ID))
    if group.is_in(GroupState.PREPARING_REBALANCE):
        return Result(sync_error(version, ErrorCode.REBALANCE_IN_PROGRESS))
    schedule_session(st, group, member, now)
    if group.is_in(GroupState.STABLE):
        _synced(st, group, member.member_id)
        return Result(_sync_ok(group, member.assignment))
    # CompletingRebalance
    result = Result(response=waiter)
    if member.sync is not None:
        result.completions.append(
            (member.sync[0], sync_error(member.sync[1], ErrorCode.REBALANCE_IN_PROGRESS))
        )
    member.sync = (waiter, version)
    _synced(st, group, member.member_id)
    if member.member_id != group.leader_id:
        return result
    assignments = {a.member_id: bytes(a.assignment) for a in req.assignments}
    unknown = set(assignments) - set(group.members)
    if unknown:
        log.warning(
            "group %s: leader assigned to unknown members %s; ignored", group.group_id, sorted(unknown)
        )
    # The record carries the new assignments; replay makes them the group's and the group Stable.
    saved = {m.member_id: m.assignment for m in group.members.values()}
    for m in group.members.values():
        m.assignment = assignments.get(m.member_id, b"")
    record = st.group_record(group)
    for m in group.members.values():
        m.assignment = saved[m.member_id]
    result.records.append(record)
    for m in group.members.values():
        if m.sync is not None:
            result.completions.append((m.sync[0], _sync_ok(group, assignments.get(m.member_id, b""))))
            m.sync = None
    log.info("group %s: generation %d assigned by %s", group.group_id, group.generation, member.member_id)
    return result


def _synced(st: CoordinatorState, group: ClassicGroup, member_id: str) -> None:
    """A member has sent SyncGroup this generation; when all have, the sync deadline goes away."""
    group.pending_sync.discard(member_id)
    if not group.pending_sync:
        st.timers.cancel(sync_key(group.group_id))


def heartbeat(st: CoordinatorState, req: HeartbeatRequest, version: int, now: int) -> Result:
    if not req.group_id:  # Kafka checks the group id before looking the group up
        return Result(HeartbeatResponse(error_code=int(ErrorCode.INVALID_GROUP_ID)))
    group = st.groups.get(req.group_id)
    instance = req.group_instance_id if version >= 3 else None
    code = _check_member(group, req.member_id, instance)
    if code:
        return Result(HeartbeatResponse(error_code=int(code)))
    if group.is_in(GroupState.EMPTY):
        return Result(HeartbeatResponse(error_code=int(ErrorCode.UNKNOWN_MEMBER_ID)))
    if req.generation_id != group.generation:
        return Result(HeartbeatResponse(error_code=int(ErrorCode.ILLEGAL_GENERATION)))
    schedule_session(st, group, group.members[req.member_id], now)
    if group.is_in(GroupState.PREPARING_REBALANCE):
        return Result(HeartbeatResponse(error_code=int(ErrorCode.REBALANCE_IN_PROGRESS)))
    return Result(HeartbeatResponse(error_code=0))


def leave_group(st: CoordinatorState, req: LeaveGroupRequest, version: int, now: int) -> Result:
    group = st.groups.get(req.group_id)
    if not req.group_id:  # Kafka checks the group id before looking the group up
        return Result(LeaveGroupResponse(error_code=int(ErrorCode.INVALID_GROUP_ID)))
    if group is None:
        if version >= 3:  # as Kafka: the request succeeds, each member is unknown
            members = [
                MemberResponse(m.member_id, m.group_instance_id, int(ErrorCode.UNKNOWN_MEMBER_ID))
                for m in req.members
            ]
            return Result(LeaveGroupResponse(error_code=0, members=members))
        return Result(LeaveGroupResponse(error_code=int(ErrorCode.UNKNOWN_MEMBER_ID)))
    if group.is_in(GroupState.DEAD):
        return Result(LeaveGroupResponse(error_code=int(ErrorCode.COORDINATOR_NOT_AVAILABLE)))
    if version < 3:
        identities = [(req.member_id, None, None)]
    else:
        identities = [
            (m.member_id, m.group_instance_id, m.reason if version >= 5 else None) for m in req.members
        ]
    result = Result()
    answers = []
    for member_id, instance_id, reason in identities:
        code = ErrorCode.NONE
        target = member_id
        if instance_id is not None:
            owner = group.static_member_id(instance_id)
            if owner is None:
                code = ErrorCode.UNKNOWN_MEMBER_ID
            elif member_id and member_id != owner:
                code = ErrorCode.FENCED_INSTANCE_ID
            else:
                target = owner
        elif target in group.pending_members:
            group.pending_members.discard(target)
            st.timers.cancel(pending_key(group.group_id, target))
            more = maybe_complete_join(st, group, now)
            result.merge(more)
            answers.append(MemberResponse(member_id, instance_id, 0))
            continue
        elif target not in group.members:
            code = ErrorCode.UNKNOWN_MEMBER_ID
        if code == ErrorCode.NONE:
            log.info("group %s: member %s leaves%s", group.group_id, target, f": {reason}" if reason else "")
            more = remove_member_and_rebalance(st, group, target, now, f"member {target} left")
            result.merge(more)
        answers.append(MemberResponse(member_id, instance_id, int(code)))
    if version < 3:
        result.response = LeaveGroupResponse(error_code=answers[0].error_code)
    else:
        result.response = LeaveGroupResponse(error_code=0, members=answers)
    return result
