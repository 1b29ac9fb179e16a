"""ConsumerGroupDescribe (key 69) v0-1 (KIP-848): v1 adds each member's type (KIP-1099).
The rules are in broker/coordinator/consumer/describe.py."""

from __future__ import annotations

from typing import Any

from broker.protocol.generated.consumer_group_describe import ConsumerGroupDescribeRequest

from . import acl
from .registry import RequestContext

API_KEY = 69


def handle(ctx: RequestContext, req: ConsumerGroupDescribeRequest) -> Any:
    ops = acl.GROUP_OPS if req.include_authorized_operations else acl.NOT_REQUESTED
    return ctx.services.groups.consumer_group_describe(ctx, req, ops)
