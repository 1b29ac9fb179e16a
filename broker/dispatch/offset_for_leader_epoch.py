"""OffsetForLeaderEpoch (key 23) v0-4: v1 returns the leader epoch; v2 current leader epoch
(fencing); v3 replica id; v4 flexible. The Java consumer uses it to validate its position after a
leader change (KIP-320).

A partition has one log however often its leader moves (broker/nodes.py); each batch carries the
epoch of the leader that appended it (PartitionLog.leader_epoch), so the log's epochs never
decrease. The answer follows Kafka's LeaderEpochFileCache.endOffsetFor, whose entries are the first
offset of each epoch in the log plus the current leader's epoch from where it took over: the current
epoch ends at the log end; an earlier one at the first offset of the first later epoch in the log
(the log end if there is none), answered with the latest epoch at or below it that has batches (the
requested one when none has). A later epoch, or any epoch of a partition that has never had a
record appended (the cache is empty), is unknown: epoch -1, end offset -1. The first later batch is
found by a binary search over the batch headers. On a node that does not lead the partition, or
with a stale or future current epoch: dispatch/leadership.py.
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

from . import leadership
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
            topic = ctx.services.topics.get(t.topic)
            if denied:
                parts.append(EpochEndOffset(int(ErrorCode.TOPIC_AUTHORIZATION_FAILED), p.partition, -1, -1))
                continue
            if plog is None or topic is None:
                parts.append(EpochEndOffset(int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION), p.partition, -1, -1))
                continue
            refused = leadership.check(ctx, topic, p.partition, p.current_leader_epoch if v >= 2 else -1)
            if refused:
                parts.append(EpochEndOffset(int(refused), p.partition, -1, -1))
            else:
                epoch, end = leadership.epoch_end(ctx, topic, p.partition, plog, p.leader_epoch)
                parts.append(EpochEndOffset(0, p.partition, epoch, end))
        topics.append(OffsetForLeaderTopicResult(topic=t.topic, partitions=parts))
    return OffsetForLeaderEpochResponse(throttle_time_ms=0, topics=topics)
