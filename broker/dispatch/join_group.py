"""JoinGroup (key 11) v0-9: v1 rebalance timeout; v4 member id required (KIP-394); v5 static
membership (KIP-345); v6 flexible; v7 protocol type/name in the response; v8 reason (KIP-800);
v9 SkipAssignment (KIP-814). The rules are in broker/coordinator/classic/join.py."""

from __future__ import annotations

from typing import Any

from broker.coordinator.classic.responses import join_response
from broker.protocol.errors import ErrorCode
from broker.protocol.generated.join_group import JoinGroupRequest
from broker.security.authorizer import GROUP, READ

from . import coordinating
from .registry import RequestContext

API_KEY = 11


def handle(ctx: RequestContext, req: JoinGroupRequest) -> Any:
    if not ctx.allowed(READ, GROUP, req.group_id):  # as Kafka: READ on the group
        return join_response(ctx.api_version, ErrorCode.GROUP_AUTHORIZATION_FAILED, "")
    coordinating.require(ctx, req.group_id)
    return ctx.services.groups.join_group(ctx, req)
