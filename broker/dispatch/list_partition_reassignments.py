"""ListPartitionReassignments (key 46) v0.

As Kafka's controller: the reassignments in progress of the partitions asked for (null: all). On a
one-node cluster a reassignment never has anything to move (AlterPartitionReassignments accepts
only the current assignment), so none is ever in progress: the answer lists no topics, whichever
were named (unknown ones are left out too, as in Kafka).
"""

from __future__ import annotations

from broker.protocol.errors import ErrorCode
from broker.protocol.generated.list_partition_reassignments import (
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse,
)

from .registry import RequestContext

API_KEY = 46


def handle(ctx: RequestContext, req: ListPartitionReassignmentsRequest) -> ListPartitionReassignmentsResponse:
    return ListPartitionReassignmentsResponse(throttle_time_ms=0, error_code=0, error_message=None, topics=[])


def error_response(
    req: ListPartitionReassignmentsRequest, version: int, code: ErrorCode
) -> ListPartitionReassignmentsResponse:
    return ListPartitionReassignmentsResponse(
        throttle_time_ms=0, error_code=int(code), error_message=None, topics=[]
    )
