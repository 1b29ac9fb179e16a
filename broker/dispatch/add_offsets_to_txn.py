"""AddOffsetsToTxn (key 25) v0-4: v1-2 change nothing on the wire; v3 is flexible; v4 may answer
TRANSACTION_ABORTABLE. Adds the group's ``__consumer_offsets`` partition to the transaction, so
that its TxnOffsetCommits are committed or aborted with it (PRODUCER_FENCED is
INVALID_PRODUCER_EPOCH below v2, as Kafka answers). As Kafka's KafkaApis: WRITE on the transactional
id (else TRANSACTIONAL_ID_AUTHORIZATION_FAILED), then READ on the group (GROUP_AUTHORIZATION_FAILED).
NOT_COORDINATOR from a node that does not coordinate the transactional id (multi-node cluster)."""

from __future__ import annotations

from typing import Any

from broker.protocol.errors import ErrorCode
from broker.protocol.generated.add_offsets_to_txn import AddOffsetsToTxnRequest, AddOffsetsToTxnResponse
from broker.security.authorizer import GROUP, READ, TRANSACTIONAL_ID, WRITE

from .registry import RequestContext

API_KEY = 25
#: the partition of __consumer_offsets every group maps to (it has one partition here)
OFFSETS_PARTITION = ("__consumer_offsets", 0)


def handle(ctx: RequestContext, req: AddOffsetsToTxnRequest) -> Any:
    v = ctx.api_version

    def answer(code: int) -> AddOffsetsToTxnResponse:
        if code == ErrorCode.PRODUCER_FENCED and v < 2:
            code = int(ErrorCode.INVALID_PRODUCER_EPOCH)
        return AddOffsetsToTxnResponse(throttle_time_ms=0, error_code=code)

    if not ctx.allowed(WRITE, TRANSACTIONAL_ID, req.transactional_id):
        return answer(int(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED))
    if not ctx.allowed(READ, GROUP, req.group_id):
        return answer(int(ErrorCode.GROUP_AUTHORIZATION_FAILED))
    ctx.services.groups.ensure_log()  # the partition must exist to be in a transaction
    out = ctx.services.txns.add_partitions(
        req.transactional_id, req.producer_id, req.producer_epoch, [OFFSETS_PARTITION], node=ctx.node_id
    )
    if isinstance(out, int):
        return answer(out)

    async def later() -> AddOffsetsToTxnResponse:
        return answer(await out)

    return later()
