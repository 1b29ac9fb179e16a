"""DescribeQuorum (key 55) v0-2: v1 adds the replicas' last fetch and caught-up times; v2 error
messages, replica directory ids and the voters' endpoints.

This node is its cluster's whole KRaft quorum (combined broker and controller, as Kafka 4's single
node quickstart): the one voter and the leader, without observers. As Kafka's
KafkaRaftClient.handleDescribeQuorumRequest: the request must name exactly the metadata partition
``__cluster_metadata-0``, else each named partition gets UNKNOWN_TOPIC_OR_PARTITION. The leader's own
last fetch and caught-up times are now (as Kafka reports the leader). There is no metadata log here
(topics live in the topic registry), so the leader epoch is 1 and the high watermark and the voter's
log end offset are 0; the voter's directory id is the zero uuid (static voters, kraft.version 0).
The voter's endpoint (v2) is the listener the client connected to (no controller listener is
opened).
"""

from __future__ import annotations

import time

from broker.protocol.errors import ErrorCode, KafkaError
from broker.protocol.generated.describe_quorum import (
    DescribeQuorumRequest,
    DescribeQuorumResponse,
    DescribeQuorumResponsePartitionData,
    DescribeQuorumResponseTopicData,
    Listener,
    Node,
    ReplicaState,
)
from broker.protocol.primitives import ZERO_UUID
from broker.security.authorizer import CLUSTER, CLUSTER_NAME, DESCRIBE

from .registry import RequestContext

API_KEY = 55

METADATA_TOPIC = "__cluster_metadata"
LEADER_EPOCH = 1


def _valid(req: DescribeQuorumRequest) -> bool:
    return (
        len(req.topics) == 1
        and req.topics[0].topic_name == METADATA_TOPIC
        and len(req.topics[0].partitions) == 1
        and req.topics[0].partitions[0].partition_index == 0
    )


def handle(ctx: RequestContext, req: DescribeQuorumRequest) -> DescribeQuorumResponse:
    if not ctx.allowed(DESCRIBE, CLUSTER, CLUSTER_NAME):  # as Kafka: DESCRIBE on the cluster
        raise KafkaError(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed.")
    if not _valid(req):
        return _partition_errors(
            req, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "This server does not host this topic-partition."
        )
    node = ctx.services.node_id
    now = int(time.time() * 1000)
    voter = ReplicaState(
        replica_id=node,
        replica_directory_id=ZERO_UUID,
        log_end_offset=0,
        last_fetch_timestamp=now,
        last_caught_up_timestamp=now,
    )
    partition = DescribeQuorumResponsePartitionData(
        partition_index=0,
        error_code=0,
        error_message=None,
        leader_id=node,
        leader_epoch=LEADER_EPOCH,
        high_watermark=0,
        current_voters=[voter],
        observers=[],
    )
    host, port = ctx.services.advertised_address(ctx.client.listener)
    return DescribeQuorumResponse(
        error_code=0,
        error_message=None,
        topics=[DescribeQuorumResponseTopicData(topic_name=METADATA_TOPIC, partitions=[partition])],
        nodes=[Node(node_id=node, listeners=[Listener(name=ctx.client.listener, host=host, port=port)])],
    )


def _partition_errors(
    req: DescribeQuorumRequest, code: ErrorCode, message: str | None
) -> DescribeQuorumResponse:
    topics = [
        DescribeQuorumResponseTopicData(
            topic_name=t.topic_name,
            partitions=[
                DescribeQuorumResponsePartitionData(
                    partition_index=p.partition_index,
                    error_code=int(code),
                    error_message=message,
                    leader_id=0,
                    leader_epoch=0,
                    high_watermark=0,
                    current_voters=[],
                    observers=[],
                )
                for p in t.partitions
            ],
        )
        for t in req.topics
    ]
    return DescribeQuorumResponse(error_code=0, error_message=None, topics=topics, nodes=[])


def error_response(req: DescribeQuorumRequest, version: int, code: ErrorCode) -> DescribeQuorumResponse:
    return DescribeQuorumResponse(error_code=int(code), error_message=None, topics=[], nodes=[])
