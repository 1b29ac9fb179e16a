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

from . import coordinating
from .registry import RequestContext
from .then import then

API_KEY = 42


def handle(ctx: RequestContext, req: DeleteGroupsRequest) -> Any:
    # as Kafka: DELETE on each group (GROUP_AUTHORIZATION_FAILED), then the coordinator of each
    # (NOT_COORDINATOR); only the others are deleted, and the answer keeps the request's order
    order = list(req.groups_names)
    failed: list[DeletableGroupResult] = []
    for g in order:
        if not ctx.allowed(DELETE, GROUP, g):
            failed.append(DeletableGroupResult(g, int(ErrorCode.GROUP_AUTHORIZATION_FAILED)))
        elif coordinating.refused(ctx, g):
            failed.append(DeletableGroupResult(g, int(ErrorCode.NOT_COORDINATOR)))
    if not failed:
        return ctx.services.groups.delete_groups(ctx, req)
    refused = {r.group_id for r in failed}
    req.groups_names = [g for g in order if g not in refused]
    if not req.groups_names:
        return DeleteGroupsResponse(throttle_time_ms=0, results=failed)

    def add(resp: DeleteGroupsResponse) -> None:
        resp.results = sorted([*resp.results, *failed], key=lambda r: order.index(r.group_id))

    return then(ctx.services.groups.delete_groups(ctx, req), add)


def error_response(req: DeleteGroupsRequest, version: int, code: ErrorCode) -> DeleteGroupsResponse:
    """Every requested group with ``code`` (e.g. when the coordinator log cannot be written)."""
    results = [DeletableGroupResult(g, int(code)) for g in req.groups_names]
    return DeleteGroupsResponse(throttle_time_ms=0, results=results)
