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

from typing import Any

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
            elif (
                not 0 <= p.leader_epoch <= leadership.current_epoch(ctx, topic, p.partition)
                or plog.log_end_offset == 0
            ):
                parts.append(EpochEndOffset(0, p.partition, -1, -1))
            else:
                current = leadership.current_epoch(ctx, topic, p.partition)
                epoch, end = end_offset_for(plog, p.leader_epoch, current)
                parts.append(EpochEndOffset(0, p.partition, epoch, end))
        topics.append(OffsetForLeaderTopicResult(topic=t.topic, partitions=parts))
    return OffsetForLeaderEpochResponse(throttle_time_ms=0, topics=topics)


def end_offset_for(plog: Any, requested: int, current: int) -> tuple[int, int]:
    """(epoch, end offset) of ``requested`` (0 <= requested <= current) in ``plog``'s log."""
    end = plog.log_end_offset
    if requested == current:
        return current, end
    lo, hi, first_later = plog.log_start_offset, min(end, plog.high_watermark), end
    while lo < hi:
        mid = (lo + hi) // 2
        batch = leadership.batch_at(plog, mid)
        if batch is None:
            hi = mid
        elif batch[2] > requested:
            first_later, hi = min(first_later, batch[0]), mid
        else:
            lo = batch[1] + 1
    before = leadership.batch_at(plog, first_later - 1) if first_later > plog.log_start_offset else None
    if before is None or before[0] >= first_later:
        return requested, first_later
    return before[2], first_later
