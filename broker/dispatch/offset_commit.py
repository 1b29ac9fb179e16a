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
from broker.security.authorizer import GROUP, READ, TOPIC

from . import coordinating
from .registry import Deferred, RequestContext

API_KEY = 8


def handle(ctx: RequestContext, req: OffsetCommitRequest) -> Any:
    # as Kafka: READ on the group (else every partition fails), then READ on each topic: only the
    # authorized topics are committed, the others get TOPIC_AUTHORIZATION_FAILED
    if not ctx.allowed(READ, GROUP, req.group_id):
        return error_response(req, ctx.api_version, ErrorCode.GROUP_AUTHORIZATION_FAILED)
    denied = []
    if ctx.services.authorizer is not None:
        kept = []
        for t in req.topics:
            name = t.name if ctx.api_version < 10 else ctx.services.topics.name_of(t.topic_id)
            (kept if name is None or ctx.allowed(READ, TOPIC, name) else denied).append(t)
        if denied:
            req.topics = kept
            if not kept:
                return OffsetCommitResponse(throttle_time_ms=0, topics=_denied_topics(denied))
    coordinating.require(ctx, req.group_id)
    # without denied topics to add, an answer committing everything may come encoded (bytes)
    result = ctx.services.groups.commit_offsets(ctx, req, not denied)
    if denied and isinstance(result, OffsetCommitResponse):
        result.topics.extend(_denied_topics(denied))
        return result
    if asyncio.isfuture(result) or asyncio.iscoroutine(result):
        # the commit is applied; only its flush is awaited: the connection may go on meanwhile
        return Deferred(_with_denied(result, denied) if denied else result)
    return _with_denied(result, denied) if denied else result


def _denied_topics(denied: list) -> list[OffsetCommitResponseTopic]:
    code = int(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
    return [
        OffsetCommitResponseTopic(
            name=t.name,
            topic_id=t.topic_id,
            partitions=[OffsetCommitResponsePartition(p.partition_index, code) for p in t.partitions],
        )
        for t in denied
    ]


async def _with_denied(result: Any, denied: list) -> Any:
    response = await result
    response.topics.extend(_denied_topics(denied))
    return response


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
