"""DescribeTransactions (key 65) v0 (KIP-664): each transactional id's state, producer id and
epoch, timeout, start time and partitions, as Kafka answers (TRANSACTIONAL_ID_NOT_FOUND for an
unknown id, INVALID_REQUEST for the empty one). As Kafka's KafkaApis: an id the principal may not
DESCRIBE is TRANSACTIONAL_ID_AUTHORIZATION_FAILED, and the topics it may not DESCRIBE are left out
of a transaction's partitions. On a multi-node cluster an id this node does not coordinate is
NOT_COORDINATOR."""

from __future__ import annotations

from broker.protocol.errors import ErrorCode
from broker.protocol.generated.describe_transactions import (
    DescribeTransactionsRequest,
    DescribeTransactionsResponse,
    TransactionState,
)
from broker.security.authorizer import DESCRIBE, TOPIC, TRANSACTIONAL_ID

from .registry import RequestContext

API_KEY = 65


def handle(ctx: RequestContext, req: DescribeTransactionsRequest) -> DescribeTransactionsResponse:
    if ctx.services.authorizer is None:
        states = ctx.services.txns.describe(list(req.transactional_ids), node=ctx.node_id)
    else:
        states = []
        for tid in req.transactional_ids:
            if not ctx.allowed(DESCRIBE, TRANSACTIONAL_ID, tid):
                states.append(
                    TransactionState(
                        error_code=int(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED),
                        transactional_id=tid,
                        topics=[],
                    )
                )
                continue
            (state,) = ctx.services.txns.describe([tid], node=ctx.node_id)
            state.topics = [t for t in state.topics if ctx.allowed(DESCRIBE, TOPIC, t.topic)]
            states.append(state)
    return DescribeTransactionsResponse(throttle_time_ms=0, transaction_states=states)
