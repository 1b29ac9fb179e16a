"""AlterPartitionReassignments (key 45) v0-1: v1 AllowReplicationFactorChange (KIP-1101).

As Kafka's controller (ReplicationControlManager.alterPartitionReassignments) on a one-node cluster,
per partition: an unknown topic or partition is UNKNOWN_TOPIC_OR_PARTITION; null replicas cancel a
reassignment in progress, and there never is one: NO_REASSIGNMENT_IN_PROGRESS; a target replica
list must be non-empty, name only registered brokers (this node) and each once, else
INVALID_REPLICA_ASSIGNMENT (checked on the sorted ids, as Kafka); with AllowReplicationFactorChange
false, a target of another size than the current one is INVALID_REPLICATION_FACTOR. The only valid
target is this node, which is the current assignment: nothing moves, NONE (and nothing is listed
by ListPartitionReassignments). On a multi-node cluster (broker/nodes.py) any registered nodes may
be named: the reassignment completes at once (one log: nothing to copy), a leader left out hands
over to the first live new replica, and there is never one in progress to list.
"""

from __future__ import annotations

from broker.protocol.errors import ErrorCode, KafkaError
from broker.protocol.generated.alter_partition_reassignments import (
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
    ReassignablePartition,
    ReassignablePartitionResponse,
    ReassignableTopicResponse,
)
from broker.security.authorizer import ALTER, CLUSTER, CLUSTER_NAME

from .registry import RequestContext

API_KEY = 45


def _alter(
    ctx: RequestContext, topic_name: str, target: ReassignablePartition, allow_rf_change: bool
) -> None:
    topic = ctx.services.topics.get(topic_name)
    if topic is None:
        raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Unable to find a topic named {topic_name}.")
    if not 0 <= target.partition_index < topic.partitions:
        raise KafkaError(
            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
            f"Unable to find partition {topic_name}:{target.partition_index}.",
        )
    if target.replicas is None:
        raise KafkaError(ErrorCode.NO_REASSIGNMENT_IN_PROGRESS, "No partition reassignment is in progress.")
    if not target.replicas:
        raise KafkaError(
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            "The manual partition assignment includes an empty replica list.",
        )
    nodes = ctx.services.nodes
    previous = None
    for broker_id in sorted(target.replicas):
        if broker_id not in nodes.ids:
            raise KafkaError(
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                f"The manual partition assignment includes broker {broker_id}, but no such broker is registered.",
            )
        if broker_id == previous:
            raise KafkaError(
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                f"The manual partition assignment includes the broker {broker_id} more than once.",
            )
        previous = broker_id
    current = nodes.state(topic, target.partition_index).replicas
    if not allow_rf_change and len(target.replicas) != len(current):
        raise KafkaError(
            ErrorCode.INVALID_REPLICATION_FACTOR,
            f"The replication factor is changed from {len(current)} to {len(target.replicas)}",
        )
    if nodes.multi and list(target.replicas) != current:  # completes at once: one log, nothing to copy
        nodes.reassign(topic, target.partition_index, list(target.replicas))


def handle(
    ctx: RequestContext, req: AlterPartitionReassignmentsRequest
) -> AlterPartitionReassignmentsResponse:
    if not ctx.allowed(ALTER, CLUSTER, CLUSTER_NAME):  # as Kafka: ALTER on the cluster
        raise KafkaError(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed.")
    allow = req.allow_replication_factor_change if ctx.api_version >= 1 else True
    responses = []
    for t in req.topics:
        parts = []
        for p in t.partitions:
            try:
                _alter(ctx, t.name, p, allow)
            except KafkaError as e:
                parts.append(ReassignablePartitionResponse(p.partition_index, int(e.code), e.message))
            else:
                parts.append(ReassignablePartitionResponse(p.partition_index, 0, None))
        responses.append(ReassignableTopicResponse(name=t.name, partitions=parts))
    return AlterPartitionReassignmentsResponse(
        throttle_time_ms=0,
        allow_replication_factor_change=allow,
        error_code=0,
        error_message=None,
        responses=responses,
    )


def error_response(
    req: AlterPartitionReassignmentsRequest, version: int, code: ErrorCode
) -> AlterPartitionReassignmentsResponse:
    return AlterPartitionReassignmentsResponse(
        throttle_time_ms=0,
        allow_replication_factor_change=req.allow_replication_factor_change,
        error_code=int(code),
        error_message=None,
        responses=[],
    )
