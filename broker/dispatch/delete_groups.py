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

from .registry import RequestContext

API_KEY = 42


def handle(ctx: RequestContext, req: DeleteGroupsRequest) -> Any:
    return ctx.services.groups.delete_groups(ctx, req)


def error_response(req: DeleteGroupsRequest, version: int, code: ErrorCode) -> DeleteGroupsResponse:
    """Every requested group with ``code`` (e.g. when the coordinator log cannot be written)."""
    results = [DeletableGroupResult(g, int(code)) for g in req.groups_names]
    return DeleteGroupsResponse(throttle_time_ms=0, results=results)
