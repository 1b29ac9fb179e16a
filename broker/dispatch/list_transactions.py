"""ListTransactions (key 66) v0-2 (KIP-664): the transactional ids this coordinator knows, filtered
by state names (unknown names are listed back in ``unknown_state_filters``), producer ids, v1 a
minimum open duration (KIP-994) and v2 an RE2 pattern over the ids (KIP-1152, full match;
INVALID_REGULAR_EXPRESSION when it does not compile), as Kafka answers; only the ids the principal
may DESCRIBE are listed (Kafka's KafkaApis). On a multi-node cluster, only the ids this node
coordinates."""

from __future__ import annotations

from broker.protocol.generated.list_transactions import ListTransactionsRequest, ListTransactionsResponse
from broker.security.authorizer import DESCRIBE, TRANSACTIONAL_ID

from .registry import RequestContext

API_KEY = 66


def handle(ctx: RequestContext, req: ListTransactionsRequest) -> ListTransactionsResponse:
    v = ctx.api_version
    response = ctx.services.txns.list_transactions(
        list(req.state_filters),
        list(req.producer_id_filters),
        req.duration_filter if v >= 1 else -1,
        req.transactional_id_pattern if v >= 2 else None,
        node=ctx.node_id,
    )
    if ctx.services.authorizer is not None:
        response.transaction_states = [
            s
            for s in response.transaction_states
            if ctx.allowed(DESCRIBE, TRANSACTIONAL_ID, s.transactional_id)
        ]
    return response
