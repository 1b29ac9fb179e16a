"""EndTxn (key 26) v0-4: v1-2 change nothing on the wire; v3 is flexible; v4 may answer
TRANSACTION_ABORTABLE. v5 (KIP-890 part 2, transaction.version 2: the epoch bumped at every end)
is not served: this broker finalizes transaction.version 0, so clients end transactions the
classic way. Answered once the markers are written and the transaction is complete
(PRODUCER_FENCED is INVALID_PRODUCER_EPOCH below v2, as Kafka answers). Needs WRITE on the
transactional id, else TRANSACTIONAL_ID_AUTHORIZATION_FAILED (Kafka's KafkaApis)."""

from __future__ import annotations

from typing import Any

from broker.protocol.errors import ErrorCode
from broker.protocol.generated.end_txn import EndTxnRequest, EndTxnResponse
from broker.security.authorizer import TRANSACTIONAL_ID, WRITE

from .registry import RequestContext

API_KEY = 26
VERSIONS = (0, 4)


def handle(ctx: RequestContext, req: EndTxnRequest) -> Any:
    if not ctx.allowed(WRITE, TRANSACTIONAL_ID, req.transactional_id):
        return EndTxnResponse(
            throttle_time_ms=0, error_code=int(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
        )
    return _end(ctx, req)


async def _end(ctx: RequestContext, req: EndTxnRequest) -> EndTxnResponse:
    code, _pid, _epoch = await ctx.services.txns.end_txn(
        req.transactional_id, req.producer_id, req.producer_epoch, req.committed
    )
    if code == ErrorCode.PRODUCER_FENCED and ctx.api_version < 2:
        code = int(ErrorCode.INVALID_PRODUCER_EPOCH)
    return EndTxnResponse(throttle_time_ms=0, error_code=code)
