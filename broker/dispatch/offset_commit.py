"""OffsetCommit (key 8) v0-10: v1 generation and member id (and a per-partition timestamp, v1
only); v2-4 retention time (ignored, as Kafka does since 2.1); v6 leader epoch; v7 instance id; v8
flexible; v9 member epochs for consumer groups; v10 topic ids. Rules: broker/coordinator/offsets.py."""

from __future__ import annotations

import asyncio
from typing import Any

from broker.protocol.errors import ErrorCode
from broker.protocol.generated.offset_commit import (
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetCommitResponsePartition,
    OffsetCommitResponseTopic,
)

from . import coordinating
from .registry import Deferred, RequestContext

API_KEY = 8


def handle(ctx: RequestContext, req: OffsetCommitRequest) -> Any:
    coordinating.require(ctx, req.group_id)
    result = ctx.services.groups.commit_offsets(ctx, req)
    if asyncio.iscoroutine(result):
        # the commit is applied; only its flush is awaited: the connection may go on meanwhile
        return Deferred(result)
    return result


def error_response(req: OffsetCommitRequest, version: int, code: ErrorCode) -> OffsetCommitResponse:
    """Every partition of the request with ``code`` (e.g. NOT_COORDINATOR when the
    coordinator log cannot be written)."""
    topics = [
        OffsetCommitResponseTopic(
            name=t.name,
            topic_id=t.topic_id,
            partitions=[OffsetCommitResponsePartition(p.partition_index, int(code)) for p in t.partitions],
        )
        for t in req.topics
    ]
    return OffsetCommitResponse(throttle_time_ms=0, topics=topics)
