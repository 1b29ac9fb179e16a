"""OffsetDelete (key 47) v0: deletes a group's offsets of partitions it no longer consumes
(GROUP_SUBSCRIBED_TO_TOPIC otherwise). Rules: broker/coordinator/offsets.py."""

from __future__ import annotations

from typing import Any

from broker.protocol.generated.offset_delete import OffsetDeleteRequest

from . import coordinating
from .registry import RequestContext

API_KEY = 47


def handle(ctx: RequestContext, req: OffsetDeleteRequest) -> Any:
    coordinating.require(ctx, req.group_id)
    return ctx.services.groups.delete_offsets(ctx, req)
