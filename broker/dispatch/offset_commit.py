"""OffsetCommit (key 8) v0-10: v1 generation and member id (and a per-partition timestamp, v1
only); v2-4 retention time (ignored, as Kafka does since 2.1); v6 leader epoch; v7 instance id; v8
flexible; v9 member epochs for consumer groups; v10 topic ids. Rules: broker/coordinator/offsets.py."""

from __future__ import annotations

import asyncio
from typing import Any

from broker.protocol.generated.offset_commit import OffsetCommitRequest

from .registry import Deferred, RequestContext

API_KEY = 8


def handle(ctx: RequestContext, req: OffsetCommitRequest) -> Any:
    result = ctx.broker.groups.commit_offsets(ctx, req)
    if asyncio.iscoroutine(result):
        # the commit is applied; only its flush is awaited: the connection may go on meanwhile
        return Deferred(result)
    return result
