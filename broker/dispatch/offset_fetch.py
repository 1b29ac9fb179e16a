"""OffsetFetch (key 9) v0-10: v2 null topics = all and a top-level error; v5 leader epoch; v6
flexible; v7 require_stable; v8 several groups per request; v9 member id/epoch; v10 topic ids.
Rules: broker/coordinator/offsets.py."""

from __future__ import annotations

from typing import Any

from broker.protocol.errors import ErrorCode
from broker.protocol.generated.offset_fetch import (
    OffsetFetchRequest,
    OffsetFetchResponse,
    OffsetFetchResponseGroup,
    OffsetFetchResponsePartition,
    OffsetFetchResponsePartitions,
)
from broker.security.authorizer import DESCRIBE, GROUP, TOPIC

from . import coordinating
from .registry import RequestContext
from .then import then

API_KEY = 9


def handle(ctx: RequestContext, req: OffsetFetchRequest) -> Any:
    v = ctx.api_version
    authz = ctx.services.authorizer
    away: set[str] = set()
    if v < 8:
        # as Kafka: DESCRIBE on the group first (else GROUP_AUTHORIZATION_FAILED and no offsets),
        # then its coordinator
        if authz is None or ctx.allowed(DESCRIBE, GROUP, req.group_id):
            coordinating.require(ctx, req.group_id)
        elif v >= 2:
            return OffsetFetchResponse(
                throttle_time_ms=0, topics=[], error_code=int(ErrorCode.GROUP_AUTHORIZATION_FAILED)
            )
    else:
        away = {g.group_id for g in req.groups if coordinating.refused(ctx, g.group_id)}
    if authz is None and not away:
        return ctx.services.groups.fetch_offsets(ctx, req)
    return then(ctx.services.groups.fetch_offsets(ctx, req), lambda r: _fix(ctx, req, r, away))


def _fix(ctx: RequestContext, req: OffsetFetchRequest, response: Any, away: set[str]) -> None:
    v = ctx.api_version
    for g in response.groups if v >= 8 else ():
        if g.group_id in away:
            g.error_code, g.topics = int(ErrorCode.NOT_COORDINATOR), []
    if ctx.services.authorizer is None:
        return
    # as Kafka: DESCRIBE on each group (else GROUP_AUTHORIZATION_FAILED and no offsets), then
    # DESCRIBE on each topic: a fetch of all offsets leaves the others out, a fetch of named topics
    # answers TOPIC_AUTHORIZATION_FAILED for them
    if v < 8:
        if not ctx.allowed(DESCRIBE, GROUP, req.group_id):  # (v0-1: per partition)
            for t in response.topics:
                t.partitions = [
                    _denied(OffsetFetchResponsePartition, p, ErrorCode.GROUP_AUTHORIZATION_FAILED)
                    for p in t.partitions
                ]
            return
        response.topics = _redact(ctx, response.topics, req.topics is None, OffsetFetchResponsePartition)
        return
    for i, (g, out) in enumerate(zip(req.groups, response.groups, strict=True)):
        if not ctx.allowed(DESCRIBE, GROUP, g.group_id):
            response.groups[i] = OffsetFetchResponseGroup(
                group_id=g.group_id, topics=[], error_code=int(ErrorCode.GROUP_AUTHORIZATION_FAILED)
            )
        elif out.error_code == 0:
            out.topics = _redact(ctx, out.topics, g.topics is None, OffsetFetchResponsePartitions)


def _redact(ctx: RequestContext, topics: list, all_topics: bool, part_cls: Any) -> list:
    out = []
    for t in topics:
        name = t.name or ctx.services.topics.name_of(getattr(t, "topic_id", None))
        if name is None or ctx.allowed(DESCRIBE, TOPIC, name):
            out.append(t)
        elif not all_topics:
            t.partitions = [_denied(part_cls, p, ErrorCode.TOPIC_AUTHORIZATION_FAILED) for p in t.partitions]
            out.append(t)
    return out


def _denied(part_cls: Any, p: Any, code: ErrorCode) -> Any:
    return part_cls(p.partition_index, -1, -1, "", int(code))
