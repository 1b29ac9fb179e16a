"""DeleteGroups (key 42) v0-2: deletes empty groups and their offsets (NON_EMPTY_GROUP otherwise);
v2 flexible."""

from __future__ import annotations

from typing import Any

from broker.protocol.errors import ErrorCode
from broker.protocol.generated.delete_groups import (
    DeletableGroupResult,
    DeleteGroupsRequest,
    DeleteGroupsResponse,
)

from . import coordinating
from .registry import RequestContext

API_KEY = 42


def handle(ctx: RequestContext, req: DeleteGroupsRequest) -> Any:
    away = [g for g in req.groups_names if coordinating.refused(ctx, g)]
    if not away:
        return ctx.services.groups.delete_groups(ctx, req)
    order = list(req.groups_names)
    req.groups_names = [g for g in order if g not in away]
    refused = [DeletableGroupResult(g, int(ErrorCode.NOT_COORDINATOR)) for g in away]
    if not req.groups_names:
        return DeleteGroupsResponse(throttle_time_ms=0, results=refused)

    def fix(resp: Any) -> Any:
        resp.results = sorted([*resp.results, *refused], key=lambda r: order.index(r.group_id))
        return resp

    return coordinating.then(ctx.services.groups.delete_groups(ctx, req), fix)


def error_response(req: DeleteGroupsRequest, version: int, code: ErrorCode) -> DeleteGroupsResponse:
    """Every requested group with ``code`` (e.g. when the coordinator log cannot be written)."""
    results = [DeletableGroupResult(g, int(code)) for g in req.groups_names]
    return DeleteGroupsResponse(throttle_time_ms=0, results=results)
