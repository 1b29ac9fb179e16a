"""DescribeClientQuotas (key 48) v0-1: v1 flexible.

The quota entities the filter selects, with their values (``broker.quotas``): every component must
hold (exact name, default entity, or any entity of the type), and ``strict`` leaves out entities
with types the filter does not name. A bad filter is the whole answer's error, with Kafka's text
and no entries: INVALID_REQUEST (an empty or repeated type, a match string where the match type
takes none or none where it needs one, an unknown match type, ip combined with user or client-id),
UNSUPPORTED_VERSION for an entity type other than user, client-id and ip.
"""

from __future__ import annotations

from broker.protocol.errors import ErrorCode, KafkaError
from broker.protocol.generated.describe_client_quotas import (
    DescribeClientQuotasRequest,
    DescribeClientQuotasResponse,
    EntityData,
    EntryData,
    ValueData,
)
from broker.security.authorizer import CLUSTER, CLUSTER_NAME, DESCRIBE_CONFIGS

from .registry import RequestContext

API_KEY = 48


def handle(ctx: RequestContext, req: DescribeClientQuotasRequest) -> DescribeClientQuotasResponse:
    if not ctx.allowed(DESCRIBE_CONFIGS, CLUSTER, CLUSTER_NAME):  # as Kafka: DESCRIBE_CONFIGS on the cluster
        raise KafkaError(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed.")
    try:
        found = ctx.services.quotas.describe(
            ((c.entity_type, c.match_type, c.match) for c in req.components), req.strict
        )
    except KafkaError as e:
        return _error(e.code, e.message)
    entries = [
        EntryData(
            entity=[EntityData(entity_type=t, entity_name=n) for t, n in entity],
            values=[ValueData(key=k, value=v) for k, v in values.items()],
        )
        for entity, values in found
    ]
    return DescribeClientQuotasResponse(throttle_time_ms=0, error_code=0, error_message=None, entries=entries)


def _error(code: ErrorCode, message: str | None) -> DescribeClientQuotasResponse:
    return DescribeClientQuotasResponse(
        throttle_time_ms=0, error_code=int(code), error_message=message, entries=None
    )


def error_response(
    req: DescribeClientQuotasRequest, version: int, code: ErrorCode
) -> DescribeClientQuotasResponse:
    return _error(code, None)
