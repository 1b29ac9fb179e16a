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

from . import acl
from .registry import RequestContext

API_KEY = 60

BROKERS = 1


def handle(ctx: RequestContext, req: DescribeClusterRequest) -> DescribeClusterResponse:
    b = ctx.broker
    if ctx.api_version >= 1 and req.endpoint_type != BROKERS:
        return DescribeClusterResponse(
            error_code=ErrorCode.UNSUPPORTED_ENDPOINT_TYPE,
            error_message="only the broker endpoint type is served",
            endpoint_type=req.endpoint_type,
            cluster_id=b.cluster_id,
            controller_id=-1,
        )
    host, port = b.advertised_address(ctx.client.listener)
    return DescribeClusterResponse(
        error_code=0,
        error_message=None,
        endpoint_type=BROKERS,
        cluster_id=b.cluster_id,
        controller_id=b.node_id,
        brokers=[
            DescribeClusterBroker(
                broker_id=b.node_id,
                host=host,
                port=port,
                rack=b.rack,
                is_fenced=False,
            )
        ],
        cluster_authorized_operations=(
            acl.CLUSTER_OPS if req.include_cluster_authorized_operations else acl.NOT_REQUESTED
        ),
    )
