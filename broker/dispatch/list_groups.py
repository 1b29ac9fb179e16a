"""ListGroups (key 16) v0-5: v3 flexible; v4 states filter (KIP-518); v5 types filter (KIP-848),
where every group here is "classic"."""

from __future__ import annotations

from typing import Any

from broker.protocol.generated.list_groups import ListGroupsRequest

from . import coordinating
from .registry import RequestContext

API_KEY = 16


def handle(ctx: RequestContext, req: ListGroupsRequest) -> Any:
    def fix(resp: Any) -> Any:
        resp.groups = [g for g in resp.groups if not coordinating.refused(ctx, g.group_id)]
        return resp

    return coordinating.then(ctx.services.groups.list_groups(ctx, req), fix)
