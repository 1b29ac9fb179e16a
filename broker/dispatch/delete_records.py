"""DeleteRecords (key 21) v0-2: v1 no change on the wire; v2 flexible.

Moves each partition's log start offset up to the requested offset (-1: the high watermark), as
Kafka's ReplicaManager.deleteRecords does on a leader whose replicas are all in step: the new start
is checkpointed durably before it is answered (``log-start-offset-checkpoint``), records below it
are never served again (Fetch below it is OFFSET_OUT_OF_RANGE with the new log start offset,
ListOffsets EARLIEST answers it), and whole segments below it are deleted at once (or by the next
retention check while the log cleaner reads them). A start that is already higher stays.

Per partition, in Kafka's order: unknown topic or partition (UNKNOWN_TOPIC_OR_PARTITION); an internal
topic (INVALID_TOPIC_EXCEPTION); a topic whose cleanup.policy does not include ``delete``
(POLICY_VIOLATION); an offset below -1 or above the high watermark (OFFSET_OUT_OF_RANGE). Errors have
low watermark -1. A partition named twice is answered once, for the last offset given (Kafka keeps
the requests in a map). There is no replica to wait for, so ``timeout_ms`` is not used.
"""

from __future__ import annotations

import logging

from broker.protocol.errors import ErrorCode, KafkaError
from broker.protocol.generated.delete_records import (
    DeleteRecordsPartitionResult,
    DeleteRecordsRequest,
    DeleteRecordsResponse,
    DeleteRecordsTopicResult,
)
from broker.security.authorizer import DELETE, TOPIC

from . import leadership
from .registry import RequestContext

API_KEY = 21

HIGH_WATERMARK = -1
#: Kafka's Topic.isInternal names
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state", "__share_group_state"})

log = logging.getLogger(__name__)


def _delete(ctx: RequestContext, topic: str, partition: int, offset: int) -> int:
    services = ctx.services
    plog = services.logs.get(topic, partition)
    t = services.topics.get(topic)
    if plog is None or t is None:
        raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    refused = leadership.check(ctx, t, partition)
    if refused:
        raise KafkaError(refused)
    if t.internal or topic in INTERNAL_TOPICS:
        raise KafkaError(
            ErrorCode.INVALID_TOPIC_EXCEPTION, f"Cannot delete records of internal topic {topic}"
        )
    if "delete" not in plog.config.cleanup_policy:
        raise KafkaError(
            ErrorCode.POLICY_VIOLATION,
            f"Records of partition {topic}-{partition} can not be deleted due to the configured policy",
        )
    if offset == HIGH_WATERMARK:
        offset = plog.high_watermark
    if offset < 0:
        raise KafkaError(ErrorCode.OFFSET_OUT_OF_RANGE)
    return services.logs.delete_records(plog, offset)


def handle(ctx: RequestContext, req: DeleteRecordsRequest) -> DeleteRecordsResponse:
    wanted: dict[str, dict[int, int]] = {}
    for t in req.topics:
        parts = wanted.setdefault(t.name, {})
        for p in t.partitions:
            parts[p.partition_index] = p.offset
    topics = []
    for name, parts in wanted.items():
        results = []
        denied = not ctx.allowed(DELETE, TOPIC, name)  # as Kafka, before the topic's existence
        for partition, offset in parts.items():
            if denied:
                results.append(_result(partition, ErrorCode.TOPIC_AUTHORIZATION_FAILED))
                continue
            try:
                low = _delete(ctx, name, partition, offset)
            except KafkaError as e:
                results.append(_result(partition, e.code))
            except OSError as e:
                log.error("deleting records of %s-%d failed: %s", name, partition, e)
                results.append(_result(partition, ErrorCode.KAFKA_STORAGE_ERROR))
            else:
                results.append(_result(partition, ErrorCode.NONE, low))
        topics.append(DeleteRecordsTopicResult(name=name, partitions=results))
    return DeleteRecordsResponse(throttle_time_ms=0, topics=topics)


def _result(partition: int, code: ErrorCode, low_watermark: int = -1) -> DeleteRecordsPartitionResult:
    return DeleteRecordsPartitionResult(
        partition_index=partition, low_watermark=low_watermark, error_code=int(code)
    )


def error_response(req: DeleteRecordsRequest, version: int, code: ErrorCode) -> DeleteRecordsResponse:
    return DeleteRecordsResponse(
        throttle_time_ms=0,
        topics=[
            DeleteRecordsTopicResult(
                name=t.name, partitions=[_result(p.partition_index, code) for p in t.partitions]
            )
            for t in req.topics
        ],
    )
