"""DescribeGroups (key 15) v0-6: v3 authorized operations; v4 instance ids; v5 flexible; v6
GROUP_ID_NOT_FOUND with a message for unknown groups (earlier versions describe them as Dead)."""

from __future__ import annotations

from typing import Any

from broker.protocol.errors import ErrorCode
from broker.protocol.generated.describe_groups import DescribedGroup, DescribeGroupsRequest

from . import acl, coordinating
from .registry import RequestContext

API_KEY = 15


def handle(ctx: RequestContext, req: DescribeGroupsRequest) -> Any:
    ops = acl.GROUP_OPS if (ctx.api_version >= 3 and req.include_authorized_operations) else acl.NOT_REQUESTED
    away = {g for g in req.groups if coordinating.refused(ctx, g)}

    def fix(resp: Any) -> Any:
        resp.groups = [
            DescribedGroup(
                error_code=int(ErrorCode.NOT_COORDINATOR), group_id=g.group_id, authorized_operations=ops
            )
            if g.group_id in away
            else g
            for g in resp.groups
        ]
        return resp

    return coordinating.then(ctx.services.groups.describe_groups(ctx, req, ops), fix)
