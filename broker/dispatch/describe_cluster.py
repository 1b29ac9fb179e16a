"""DescribeCluster (key 60) v0-2: v1 adds the endpoint type (1 = brokers; 2 = controllers, which a
combined one-node broker does not expose separately); v2 adds include_fenced_brokers and is_fenced.
"""

from __future__ import annotations

from broker.protocol.errors import ErrorCode
from broker.protocol.generated.describe_cluster import (
    DescribeClusterBroker,
    DescribeClusterRequest,
    DescribeClusterResponse,
)
from broker.security.authorizer import CLUSTER, CLUSTER_NAME, DESCRIBE

from . import acl
from .registry import RequestContext

API_KEY = 60

BROKERS, CONTROLLERS = 1, 2


def handle(ctx: RequestContext, req: DescribeClusterRequest) -> DescribeClusterResponse:
    b = ctx.services
    if ctx.api_version >= 1 and req.endpoint_type != BROKERS:
        # as Kafka's broker: asking it for controllers is a mismatch, any other type unsupported;
        # the answer names the endpoint type this is (brokers)
        controllers = req.endpoint_type == CONTROLLERS
        return DescribeClusterResponse(
            error_code=ErrorCode.MISMATCHED_ENDPOINT_TYPE
            if controllers
            else ErrorCode.UNSUPPORTED_ENDPOINT_TYPE,
            error_message="this is a broker endpoint"
            if controllers
            else "only the broker endpoint type is served",
            endpoint_type=BROKERS,
            cluster_id=b.cluster_id,
            controller_id=-1,
        )
    brokers = []
    for node in b.nodes.live_ids():
        host, port = b.nodes.address(node, ctx.client.listener) or b.advertised_address(ctx.client.listener)
        brokers.append(
            DescribeClusterBroker(broker_id=node, host=host, port=port, rack=b.rack, is_fenced=False)
        )
    return DescribeClusterResponse(
        error_code=0,
        error_message=None,
        endpoint_type=BROKERS,
        cluster_id=b.cluster_id,
        controller_id=b.nodes.controller(),
        brokers=brokers,
        cluster_authorized_operations=(
            _cluster_ops(ctx) if req.include_cluster_authorized_operations else acl.NOT_REQUESTED
        ),
    )


def _cluster_ops(ctx: RequestContext) -> int:
    """As Kafka: the cluster's authorized operations for a principal that may describe it, else 0."""
    if not ctx.allowed(DESCRIBE, CLUSTER, CLUSTER_NAME):
        return 0
    return ctx.authorized_operations(CLUSTER, CLUSTER_NAME, acl.CLUSTER_OPS)
