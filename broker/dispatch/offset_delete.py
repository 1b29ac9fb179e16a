"""OffsetDelete (key 47) v0: deletes a group's offsets of partitions it no longer consumes
(GROUP_SUBSCRIBED_TO_TOPIC otherwise). Rules: broker/coordinator/offsets.py."""

from __future__ import annotations

from typing import Any

from broker.protocol.errors import ErrorCode
from broker.protocol.generated.offset_delete import (
    OffsetDeleteRequest,
    OffsetDeleteResponse,
    OffsetDeleteResponsePartition,
    OffsetDeleteResponseTopic,
)
from broker.security.authorizer import DELETE, GROUP, READ, TOPIC

from . import coordinating
from .registry import RequestContext
from .then import then

API_KEY = 47


def handle(ctx: RequestContext, req: OffsetDeleteRequest) -> Any:
    # as Kafka: DELETE on the group, then its coordinator, then READ on each topic (the others are
    # left alone and get TOPIC_AUTHORIZATION_FAILED, added to an answer without a group-level error)
    if not ctx.allowed(DELETE, GROUP, req.group_id):
        return OffsetDeleteResponse(
            error_code=int(ErrorCode.GROUP_AUTHORIZATION_FAILED), throttle_time_ms=0, topics=[]
        )
    coordinating.require(ctx, req.group_id)
    denied = [t for t in req.topics if not ctx.allowed(READ, TOPIC, t.name)]
    if not denied:
        return ctx.services.groups.delete_offsets(ctx, req)
    req.topics = [t for t in req.topics if t not in denied]
    code = int(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
    failed = [
        OffsetDeleteResponseTopic(
            t.name, [OffsetDeleteResponsePartition(p.partition_index, code) for p in t.partitions]
        )
        for t in denied
    ]

    def add(response: OffsetDeleteResponse) -> None:
        if response.error_code == 0:
            response.topics.extend(failed)

    return then(ctx.services.groups.delete_offsets(ctx, req), add)
