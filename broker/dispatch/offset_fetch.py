"""OffsetFetch (key 9) v0-10: v2 null topics = all and a top-level error; v5 leader epoch; v6
flexible; v7 require_stable; v8 several groups per request; v9 member id/epoch; v10 topic ids.
Rules: broker/coordinator/offsets.py."""

from __future__ import annotations

from typing import Any

from broker.protocol.errors import ErrorCode
from broker.protocol.generated.offset_fetch import OffsetFetchRequest

from . import coordinating
from .registry import RequestContext

API_KEY = 9


def handle(ctx: RequestContext, req: OffsetFetchRequest) -> Any:
    if ctx.api_version < 8:
        coordinating.require(ctx, req.group_id)
        return ctx.services.groups.fetch_offsets(ctx, req)
    away = {g.group_id for g in req.groups if coordinating.refused(ctx, g.group_id)}

    def fix(resp: Any) -> Any:
        for g in resp.groups:
            if g.group_id in away:
                g.error_code, g.topics = int(ErrorCode.NOT_COORDINATOR), []
        return resp

    return coordinating.then(ctx.services.groups.fetch_offsets(ctx, req), fix)
