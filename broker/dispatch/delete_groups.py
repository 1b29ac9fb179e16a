"""DeleteGroups (key 42) v0-2: deletes empty groups and their offsets (NON_EMPTY_GROUP otherwise);
v2 flexible."""

from __future__ import annotations

from typing import Any

from broker.protocol.generated.delete_groups import DeleteGroupsRequest

from .registry import RequestContext

API_KEY = 42


def handle(ctx: RequestContext, req: DeleteGroupsRequest) -> Any:
    return ctx.broker.groups.delete_groups(ctx, req)
