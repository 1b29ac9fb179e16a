"""DeleteAcls (key 31) v0-3: v1 pattern type filter (v0 filters LITERAL patterns); v2 flexible.

As Kafka's AclApis: ALTER on the cluster is needed (else CLUSTER_AUTHORIZATION_FAILED for every
filter); with no authorizer configured every filter gets SECURITY_DISABLED. Each filter deletes every
ACL it matches and lists them (an ACL matched by two filters is listed by both); a filter with an
unknown code gets INVALID_REQUEST. The deletions are written durably (broker.security.acl_store)
before the answer. A filter with an UNKNOWN (0) code is a request Kafka cannot parse: the connection
is closed.
"""

from __future__ import annotations

from broker.protocol.errors import ErrorCode
from broker.protocol.generated.delete_acls import (
    DeleteAclsFilterResult,
    DeleteAclsMatchingAcl,
    DeleteAclsRequest,
    DeleteAclsResponse,
)
from broker.security.authorizer import ALTER, CLUSTER, CLUSTER_NAME, AclFilter

from .registry import CloseConnection, RequestContext

API_KEY = 31


def unparseable(req: DeleteAclsRequest) -> str | None:
    """Why Kafka cannot parse the request (it closes the connection), or None."""
    for f in req.filters:
        if 0 in (f.resource_type_filter, f.pattern_type_filter, f.operation, f.permission_type):
            return "Filters contain UNKNOWN elements"
    return None


def handle(ctx: RequestContext, req: DeleteAclsRequest) -> DeleteAclsResponse:
    why = unparseable(req)
    if why is not None:
        raise CloseConnection(why)
    if not ctx.allowed(ALTER, CLUSTER, CLUSTER_NAME):
        return _all(req, ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed.")
    store = ctx.services.acls
    if store is None:
        return _all(req, ErrorCode.SECURITY_DISABLED, "No Authorizer is configured.")
    results = store.delete(
        AclFilter.of(
            f.resource_type_filter,
            f.resource_name_filter,
            f.pattern_type_filter,
            f.principal_filter,
            f.host_filter,
            f.operation,
            f.permission_type,
        )
        for f in req.filters
    )
    out = []
    for reason, deleted in results:
        if reason is not None:
            out.append(
                DeleteAclsFilterResult(
                    error_code=int(ErrorCode.INVALID_REQUEST), error_message=reason, matching_acls=[]
                )
            )
            continue
        out.append(
            DeleteAclsFilterResult(
                error_code=0,
                error_message=None,
                matching_acls=[
                    DeleteAclsMatchingAcl(
                        error_code=0,
                        error_message=None,
                        resource_type=acl.resource_type,
                        resource_name=acl.resource_name,
                        pattern_type=acl.pattern_type,
                        principal=acl.principal,
                        host=acl.host,
                        operation=acl.operation,
                        permission_type=acl.permission,
                    )
                    for acl in deleted
                ],
            )
        )
    return DeleteAclsResponse(throttle_time_ms=0, filter_results=out)


def _all(req: DeleteAclsRequest, code: ErrorCode, message: str | None) -> DeleteAclsResponse:
    return DeleteAclsResponse(
        throttle_time_ms=0,
        filter_results=[
            DeleteAclsFilterResult(error_code=int(code), error_message=message, matching_acls=[])
            for _ in req.filters
        ],
    )


def error_response(req: DeleteAclsRequest, version: int, code: ErrorCode) -> DeleteAclsResponse:
    return _all(req, code, None)
