"""Heartbeat (key 12) v0-4: v3 static instance id; v4 flexible.
The rules are in broker/coordinator/classic/sync.py."""

from __future__ import annotations

from typing import Any

from broker.protocol.generated.heartbeat import HeartbeatRequest

from . import coordinating
from .registry import RequestContext

API_KEY = 12


def handle(ctx: RequestContext, req: HeartbeatRequest) -> Any:
    coordinating.require(ctx, req.group_id)
    return ctx.services.groups.heartbeat(ctx, req)
