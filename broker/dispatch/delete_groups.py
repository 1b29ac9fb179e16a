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
from broker.security.authorizer import DELETE, GROUP

from .registry import RequestContext
from .then import then

API_KEY = 42


def handle(ctx: RequestContext, req: DeleteGroupsRequest) -> Any:
    if ctx.services.authorizer is None:
        return ctx.services.groups.delete_groups(ctx, req)
    # as Kafka: DELETE on each group; the others are not deleted and get GROUP_AUTHORIZATION_FAILED
    denied = [g for g in req.groups_names if not ctx.allowed(DELETE, GROUP, g)]
    if not denied:
        return ctx.services.groups.delete_groups(ctx, req)
    failed = [DeletableGroupResult(g, int(ErrorCode.GROUP_AUTHORIZATION_FAILED)) for g in denied]
    req.groups_names = [g for g in req.groups_names if g not in denied]
    if not req.groups_names:
        return DeleteGroupsResponse(throttle_time_ms=0, results=failed)
    return then(ctx.services.groups.delete_groups(ctx, req), lambda r: r.results.extend(failed))


def error_response(req: DeleteGroupsRequest, version: int, code: ErrorCode) -> DeleteGroupsResponse:
    """Every requested group with ``code`` (e.g. when the coordinator log cannot be written)."""
    results = [DeletableGroupResult(g, int(code)) for g in req.groups_names]
    return DeleteGroupsResponse(throttle_time_ms=0, results=results)
