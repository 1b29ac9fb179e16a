"""Heartbeat (key 12) v0-4: v3 static instance id; v4 flexible.
The rules are in broker/coordinator/classic/sync.py."""

from __future__ import annotations

from typing import Any

from broker.protocol.errors import ErrorCode
from broker.protocol.generated.heartbeat import HeartbeatRequest, HeartbeatResponse
from broker.security.authorizer import GROUP, READ

from . import coordinating
from .registry import RequestContext

API_KEY = 12


def handle(ctx: RequestContext, req: HeartbeatRequest) -> Any:
    if not ctx.allowed(READ, GROUP, req.group_id):  # as Kafka: READ on the group
        return HeartbeatResponse(throttle_time_ms=0, error_code=int(ErrorCode.GROUP_AUTHORIZATION_FAILED))
    coordinating.require(ctx, req.group_id)
    return ctx.services.groups.heartbeat(ctx, req)
