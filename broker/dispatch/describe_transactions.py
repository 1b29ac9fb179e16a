"""DescribeTransactions (key 65) v0 (KIP-664): each transactional id's state, producer id and
epoch, timeout, start time and partitions, as Kafka answers (TRANSACTIONAL_ID_NOT_FOUND for an
unknown id, INVALID_REQUEST for the empty one)."""

from __future__ import annotations

from broker.protocol.generated.describe_transactions import (
    DescribeTransactionsRequest,
    DescribeTransactionsResponse,
)

from .registry import RequestContext

API_KEY = 65


def handle(ctx: RequestContext, req: DescribeTransactionsRequest) -> DescribeTransactionsResponse:
    states = ctx.services.txns.describe(list(req.transactional_ids))
    return DescribeTransactionsResponse(throttle_time_ms=0, transaction_states=states)
