"""SyncGroup (key 14) v0-5: v3 static instance id; v4 flexible; v5 protocol type/name checks.
The rules are in broker/coordinator/classic/sync.py."""

from __future__ import annotations

from typing import Any

from broker.protocol.generated.sync_group import SyncGroupRequest

from . import coordinating
from .registry import RequestContext

API_KEY = 14


def handle(ctx: RequestContext, req: SyncGroupRequest) -> Any:
    coordinating.require(ctx, req.group_id)
    return ctx.services.groups.sync_group(ctx, req)
