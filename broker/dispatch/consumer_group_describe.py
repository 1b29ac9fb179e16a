"""ConsumerGroupDescribe (key 69) v0-1 (KIP-848): v1 adds each member's type (KIP-1099).
The rules are in broker/coordinator/consumer/describe.py."""

from __future__ import annotations

from typing import Any

from broker.protocol.errors import ErrorCode
from broker.protocol.generated.consumer_group_describe import ConsumerGroupDescribeRequest, DescribedGroup

from . import acl, coordinating
from .registry import RequestContext

API_KEY = 69


def handle(ctx: RequestContext, req: ConsumerGroupDescribeRequest) -> Any:
    ops = acl.GROUP_OPS if req.include_authorized_operations else acl.NOT_REQUESTED
    away = {g for g in req.group_ids if coordinating.refused(ctx, g)}

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

    return coordinating.then(ctx.services.groups.consumer_group_describe(ctx, req, ops), fix)
