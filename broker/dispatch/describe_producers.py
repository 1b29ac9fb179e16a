"""DescribeProducers (key 61) v0 (KIP-664): a partition's active producers from its producer
state: id, epoch, last sequence and timestamp, coordinator epoch of the last marker, and the first
offset of the open transaction (-1 when none), as Kafka's ProducerStateManager reports them;
UNKNOWN_TOPIC_OR_PARTITION for a partition this node does not have. As Kafka's KafkaApis, per topic:
an invalid name is INVALID_TOPIC_EXCEPTION, then READ on the topic is needed
(TOPIC_AUTHORIZATION_FAILED), then it must exist; that error goes to each of its partitions."""

from __future__ import annotations

from broker.cluster import validate_topic_name
from broker.protocol.errors import ErrorCode, KafkaError
from broker.protocol.generated.describe_producers import (
    DescribeProducersRequest,
    DescribeProducersResponse,
    PartitionResponse,
    ProducerState,
    TopicResponse,
)
from broker.security.authorizer import READ, TOPIC

from .registry import RequestContext

API_KEY = 61


def _topic_error(ctx: RequestContext, name: str) -> tuple[ErrorCode, str | None] | None:
    try:
        validate_topic_name(name)
    except KafkaError as e:
        return e.code, e.message
    if not ctx.allowed(READ, TOPIC, name):
        return ErrorCode.TOPIC_AUTHORIZATION_FAILED, None
    if ctx.services.topics.get(name) is None:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None
    return None


def handle(ctx: RequestContext, req: DescribeProducersRequest) -> DescribeProducersResponse:
    logs = ctx.services.logs
    topics = []
    for t in req.topics:
        parts = []
        refused = _topic_error(ctx, t.name)
        for index in t.partition_indexes:
            if refused is not None:
                parts.append(PartitionResponse(
                    partition_index=index, error_code=int(refused[0]), error_message=refused[1],
                    active_producers=[],
                ))  # fmt: skip
                continue
            plog = logs.get(t.name, index)
            if plog is None:
                parts.append(PartitionResponse(
                    partition_index=index, error_code=int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
                    error_message=None, active_producers=[],
                ))  # fmt: skip
                continue
            active = [
                ProducerState(
                    producer_id=pid,
                    producer_epoch=e.epoch,
                    last_sequence=e.last_seq,
                    last_timestamp=e.last_timestamp,
                    coordinator_epoch=e.coordinator_epoch,
                    current_txn_start_offset=e.txn_first_offset,
                )
                for pid, e in sorted(plog.producers.producers.items())
            ]
            parts.append(PartitionResponse(partition_index=index, error_code=0, error_message=None,
                                           active_producers=active))  # fmt: skip
        topics.append(TopicResponse(name=t.name, partitions=parts))
    return DescribeProducersResponse(throttle_time_ms=0, topics=topics)
