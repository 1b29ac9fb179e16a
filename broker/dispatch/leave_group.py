"""LeaveGroup (key 13) v0-5: v3 batches members by member id or instance id (KIP-345); v4
flexible; v5 reasons (KIP-800). The rules are in broker/coordinator/classic/sync.py."""

from __future__ import annotations

from typing import Any

from broker.protocol.errors import ErrorCode
from broker.protocol.generated.leave_group import LeaveGroupRequest, LeaveGroupResponse
from broker.security.authorizer import GROUP, READ

from . import coordinating
from .registry import RequestContext

API_KEY = 13


def handle(ctx: RequestContext, req: LeaveGroupRequest) -> Any:
    if not ctx.allowed(READ, GROUP, req.group_id):  # as Kafka: READ on the group
        return LeaveGroupResponse(
            throttle_time_ms=0, error_code=int(ErrorCode.GROUP_AUTHORIZATION_FAILED), members=[]
        )
    coordinating.require(ctx, req.group_id)
    return ctx.services.groups.leave_group(ctx, req)
