"""DescribeGroups (key 15) v0-6: v3 authorized operations; v4 instance ids; v5 flexible; v6
GROUP_ID_NOT_FOUND with a message for unknown groups (earlier versions describe them as Dead)."""

from __future__ import annotations

from typing import Any

from broker.protocol.errors import ErrorCode
from broker.protocol.generated.describe_groups import DescribedGroup, DescribeGroupsRequest
from broker.security.authorizer import DESCRIBE, GROUP

from . import acl, coordinating
from .registry import RequestContext
from .then import then

API_KEY = 15


def handle(ctx: RequestContext, req: DescribeGroupsRequest) -> Any:
    include_ops = ctx.api_version >= 3 and req.include_authorized_operations
    ops = acl.GROUP_OPS if include_ops else acl.NOT_REQUESTED
    away = {g for g in req.groups if coordinating.refused(ctx, g)}
    if not away and ctx.services.authorizer is None:
        return ctx.services.groups.describe_groups(ctx, req, ops)

    def fix(resp: Any) -> None:
        for i, g in enumerate(resp.groups):
            # as Kafka: DESCRIBE on each group first, then its coordinator, and its own operations
            if not ctx.allowed(DESCRIBE, GROUP, g.group_id):
                resp.groups[i] = DescribedGroup(
                    error_code=int(ErrorCode.GROUP_AUTHORIZATION_FAILED),
                    error_message=None,  # as Kafka's DescribeGroupsResponse.groupError
                    group_id=g.group_id,
                    group_state="",
                    protocol_type="",
                    protocol_data="",
                    members=[],
                    authorized_operations=acl.NOT_REQUESTED,
                )
            elif g.group_id in away:
                resp.groups[i] = DescribedGroup(
                    error_code=int(ErrorCode.NOT_COORDINATOR), group_id=g.group_id, authorized_operations=ops
                )
            elif include_ops and g.authorized_operations != acl.NOT_REQUESTED:
                g.authorized_operations = ctx.authorized_operations(GROUP, g.group_id, acl.GROUP_OPS)

    return then(ctx.services.groups.describe_groups(ctx, req, ops), fix)
