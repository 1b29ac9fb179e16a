"""FindCoordinator (key 10) v0-6: v1 adds key type (0 group, 1 transaction) and error message; v3 is
flexible; v4 batches keys (KIP-699); v6 adds share-group keys (type 2, not served here).

A key is coordinated by the leader of the coordinator slot it hashes to, as Kafka maps it
(broker/nodes.py): a group ``abs(key.hashCode()) % offsets.topic.num.partitions``, a transactional
id ``abs(key.hashCode()) % transaction.state.log.num.partitions``; this node on a single node;
COORDINATOR_NOT_AVAILABLE when the slot has no live replica. An empty key is answered as any
other (Kafka's KafkaApis.getCoordinator: the empty transactional id is refused by InitProducerId).
"""

from __future__ import annotations

from broker.protocol.errors import ErrorCode
from broker.protocol.generated.find_coordinator import (
    Coordinator,
    FindCoordinatorRequest,
    FindCoordinatorResponse,
)
from broker.security import authorizer as authz

from .registry import RequestContext

API_KEY = 10

GROUP, TRANSACTION, SHARE = 0, 1, 2


def _lookup(ctx: RequestContext, key: str, key_type: int) -> tuple[ErrorCode, str | None]:
    # as Kafka: DESCRIBE on the group, or on the transactional id, comes first
    if key_type == GROUP and not ctx.allowed(authz.DESCRIBE, authz.GROUP, key):
        return ErrorCode.GROUP_AUTHORIZATION_FAILED, "Group authorization failed."
    if key_type == TRANSACTION and not ctx.allowed(authz.DESCRIBE, authz.TRANSACTIONAL_ID, key):
        return ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, "Transactional Id authorization failed."
    if key_type not in (GROUP, TRANSACTION):
        if key_type == SHARE:
            return ErrorCode.INVALID_REQUEST, "share groups are not supported by this broker"
        return ErrorCode.INVALID_REQUEST, f"unknown coordinator key type {key_type}"
    return ErrorCode.NONE, None


def _coordinator(ctx: RequestContext, key: str, key_type: int) -> tuple[ErrorCode, str | None, int, str, int]:
    """(error, message, node, host, port) of the node coordinating ``key``."""
    b = ctx.services
    node = b.nodes.txn_coordinator(key) if key_type == TRANSACTION else b.nodes.coordinator(key)
    if node < 0:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE, "The coordinator is not available.", -1, "", -1
    host, port = b.nodes.address(node, ctx.client.listener) or b.advertised_address(ctx.client.listener)
    return ErrorCode.NONE, None, node, host, port


def handle(ctx: RequestContext, req: FindCoordinatorRequest) -> FindCoordinatorResponse:
    if ctx.api_version < 4:
        code, msg = _lookup(ctx, req.key, req.key_type)
        if not code:
            code, msg, node, host, port = _coordinator(ctx, req.key, req.key_type)
            if not code:
                return FindCoordinatorResponse(
                    error_code=0, error_message=None, node_id=node, host=host, port=port
                )
        return FindCoordinatorResponse(error_code=int(code), error_message=msg, node_id=-1, host="", port=-1)
    coordinators = []
    for key in req.coordinator_keys:
        code, msg = _lookup(ctx, key, req.key_type)
        if not code:
            code, msg, node, host, port = _coordinator(ctx, key, req.key_type)
            if not code:
                coordinators.append(Coordinator(key=key, node_id=node, host=host, port=port, error_code=0))
                continue
        coordinators.append(
            Coordinator(key=key, node_id=-1, host="", port=-1, error_code=int(code), error_message=msg)
        )
    return FindCoordinatorResponse(coordinators=coordinators)
