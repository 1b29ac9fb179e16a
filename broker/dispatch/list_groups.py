"""ListGroups (key 16) v0-5: v3 flexible; v4 states filter (KIP-518); v5 types filter (KIP-848),
where every group here is "classic"."""

from __future__ import annotations

from typing import Any

from broker.protocol.generated.list_groups import ListGroupsRequest
from broker.security.authorizer import CLUSTER, CLUSTER_NAME, DESCRIBE, GROUP

from . import coordinating
from .registry import RequestContext
from .then import then

API_KEY = 16


def handle(ctx: RequestContext, req: ListGroupsRequest) -> Any:
    def fix(resp: Any) -> None:
        # this node's groups only; as Kafka: DESCRIBE on the cluster lists every group, else those
        # the principal may describe
        resp.groups = [g for g in resp.groups if not coordinating.refused(ctx, g.group_id)]
        if ctx.services.authorizer is not None and not ctx.allowed(DESCRIBE, CLUSTER, CLUSTER_NAME):
            resp.groups = [g for g in resp.groups if ctx.allowed(DESCRIBE, GROUP, g.group_id)]

    return then(ctx.services.groups.list_groups(ctx, req), fix)
