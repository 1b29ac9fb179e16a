"""DescribeQuorum (key 55) v0-2: v1 adds the replicas' last fetch and caught-up times; v2 error
messages, replica directory ids and the voters' endpoints.

This node is its cluster's whole KRaft quorum (combined broker and controller, as Kafka 4's single
node quickstart): the one voter and the leader, without observers. As Kafka's
KafkaRaftClient.handleDescribeQuorumRequest: the request must name exactly the metadata partition
``__cluster_metadata-0``, else each named partition gets UNKNOWN_TOPIC_OR_PARTITION. The leader's own
last fetch and caught-up times are now (as Kafka reports the leader). There is no metadata log here
(topics live in the topic registry), so a single node's leader epoch is 1 (never re-elected) and the
high watermark and the voter's log end offset are 0; the voter's directory id is the zero uuid (static voters, kraft.version 0).
The voter's endpoint (v2) is the listener the client connected to (no controller listener is
opened).

A simulated cluster (``cluster.nodes`` N > 1) is a combined-mode quorum of N nodes, each a broker
and a controller, as Kafka's KRaft runs one (``controller.quorum.voters`` naming every node): every
node is a voter, and there are no observers (in combined mode a node's broker is its controller's
raft replica, not a separate observer). The leader is the cluster's controller (the lowest live
node, as Metadata says), at the quorum's leader epoch (broker/nodes.py: +1 at each new controller
and each start, kept in the data directory). Live voters fetch from it, so they report the log end
offset and last fetch and caught-up times now. As Kafka's LeaderState (one per epoch, remembering
each voter's last fetch): a node that went down under this leader keeps its last fetch and
caught-up times and log end offset; one that went down before this epoch's election has not
fetched from this leader: -1 for all three. Every voter's endpoint (v2) is its own listener of the
client's listener name.
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
    nodes = ctx.services.nodes
    now = int(time.time() * 1000)
    listener = ctx.client.listener
    if nodes.multi:
        leader = nodes.controller()
        epoch = nodes.quorum_epoch
        voters = [_voter(n, nodes.voter_last_fetch(n)) for n in nodes.ids]
        endpoints = []
        for n in nodes.ids:
            address = nodes.address(n, listener)
            if address is not None:
                endpoints.append(
                    Node(node_id=n, listeners=[Listener(name=listener, host=address[0], port=address[1])])
                )
    else:
        leader = ctx.services.node_id
        epoch = LEADER_EPOCH
        voters = [_voter(leader, now)]
        host, port = ctx.services.advertised_address(listener)
        endpoints = [Node(node_id=leader, listeners=[Listener(name=listener, host=host, port=port)])]
    partition = DescribeQuorumResponsePartitionData(
        partition_index=0,
        error_code=0,
        error_message=None,
        leader_id=leader,
        leader_epoch=epoch,
        high_watermark=0,
        current_voters=voters,
        observers=[],
    )
    return DescribeQuorumResponse(
        error_code=0,
        error_message=None,
        topics=[DescribeQuorumResponseTopicData(topic_name=METADATA_TOPIC, partitions=[partition])],
        nodes=endpoints,
    )


def _voter(node: int, fetched_ms: int) -> ReplicaState:
    """A voter that fetched at ``fetched_ms`` (caught up then: one log, nothing to lag), or -1: none
    from this leader (log end offset unknown, -1, as Kafka's ReplicaState before a fetch)."""
    return ReplicaState(
        replica_id=node,
        replica_directory_id=ZERO_UUID,
        log_end_offset=0 if fetched_ms >= 0 else -1,
        last_fetch_timestamp=fetched_ms,
        last_caught_up_timestamp=fetched_ms,
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
