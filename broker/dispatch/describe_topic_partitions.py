"""DescribeTopicPartitions (key 75) v0 (KIP-966): topic and partition metadata for admin clients,
paged. Kafka 3.8+ Java Admin clients describe topics with it (Metadata before that).

As Kafka's DescribeTopicPartitionsRequestHandler: the topics named (or every topic, when none is),
from the cursor's topic on, are described in name order, each from partition 0 (the cursor's topic
from the cursor's partition), until ``min(response_partition_limit,
max.request.partition.size.limit)`` (at least 1) partitions are listed; ``next_cursor`` then names
the first partition left out (a topic that did not fit at all starts the next page at partition 0).
A named topic that does not exist gets UNKNOWN_TOPIC_OR_PARTITION (INVALID_TOPIC_EXCEPTION for a
name that could never exist) and counts nothing; an unknown topic is left out when every topic was
asked for. A cursor whose topic is not among the named ones, or whose partition is negative, makes
the whole answer INVALID_REQUEST (each named topic with that error, as Kafka's error response). This
node leads every partition at epoch 0, alone in its ISR, with no eligible leader replicas (KIP-966
ELR empty, as Kafka lists it for a partition without ELR) and no offline replicas; authorized operations are every topic operation (there is no
authorizer).
"""

from __future__ import annotations

from broker.cluster import validate_topic_name
from broker.protocol.errors import ErrorCode, KafkaError
from broker.protocol.generated.describe_topic_partitions import (
    DescribeTopicPartitionsRequest,
    DescribeTopicPartitionsResponse,
    DescribeTopicPartitionsResponseCursor,
    DescribeTopicPartitionsResponsePartition,
    DescribeTopicPartitionsResponseTopic,
)
from broker.protocol.primitives import ZERO_UUID
from broker.security.authorizer import DESCRIBE, TOPIC

from . import acl
from .delete_records import INTERNAL_TOPICS
from .registry import RequestContext

API_KEY = 75


def handle(ctx: RequestContext, req: DescribeTopicPartitionsRequest) -> DescribeTopicPartitionsResponse:
    services = ctx.services
    cursor = req.cursor
    cursor_topic = cursor.topic_name if cursor is not None else ""
    every = not req.topics
    if every:
        names = {t.name for t in services.topics.all() if t.name >= cursor_topic}
    else:
        names = {t.name for t in req.topics if t.name >= cursor_topic}
        if cursor is not None and cursor.topic_name not in names:
            return error_response(req, 0, ErrorCode.INVALID_REQUEST)
    if cursor is not None and cursor.partition_index < 0:
        return error_response(req, 0, ErrorCode.INVALID_REQUEST)

    remaining = max(min(services.config["max.request.partition.size.limit"], req.response_partition_limit), 1)
    out: list[DescribeTopicPartitionsResponseTopic] = []
    next_cursor = None
    for name in sorted(names):
        if remaining <= 0:
            next_cursor = DescribeTopicPartitionsResponseCursor(topic_name=name, partition_index=0)
            break
        if not ctx.allowed(DESCRIBE, TOPIC, name):  # as Kafka: left out of a listing, else refused
            if not every:
                out.append(_unknown(name, ErrorCode.TOPIC_AUTHORIZATION_FAILED))
            continue
        topic = services.topics.get(name)
        if topic is None:
            if not every:
                out.append(_unknown(name))
            continue
        start = cursor.partition_index if cursor is not None and name == cursor_topic else 0
        upper = min(topic.partitions, start + remaining)
        parts = []
        for i in range(start, upper):
            st = services.nodes.state(topic, i)
            parts.append(
                DescribeTopicPartitionsResponsePartition(
                    error_code=0 if st.leader >= 0 else int(ErrorCode.LEADER_NOT_AVAILABLE),
                    partition_index=i,
                    leader_id=st.leader,
                    leader_epoch=st.leader_epoch,
                    replica_nodes=st.replicas,
                    isr_nodes=st.isr,
                    eligible_leader_replicas=[],
                    last_known_elr=[],
                    offline_replicas=st.offline,
                )
            )
        out.append(
            DescribeTopicPartitionsResponseTopic(
                error_code=0,
                name=name,
                topic_id=topic.topic_id,
                is_internal=topic.internal or name in INTERNAL_TOPICS,
                partitions=parts,
                topic_authorized_operations=ctx.authorized_operations(TOPIC, name, acl.TOPIC_OPS),
            )
        )
        if upper < topic.partitions:
            next_cursor = DescribeTopicPartitionsResponseCursor(topic_name=name, partition_index=upper)
            break
        remaining -= len(parts)
    return DescribeTopicPartitionsResponse(throttle_time_ms=0, topics=out, next_cursor=next_cursor)


def _unknown(name: str, code: ErrorCode | None = None) -> DescribeTopicPartitionsResponseTopic:
    try:  # as Kafka: a name that could never exist is INVALID_TOPIC_EXCEPTION
        validate_topic_name(name)
        code = code or ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    except KafkaError as e:
        code = code or e.code
    return DescribeTopicPartitionsResponseTopic(
        error_code=int(code),
        name=name,
        topic_id=ZERO_UUID,
        is_internal=name in INTERNAL_TOPICS,
        partitions=[],
        topic_authorized_operations=acl.TOPIC_OPS,
    )


def error_response(
    req: DescribeTopicPartitionsRequest, version: int, code: ErrorCode
) -> DescribeTopicPartitionsResponse:
    topics = [
        DescribeTopicPartitionsResponseTopic(
            error_code=int(code), name=t.name, topic_id=ZERO_UUID, is_internal=False, partitions=[]
        )
        for t in req.topics
    ]
    return DescribeTopicPartitionsResponse(throttle_time_ms=0, topics=topics, next_cursor=None)
