"""CreateAcls (key 30) v0-3: v1 resource pattern type (v0 ACLs are LITERAL); v2 flexible.

As Kafka's AclApis: ALTER on the cluster is needed (else CLUSTER_AUTHORIZATION_FAILED for every
creation); with no authorizer configured every creation gets SECURITY_DISABLED. Each creation is
checked as Kafka's broker and controller check it (INVALID_REQUEST: a CLUSTER resource not named
``kafka-cluster``, an empty name, UNKNOWN types or operations; an ANY resource type, operation or
permission or an ANY/MATCH pattern type fails the whole request with UNKNOWN_SERVER_ERROR, as in
Kafka, whose broker cannot build such a binding); the valid ones are written durably to the data directory
(broker.security.acl_store) before the answer. An ACL that exists already is not added twice. A
creation with an UNKNOWN (0) code is a request Kafka cannot parse: the connection is closed.
"""

from __future__ import annotations

from broker.protocol.errors import ErrorCode
from broker.protocol.generated.create_acls import (
    AclCreation,
    AclCreationResult,
    CreateAclsRequest,
    CreateAclsResponse,
)
from broker.security.authorizer import (
    ALTER,
    CLUSTER,
    CLUSTER_NAME,
    OP_ANY,
    PERM_ANY,
    PT_ANY,
    PT_MATCH,
    RT_ANY,
    AclBinding,
)

from .registry import CloseConnection, RequestContext

API_KEY = 30


def unparseable(req: CreateAclsRequest) -> str | None:
    """Why Kafka cannot parse the request (it closes the connection), or None."""
    for c in req.creations:
        if 0 in (c.resource_type, c.resource_pattern_type, c.operation, c.permission_type):
            return "CreatableAcls contain unknown elements"
    return None


def binding(c: AclCreation) -> AclBinding:
    """The ACL a creation asks for."""
    return AclBinding(
        c.resource_type,
        c.resource_name,
        c.resource_pattern_type,
        c.principal,
        c.host,
        c.operation,
        c.permission_type,
    )


def handle(ctx: RequestContext, req: CreateAclsRequest) -> CreateAclsResponse:
    why = unparseable(req)
    if why is not None:
        raise CloseConnection(why)
    creations = req.creations
    if not ctx.allowed(ALTER, CLUSTER, CLUSTER_NAME):
        return _all(req, ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed.")
    store = ctx.services.acls
    if store is None:
        return _all(req, ErrorCode.SECURITY_DISABLED, "No Authorizer is configured.")
    if any(_not_a_binding(c) for c in creations):
        # as Kafka: an ANY resource type, operation or permission, or an ANY/MATCH pattern type,
        # cannot make the binding the broker builds for each creation: the whole request fails
        return _all(req, ErrorCode.UNKNOWN_SERVER_ERROR, None)
    reasons: list[str | None] = [None] * len(creations)
    valid: list[tuple[int, AclBinding]] = []
    for i, c in enumerate(creations):
        if c.resource_type == CLUSTER and c.resource_name != CLUSTER_NAME:
            reasons[i] = f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}"
        elif c.resource_name == "":
            reasons[i] = "Invalid empty resource name"
        else:
            valid.append((i, binding(c)))
    for (i, _), reason in zip(valid, store.create(acl for _, acl in valid), strict=True):
        reasons[i] = reason
    return CreateAclsResponse(
        throttle_time_ms=0,
        results=[
            AclCreationResult(error_code=0, error_message=None)
            if reason is None
            else AclCreationResult(error_code=int(ErrorCode.INVALID_REQUEST), error_message=reason)
            for reason in reasons
        ],
    )


def _not_a_binding(c: AclCreation) -> bool:
    return (
        c.resource_type == RT_ANY
        or c.resource_pattern_type in (PT_ANY, PT_MATCH)
        or c.operation == OP_ANY
        or c.permission_type == PERM_ANY
    )


def _all(req: CreateAclsRequest, code: ErrorCode, message: str | None) -> CreateAclsResponse:
    return CreateAclsResponse(
        throttle_time_ms=0,
        results=[AclCreationResult(error_code=int(code), error_message=message) for _ in req.creations],
    )


def error_response(req: CreateAclsRequest, version: int, code: ErrorCode) -> CreateAclsResponse:
    return _all(req, code, None)
