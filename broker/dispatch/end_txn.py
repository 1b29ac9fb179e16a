"""EndTxn (key 26) v0-5: v1-2 change nothing on the wire; v3 is flexible; v4 may answer
TRANSACTION_ABORTABLE; v5 (KIP-890 part 2, transaction version 2) bumps the producer epoch at every
end and answers the producer id and epoch of the producer's next transaction (a new producer id
once the epoch is exhausted). As in Kafka's KafkaApis, the request's version decides: v5 is a TV2
end, below it the classic one (clients send v5 only while transaction.version 2 is finalized).
Answered once the markers are written and the transaction is complete (PRODUCER_FENCED is
INVALID_PRODUCER_EPOCH below v2, as Kafka answers). Needs WRITE on the transactional id, else
TRANSACTIONAL_ID_AUTHORIZATION_FAILED (Kafka's KafkaApis). NOT_COORDINATOR from a node that does
not coordinate the transactional id (multi-node cluster), or when its coordinator moved before the
transaction completed."""

from __future__ import annotations

from typing import Any

from broker.protocol.errors import ErrorCode
from broker.protocol.generated.end_txn import EndTxnRequest, EndTxnResponse
from broker.security.authorizer import TRANSACTIONAL_ID, WRITE

from .registry import RequestContext

API_KEY = 26
VERSIONS = (0, 5)
#: the first version ending transactions the KIP-890 part 2 way
TV2_VERSION = 5


def handle(ctx: RequestContext, req: EndTxnRequest) -> Any:
    if not ctx.allowed(WRITE, TRANSACTIONAL_ID, req.transactional_id):
        return EndTxnResponse(
            throttle_time_ms=0, error_code=int(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
        )
    return _end(ctx, req)


async def _end(ctx: RequestContext, req: EndTxnRequest) -> EndTxnResponse:
    version = ctx.api_version
    tv = 2 if version >= TV2_VERSION else 0
    code, pid, epoch = await ctx.services.txns.end_txn(
        req.transactional_id, req.producer_id, req.producer_epoch, req.committed, tv, node=ctx.node_id
    )
    if code == ErrorCode.PRODUCER_FENCED and version < 2:
        code = int(ErrorCode.INVALID_PRODUCER_EPOCH)
    if code:
        pid, epoch = -1, -1
    return EndTxnResponse(throttle_time_ms=0, error_code=code, producer_id=pid, producer_epoch=epoch)
