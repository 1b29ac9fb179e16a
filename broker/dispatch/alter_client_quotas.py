"""AlterClientQuotas (key 49) v0-1: v1 flexible.

Sets and removes quotas of user, client-id and ip entities (a null name is the type's default
entity) as Kafka's controller does (``broker.quotas``): each entity is checked on its own and
either changes whole or not at all, with INVALID_REQUEST and Kafka's text for an unknown entity
type or quota key, an empty name, an ip combined with user or client-id, an unresolvable ip, a
value <= 0 or a fraction for an integral key, a key given twice. ``validate_only`` checks and
changes nothing. The changes are durable (``client-quotas.json``) before the answer, and apply to
the next request of every client.
"""

from __future__ import annotations

import logging

from broker.protocol.errors import ErrorCode, KafkaError
from broker.protocol.generated.alter_client_quotas import (
    AlterClientQuotasRequest,
    AlterClientQuotasResponse,
)
from broker.protocol.generated.alter_client_quotas import (
    AlterClientQuotasResponseEntityData as EntityData,
)
from broker.protocol.generated.alter_client_quotas import (
    AlterClientQuotasResponseEntryData as EntryData,
)
from broker.quotas import entity_of
from broker.security.authorizer import ALTER_CONFIGS, CLUSTER, CLUSTER_NAME

from .registry import RequestContext

API_KEY = 49

log = logging.getLogger(__name__)


def handle(ctx: RequestContext, req: AlterClientQuotasRequest) -> AlterClientQuotasResponse:
    if not ctx.allowed(ALTER_CONFIGS, CLUSTER, CLUSTER_NAME):  # as Kafka: ALTER_CONFIGS on the cluster
        raise KafkaError(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed.")
    entries = [
        (
            entity_of((p.entity_type, p.entity_name) for p in e.entity),
            [(op.key, None if op.remove else op.value) for op in e.ops],
        )
        for e in req.entries
    ]
    try:
        results = ctx.services.quotas.alter(entries, req.validate_only)
    except OSError as e:
        log.error("writing client quotas failed: %s", e)
        return error_response(req, ctx.api_version, ErrorCode.KAFKA_STORAGE_ERROR)
    return AlterClientQuotasResponse(
        throttle_time_ms=0,
        entries=[
            EntryData(
                error_code=int(code),
                error_message=message,
                entity=[EntityData(entity_type=t, entity_name=n) for t, n in entity],
            )
            for entity, code, message in results
        ],
    )


def error_response(req: AlterClientQuotasRequest, version: int, code: ErrorCode) -> AlterClientQuotasResponse:
    return AlterClientQuotasResponse(
        throttle_time_ms=0,
        entries=[
            EntryData(
                error_code=int(code),
                error_message=None,
                entity=[EntityData(entity_type=p.entity_type, entity_name=p.entity_name) for p in e.entity],
            )
            for e in req.entries
        ],
    )
