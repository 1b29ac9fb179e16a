"""ListGroups (key 16) v0-5: v3 flexible; v4 states filter (KIP-518); v5 types filter (KIP-848),
where every group here is "classic"."""

from __future__ import annotations

from typing import Any

from broker.protocol.generated.list_groups import ListGroupsRequest
from broker.security.authorizer import CLUSTER, CLUSTER_NAME, DESCRIBE, GROUP

from .registry import RequestContext

API_KEY = 16


def handle(ctx: RequestContext, req: ListGroupsRequest) -> Any:
    response = ctx.services.groups.list_groups(ctx, req)
    # as Kafka: DESCRIBE on the cluster lists every group, else those the principal may describe
    if ctx.services.authorizer is not None and not ctx.allowed(DESCRIBE, CLUSTER, CLUSTER_NAME):
        response.groups = [g for g in response.groups if ctx.allowed(DESCRIBE, GROUP, g.group_id)]
    return response
