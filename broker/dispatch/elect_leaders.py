"""ElectLeaders (key 43) v0-2: v1 election type and top-level error code; v2 flexible.

As Kafka's controller (ReplicationControlManager.electLeaders) on a one-node cluster: every partition
has this node as its only replica, which is its preferred replica and its leader, so a preferred
election and an unclean one (a partition with a leader) are both ELECTION_NOT_NEEDED; an unknown topic
or partition is UNKNOWN_TOPIC_OR_PARTITION. With null partitions, every topic is answered with the
partitions whose election was needed -- none. An election type other than 0 and 1 is
INVALID_REQUEST for the whole request.

On a multi-node cluster (broker/nodes.py): a preferred election makes the first replica lead
again (NONE; ELECTION_NOT_NEEDED when it leads, PREFERRED_LEADER_NOT_AVAILABLE when it is down),
an unclean one gives a leaderless partition its first live replica (ELECTION_NOT_NEEDED when it
has a leader, ELIGIBLE_LEADERS_NOT_AVAILABLE with none live); each election bumps the epoch.
"""

from __future__ import annotations

from broker.protocol.errors import ErrorCode, KafkaError
from broker.protocol.generated.elect_leaders import (
    ElectLeadersRequest,
    ElectLeadersResponse,
    PartitionResult,
    ReplicaElectionResult,
)
from broker.security.authorizer import ALTER, CLUSTER, CLUSTER_NAME

from .registry import RequestContext

API_KEY = 43

PREFERRED, UNCLEAN = 0, 1
NOT_NEEDED = "Leader election not needed for topic partition."
_MESSAGES = {
    ErrorCode.ELECTION_NOT_NEEDED: NOT_NEEDED,
    ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE: "Failed to elect leader for partition: the preferred replica is not live.",
    ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE: "Failed to elect leader for partition: no live replica.",
}


def handle(ctx: RequestContext, req: ElectLeadersRequest) -> ElectLeadersResponse:
    if not ctx.allowed(ALTER, CLUSTER, CLUSTER_NAME):  # as Kafka: ALTER on the cluster
        raise KafkaError(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed.")
    if ctx.api_version >= 1 and req.election_type not in (PREFERRED, UNCLEAN):
        return error_response(req, ctx.api_version, ErrorCode.INVALID_REQUEST)
    services = ctx.services
    if req.topic_partitions is None:
        results = [ReplicaElectionResult(topic=t.name, partition_result=[]) for t in services.topics.all()]
        return ElectLeadersResponse(throttle_time_ms=0, error_code=0, replica_election_results=results)
    results = []
    for tp in req.topic_partitions:
        topic = services.topics.get(tp.topic)
        parts = []
        for p in tp.partitions:
            if topic is None:
                parts.append(
                    PartitionResult(
                        p, int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION), f"No such topic as {tp.topic}"
                    )
                )
            elif not 0 <= p < topic.partitions:
                parts.append(
                    PartitionResult(
                        p, int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION), f"No such partition as {tp.topic}-{p}"
                    )
                )
            elif not services.nodes.multi:
                parts.append(PartitionResult(p, int(ErrorCode.ELECTION_NOT_NEEDED), NOT_NEEDED))
            else:
                code = services.nodes.elect(
                    topic, p, unclean=ctx.api_version >= 1 and req.election_type == UNCLEAN
                )
                parts.append(PartitionResult(p, int(code), _MESSAGES.get(code)))
        results.append(ReplicaElectionResult(topic=tp.topic, partition_result=parts))
    return ElectLeadersResponse(throttle_time_ms=0, error_code=0, replica_election_results=results)


def error_response(req: ElectLeadersRequest, version: int, code: ErrorCode) -> ElectLeadersResponse:
    results = [
        ReplicaElectionResult(
            topic=tp.topic, partition_result=[PartitionResult(p, int(code), None) for p in tp.partitions]
        )
        for tp in req.topic_partitions or []
    ]
    return ElectLeadersResponse(throttle_time_ms=0, error_code=int(code), replica_election_results=results)
