"""DescribeAcls (key 29) v0-3: v1 pattern type filter (v0 filters LITERAL patterns); v2 flexible.

As Kafka's AclApis: DESCRIBE on the cluster is needed (else CLUSTER_AUTHORIZATION_FAILED); with no
authorizer configured the answer is SECURITY_DISABLED. The ACLs the filter matches
(broker.security.authorizer.AclFilter: ANY and null match anything, MATCH every pattern that applies
to the name) come grouped by resource pattern. A filter with an UNKNOWN (0) code is a request Kafka
cannot parse: the connection is closed.
"""

from __future__ import annotations

from broker.protocol.errors import ErrorCode
from broker.protocol.generated.describe_acls import (
    AclDescription,
    DescribeAclsRequest,
    DescribeAclsResource,
    DescribeAclsResponse,
)
from broker.security.authorizer import CLUSTER, CLUSTER_NAME, DESCRIBE, AclBinding, AclFilter

from .registry import CloseConnection, RequestContext

API_KEY = 29


def unparseable(req: DescribeAclsRequest) -> str | None:
    """Why Kafka cannot parse the request (it closes the connection), or None."""
    if 0 in (req.resource_type_filter, req.pattern_type_filter, req.operation, req.permission_type):
        return "DescribeAclsRequest contains UNKNOWN elements"
    return None


def handle(ctx: RequestContext, req: DescribeAclsRequest) -> DescribeAclsResponse:
    why = unparseable(req)
    if why is not None:
        raise CloseConnection(why)
    if not ctx.allowed(DESCRIBE, CLUSTER, CLUSTER_NAME):
        return _error(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed.")
    store = ctx.services.acls
    if store is None:
        return _error(ErrorCode.SECURITY_DISABLED, "No Authorizer is configured on the broker")
    flt = AclFilter.of(
        req.resource_type_filter,
        req.resource_name_filter,
        req.pattern_type_filter,
        req.principal_filter,
        req.host_filter,
        req.operation,
        req.permission_type,
    )
    return DescribeAclsResponse(
        throttle_time_ms=0, error_code=0, error_message=None, resources=resources(store.describe(flt))
    )


def resources(acls: list[AclBinding]) -> list[DescribeAclsResource]:
    """ACLs grouped by resource pattern (Kafka's DescribeAclsResponse.aclsResources)."""
    by_pattern: dict[tuple[int, str, int], list[AclDescription]] = {}
    for acl in acls:
        by_pattern.setdefault((acl.resource_type, acl.resource_name, acl.pattern_type), []).append(
            AclDescription(
                principal=acl.principal,
                host=acl.host,
                operation=acl.operation,
                permission_type=acl.permission,
            )
        )
    return [
        DescribeAclsResource(resource_type=rt, resource_name=name, pattern_type=pt, acls=descriptions)
        for (rt, name, pt), descriptions in by_pattern.items()
    ]


def _error(code: ErrorCode, message: str | None) -> DescribeAclsResponse:
    return DescribeAclsResponse(throttle_time_ms=0, error_code=int(code), error_message=message, resources=[])


def error_response(req: DescribeAclsRequest, version: int, code: ErrorCode) -> DescribeAclsResponse:
    return _error(code, None)
