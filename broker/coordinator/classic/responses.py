"""Responses of the classic protocol shared by classic groups and by classic members of consumer
groups (consumer/classic_members.py)."""

from __future__ import annotations

from broker.protocol.errors import ErrorCode
from broker.protocol.generated.join_group import JoinGroupResponse, JoinGroupResponseMember
from broker.protocol.generated.sync_group import SyncGroupResponse

from .group import ClassicGroup


def join_response(
    version: int,
    error: ErrorCode,
    member_id: str,
    group: ClassicGroup | None = None,
    members: list[JoinGroupResponseMember] | None = None,
    skip_assignment: bool = False,
) -> JoinGroupResponse:
    ok = group is not None and error == ErrorCode.NONE
    protocol_name = group.protocol_name if ok else None
    return JoinGroupResponse(
        error_code=int(error),
        generation_id=group.generation if ok else -1,
        protocol_type=group.protocol_type if ok else None,
        protocol_name=protocol_name if (protocol_name is not None or version >= 7) else "",
        leader=(group.leader_id or "") if ok else "",
        skip_assignment=skip_assignment,
        member_id=member_id,
        members=members or [],
    )


def sync_error(version: int, code: ErrorCode) -> SyncGroupResponse:
    return SyncGroupResponse(error_code=int(code), protocol_type=None, protocol_name=None, assignment=b"")
