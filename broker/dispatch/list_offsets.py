"""ListOffsets (key 2) v0-11: v0 old-style offset lists; v1 one offset and its timestamp; v2
isolation level; v4 current leader epoch and the leader epoch in answers; v6 flexible; v7 max
timestamp (-3, KIP-734); v8 earliest-local (-4, KIP-405); v9 latest tiered (-5, KIP-1005); v10
timeout; v11 earliest pending upload (-6, KIP-1023).

With isolation level read_committed (v2+), -1 is the last stable offset and a timestamp search
finds only offsets below it. Special timestamps, as Kafka answers them for a log without tiered storage: -1 latest (the high
watermark), -2 earliest and -4 earliest-local (both the log start offset), -3 the first record
carrying the largest timestamp (record-exact inside its batch, KAFKA-16310; offset -1 for an empty
log), -5 latest tiered and -6 earliest pending upload: offset -1, timestamp -1, leader epoch -1
(nothing is tiered). A timestamp T >= 0 finds the first record with timestamp >= T, or offset -1
when there is none.
"""

from __future__ import annotations

from broker.log.partition import PartitionLog
from broker.protocol.errors import ErrorCode
from broker.protocol.generated.list_offsets import (
    ListOffsetsPartitionResponse,
    ListOffsetsRequest,
    ListOffsetsResponse,
    ListOffsetsTopicResponse,
)
from broker.security.authorizer import DESCRIBE, TOPIC

from . import leadership
from .registry import RequestContext

API_KEY = 2

LATEST, EARLIEST, MAX_TIMESTAMP, EARLIEST_LOCAL, LATEST_TIERED, EARLIEST_PENDING_UPLOAD = (
    -1,
    -2,
    -3,
    -4,
    -5,
    -6,
)
#: the first version each special timestamp is valid at (Kafka's ReplicaManager: any other negative
#: timestamp, or one below its version, is UNSUPPORTED_VERSION; -1 and -2 also at our v0)
SINCE = {
    LATEST: 0,
    EARLIEST: 0,
    MAX_TIMESTAMP: 7,
    EARLIEST_LOCAL: 8,
    LATEST_TIERED: 9,
    EARLIEST_PENDING_UPLOAD: 11,
}


def lookup(plog: PartitionLog, ts: int, committed: bool = False) -> tuple[int, int]:
    """(offset, timestamp) for a ListOffsets timestamp query; (-1, -1) when nothing matches.
    ``committed`` (isolation level read_committed, v2+): latest is the last stable offset, and a
    timestamp search finds only offsets below it, as Kafka's Partition.fetchOffsetForTimestamp."""
    if ts == LATEST:
        return (plog.last_stable_offset if committed else plog.high_watermark), -1
    if committed and ts >= 0:
        found = plog.offset_for_timestamp(ts)
        return found if found is not None and found[0] < plog.last_stable_offset else (-1, -1)
    if ts in (EARLIEST, EARLIEST_LOCAL):
        return plog.log_start_offset, -1
    if ts in (LATEST_TIERED, EARLIEST_PENDING_UPLOAD):
        return -1, -1  # no tiered storage: UnifiedLog answers offset -1 with leader epoch -1
    if ts == MAX_TIMESTAMP:
        found = plog.max_timestamp_offset()
        return found if found is not None else (-1, -1)
    if ts < 0:
        return -1, -1
    found = plog.offset_for_timestamp(ts)
    return found if found is not None else (-1, -1)


def handle(ctx: RequestContext, req: ListOffsetsRequest) -> ListOffsetsResponse:
    v = ctx.api_version
    logs = ctx.services.logs
    topics = ctx.services.topics
    out = []
    for t in req.topics:
        parts = []
        # partitions named twice (librdkafka sends one partition a request: no count to build)
        twice = _repeated(t.partitions) if v >= 1 and len(t.partitions) > 1 else ()
        answered: set[int] = set()
        topic = None
        denied = not ctx.allowed(DESCRIBE, TOPIC, t.name)  # as Kafka, before the duplicate check
        for p in t.partitions:
            if denied:
                parts.append(_error(p.partition_index, ErrorCode.TOPIC_AUTHORIZATION_FAILED))
                continue
            if twice and p.partition_index in twice:
                # as Kafka (v1+): a partition named twice gets one INVALID_REQUEST answer
                if p.partition_index not in answered:
                    answered.add(p.partition_index)
                    parts.append(_error(p.partition_index, ErrorCode.INVALID_REQUEST))
                continue
            if p.timestamp < 0 and v < SINCE.get(p.timestamp, 1 << 15):  # before the partition's lookup
                parts.append(_error(p.partition_index, ErrorCode.UNSUPPORTED_VERSION))
                continue
            plog = logs.get(t.name, p.partition_index)
            if plog is None:
                parts.append(_error(p.partition_index, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
                continue
            if topic is None:
                topic = topics.get(t.name)
            refused = leadership.check(
                ctx, topic, p.partition_index, p.current_leader_epoch if v >= 4 else -1
            )
            if refused:
                parts.append(_error(p.partition_index, refused))
                continue
            offset, ts = lookup(plog, p.timestamp, v >= 2 and req.isolation_level == 1)
            if v == 0:
                old = [offset] if offset >= 0 and p.max_num_offsets > 0 else []
                parts.append(ListOffsetsPartitionResponse(p.partition_index, 0, old_style_offsets=old))
            else:
                parts.append(
                    ListOffsetsPartitionResponse(
                        partition_index=p.partition_index,
                        error_code=0,
                        timestamp=ts,
                        offset=offset,
                        # as Kafka: the latest offset is in the current epoch, any other found
                        # offset in the epoch its batch was stamped with
                        leader_epoch=(
                            -1
                            if offset < 0
                            else leadership.current_epoch(ctx, topic, p.partition_index)
                            if p.timestamp == LATEST
                            else leadership.epoch_at(ctx, topic, p.partition_index, plog, offset)
                        ),
                    )
                )
        out.append(ListOffsetsTopicResponse(name=t.name, partitions=parts))
    return ListOffsetsResponse(throttle_time_ms=0, topics=out)


def _repeated(partitions: list) -> set[int]:
    seen: set[int] = set()
    twice: set[int] = set()
    for p in partitions:
        (twice if p.partition_index in seen else seen).add(p.partition_index)
    return twice


def _error(index: int, code: ErrorCode) -> ListOffsetsPartitionResponse:
    return ListOffsetsPartitionResponse(
        partition_index=index, error_code=int(code), timestamp=-1, offset=-1, leader_epoch=-1
    )
