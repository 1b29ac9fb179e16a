"""OffsetForLeaderEpoch (key 23) v0-4: v1 returns the leader epoch; v2 current leader epoch
(fencing); v3 replica id; v4 flexible. The Java consumer uses it to validate its position after a
leader change (KIP-320).

This broker has only ever had leader epoch 0 for every partition, so epoch 0 ends at the log end.
As in Kafka's leader-epoch cache, a later epoch, or any epoch of a partition that has never had a
record appended (the cache is empty), is unknown: epoch -1, end offset -1.
"""

from __future__ import annotations

from broker.protocol.errors import ErrorCode
from broker.protocol.generated.offset_for_leader_epoch import (
    EpochEndOffset,
    OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse,
    OffsetForLeaderTopicResult,
)
from broker.security.authorizer import DESCRIBE, TOPIC

from .registry import RequestContext

API_KEY = 23


def handle(ctx: RequestContext, req: OffsetForLeaderEpochRequest) -> OffsetForLeaderEpochResponse:
    v = ctx.api_version
    topics = []
    for t in req.topics:
        parts = []
        denied = not ctx.allowed(DESCRIBE, TOPIC, t.topic)  # as Kafka (a consumer's request)
        for p in t.partitions:
            plog = ctx.services.logs.get(t.topic, p.partition)
            if denied:
                parts.append(EpochEndOffset(int(ErrorCode.TOPIC_AUTHORIZATION_FAILED), p.partition, -1, -1))
            elif plog is None:
                parts.append(EpochEndOffset(int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION), p.partition, -1, -1))
            elif v >= 2 and p.current_leader_epoch > 0:
                parts.append(EpochEndOffset(int(ErrorCode.UNKNOWN_LEADER_EPOCH), p.partition, -1, -1))
            elif p.leader_epoch != 0 or plog.log_end_offset == 0:
                parts.append(EpochEndOffset(0, p.partition, -1, -1))
            else:
                parts.append(EpochEndOffset(0, p.partition, 0, plog.log_end_offset))
        topics.append(OffsetForLeaderTopicResult(topic=t.topic, partitions=parts))
    return OffsetForLeaderEpochResponse(throttle_time_ms=0, topics=topics)
