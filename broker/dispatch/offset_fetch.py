"""OffsetFetch (key 9) v0-10: v2 null topics = all and a top-level error; v5 leader epoch; v6
flexible; v7 require_stable; v8 several groups per request; v9 member id/epoch; v10 topic ids.
Rules: broker/coordinator/offsets.py."""

from __future__ import annotations

from typing import Any

from broker.protocol.generated.offset_fetch import OffsetFetchRequest

from .registry import RequestContext

API_KEY = 9


def handle(ctx: RequestContext, req: OffsetFetchRequest) -> Any:
    return ctx.services.groups.fetch_offsets(ctx, req)
