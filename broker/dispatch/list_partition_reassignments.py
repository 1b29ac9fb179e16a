"""ListPartitionReassignments (key 46) v0.

As Kafka's controller: the reassignments in progress of the partitions asked for (null: all). On a
one-node cluster a reassignment never has anything to move (AlterPartitionReassignments accepts
only the current assignment), so none is ever in progress: the answer lists no topics, whichever
were named (unknown ones are left out too, as in Kafka).
"""

from __future__ import annotations

from broker.protocol.errors import ErrorCode, KafkaError
from broker.protocol.generated.list_partition_reassignments import (
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse,
)
from broker.security.authorizer import CLUSTER, CLUSTER_NAME, DESCRIBE

from .registry import RequestContext

API_KEY = 46


def handle(ctx: RequestContext, req: ListPartitionReassignmentsRequest) -> ListPartitionReassignmentsResponse:
    if not ctx.allowed(DESCRIBE, CLUSTER, CLUSTER_NAME):  # as Kafka: DESCRIBE on the cluster
        raise KafkaError(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed.")
    return ListPartitionReassignmentsResponse(throttle_time_ms=0, error_code=0, error_message=None, topics=[])


def error_response(
    req: ListPartitionReassignmentsRequest, version: int, code: ErrorCode
) -> ListPartitionReassignmentsResponse:
    return ListPartitionReassignmentsResponse(
        throttle_time_ms=0, error_code=int(code), error_message=None, topics=[]
    )
